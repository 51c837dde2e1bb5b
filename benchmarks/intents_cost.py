"""build_request_context over stdio with a six-step plan vs the same call without one.

Target: with 6 intents p50 <= 40 ms at 1,000 items and <= 1.5x the call without intents.
The two kinds of call alternate in one session of one broker process, so both see the same
machine load; medians of each kind are compared.

Run: .venv/bin/python benchmarks/intents_cost.py [--items 1000] [--calls 200] [--reach]
    [--baseline DIR]

``--reach``: half the items are tools (50 servers of 10, ``agent``), and the six-step call is
measured against two broker processes, one naming tools within reach (the defaults) and one
with ``[search] reach_tokens = 0``, their calls alternating: what the candidates cost.

``--baseline DIR``: the same catalog (half tools, defaults), the six-step call measured
against two broker processes, this checkout's and DIR's (another checkout of the project,
``git worktree add /tmp/before <commit>``; it runs with this venv, its own code first on
``PYTHONPATH``), their calls alternating: after / before.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import anyio
from mcp import Client, StdioServerParameters

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _checkouts import python_path
from _common import percentile
from server_latency import _TOPICS, _VERBS, BROKER, QUERIES, write_catalog_config

PLANS = [
    [
        f"look up how we handle {topic}",
        "write a short summary of the findings",
        "check the logging conventions",
        "review the error handling rules",
        "update the documentation",
        "open a code review",
    ]
    for topic in ("caching", "deployment", "monitoring", "feature flags")
]


async def _measure(config: Path, calls: int) -> tuple[list[float], list[float]]:
    params = StdioServerParameters(
        command=BROKER, args=["--log-level", "WARNING", "serve", "--config", str(config)]
    )
    plain: list[float] = []
    planned: list[float] = []
    async with Client(params, mode="legacy") as client:
        created = await client.call_tool("create_session", {})
        sid = created.structured_content["session_id"]  # type: ignore[index]
        for i in range(6):  # warm-up: model load, embedding cache read
            await client.call_tool(
                "build_request_context",
                {"session_id": sid, "message": QUERIES[i], "intents": PLANS[i % len(PLANS)]},
            )
        for i in range(2 * calls):
            args: dict[str, object] = {"session_id": sid, "message": QUERIES[i % len(QUERIES)]}
            if i % 2:
                args["intents"] = PLANS[(i // 2) % len(PLANS)]
            started = time.perf_counter()
            result = await client.call_tool("build_request_context", args)
            (planned if i % 2 else plain).append((time.perf_counter() - started) * 1000)
            assert not result.is_error, result.content
    return plain, planned


def _tools_config(folder: Path, items: int) -> tuple[Path, Path]:
    """Configs of ``items`` items, half rules and references and half tools: with tools
    within reach (the defaults), and without (``reach_tokens = 0``)."""
    base = write_catalog_config(folder, items - items // 2)
    tools = {
        f"srv{s:02d}": {
            "include": "agent",
            "tools": [
                {
                    "name": f"tool_{t}",
                    "description": f"{_VERBS[t % len(_VERBS)]} {_TOPICS[(s + t) % len(_TOPICS)]}",
                    "inputSchema": {"type": "object", "properties": {"q": {"type": "string"}}},
                }
                for t in range(10)
            ],
        }
        for s in range(items // 2 // 10)
    }
    (folder / "tools.json").write_text(json.dumps({"servers": tools}), encoding="utf-8")
    text = base.read_text(encoding="utf-8") + '\n[sources]\ncatalog_files = ["tools.json"]\n'
    on, off = folder / "reach.toml", folder / "no-reach.toml"
    on.write_text(text, encoding="utf-8")
    off.write_text(text.replace("[search]\n", "[search]\nreach_tokens = 0\n", 1), "utf-8")
    return on, off


async def _alternating(
    first: StdioServerParameters, second: StdioServerParameters, calls: int, warm: int = 6
) -> tuple[list[float], list[float], int]:
    """Six-step calls alternating between two broker processes (the first ``warm`` warm
    both up): each side's times (ms), and the candidates the first side's last call named."""
    times: tuple[list[float], list[float]] = ([], [])
    named = 0
    async with Client(first, mode="legacy") as a, Client(second, mode="legacy") as b:
        for i in range(warm + 2 * calls):
            client = (a, b)[i % 2]
            args = {"message": QUERIES[i % len(QUERIES)], "intents": PLANS[(i // 2) % len(PLANS)]}
            started = time.perf_counter()
            result = await client.call_tool("build_request_context", args)
            if i >= warm:
                times[i % 2].append((time.perf_counter() - started) * 1000)
            assert not result.is_error, result.content
            if i % 2 == 0:
                named = len((result.structured_content or {}).get("candidates", []))
    return times[0], times[1], named


def _params(config: Path, checkout: Path | None = None) -> StdioServerParameters:
    env = None
    if checkout is not None:
        env = {**os.environ, "PYTHONPATH": python_path(checkout)}
    return StdioServerParameters(
        command=BROKER,
        args=["--log-level", "WARNING", "serve", "--config", str(config)],
        env=env,
        cwd=checkout,
    )


def _baseline_main(items: int, calls: int, baseline: Path) -> int:
    with tempfile.TemporaryDirectory() as tmp:
        on, _ = _tools_config(Path(tmp), items)
        first, second = _params(on), _params(on, baseline)
        after, before, _ = anyio.run(_alternating, first, second, calls, 12)
    a50, b50 = percentile(after, 50), percentile(before, 50)
    print(f"catalog {items} items ({items // 2} tools), six-step plan, {calls} calls each")
    print(f"this checkout:    p50 {a50:6.2f} ms, p95 {percentile(after, 95):6.2f} ms")
    print(f"{baseline}: p50 {b50:6.2f} ms, p95 {percentile(before, 95):6.2f} ms")
    print(f"after / before {a50 / b50:.2f}x")
    return 0


def _reach_main(items: int, calls: int) -> int:
    with tempfile.TemporaryDirectory() as tmp:
        on, off = _tools_config(Path(tmp), items)
        with_reach, without, named = anyio.run(_alternating, _params(on), _params(off), calls)
    r50, n50 = percentile(with_reach, 50), percentile(without, 50)
    r95, n95 = percentile(with_reach, 95), percentile(without, 95)
    print(f"catalog {items} items ({items // 2} tools), six-step plan, {calls} calls each")
    print(f"tools within reach ({named} named): p50 {r50:6.2f} ms, p95 {r95:6.2f} ms")
    print(f"none (reach_tokens = 0):        p50 {n50:6.2f} ms, p95 {n95:6.2f} ms")
    print(f"ratio {r50 / n50:.2f}x")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=1000)
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--reach", action="store_true", help="what tools within reach cost")
    parser.add_argument("--baseline", type=Path, default=None, help="another checkout")
    args = parser.parse_args()
    if args.baseline is not None:
        return _baseline_main(args.items, args.calls, args.baseline)
    if args.reach:
        return _reach_main(args.items, args.calls)
    with tempfile.TemporaryDirectory() as tmp:
        config = write_catalog_config(Path(tmp), args.items)
        plain, planned = anyio.run(_measure, config, args.calls)
    p50, i50 = percentile(plain, 50), percentile(planned, 50)
    print(f"catalog {args.items} items, {args.calls} calls of each kind, interleaved")
    print(f"no intents  p50 {p50:6.2f} ms  p95 {percentile(plain, 95):6.2f} ms")
    print(f"6 intents   p50 {i50:6.2f} ms  p95 {percentile(planned, 95):6.2f} ms")
    ratio = i50 / p50 if p50 else float("inf")
    ok = i50 <= 40 and ratio <= 1.5
    print(f"ratio {ratio:.2f}x; target p50 <= 40 ms and <= 1.5x: {'MET' if ok else 'NOT MET'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
