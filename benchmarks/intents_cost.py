"""build_request_context over stdio with a six-step plan vs the same call without one.

Target: with 6 intents p50 <= 40 ms at 1,000 items and <= 1.5x the call without intents.
The two kinds of call alternate in one session of one broker process, so both see the same
machine load; medians of each kind are compared.

Run: .venv/bin/python benchmarks/intents_cost.py [--items 1000] [--calls 200]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import anyio
from mcp import Client, StdioServerParameters

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import percentile
from server_latency import BROKER, QUERIES, write_catalog_config

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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=1000)
    parser.add_argument("--calls", type=int, default=200)
    args = parser.parse_args()
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
