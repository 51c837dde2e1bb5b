"""build_request_context over stdio vs in-process, with a 1,000-item catalog already indexed.

Target: p50 round trip <= 15 ms and <= 3x the in-process call.
Run: .venv/bin/python benchmarks/server_latency.py [--quick] [--items N] [--calls N]
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

import anyio
from mcp import Client, StdioServerParameters

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from context_broker.server.parts import build_parts
from context_broker.server.settings import load_config

_TOPICS = [
    "database migrations",
    "unit testing",
    "deployment",
    "logging",
    "caching",
    "authentication",
    "error handling",
    "code review",
    "performance tuning",
    "API design",
    "documentation",
    "dependency updates",
    "security review",
    "incident response",
    "feature flags",
    "monitoring",
    "data privacy",
    "accessibility",
    "localization",
    "build pipelines",
]
_VERBS = ["prefer", "avoid", "always check", "document", "measure", "automate", "review"]
QUERIES = [f"How do we handle {t} in this project?" for t in _TOPICS]


def write_catalog_config(folder: Path, n_items: int, *, backend: str = "memory") -> Path:
    """A config with ``n_items`` inline agent rules and references and an embedding cache."""
    rng = random.Random(7)
    parts = [
        '[search]\nembedding_cache = "embeddings.sqlite3"\n',
        f'[persistence]\nbackend = "{backend}"\npath = "sessions.sqlite3"\n',
        '[[rules]]\nname = "house-style"\ntext = "Keep functions small."\ninclude = "always"\n',
    ]
    for i in range(n_items - 1):
        topic = rng.choice(_TOPICS)
        kind = "rules" if i % 2 else "references"
        text = " ".join(
            f"{rng.choice(_VERBS)} {topic} step {rng.randint(1, 99)}." for _ in range(12)
        )
        parts.append(
            f'[[{kind}]]\nname = "{kind[:-1]}-{i:04d}"\ndescription = "Notes on {topic}"\n'
            f'text = "{text}"\ninclude = "agent"\n'
        )
    path = folder / "bench.toml"
    path.write_text("\n".join(parts), encoding="utf-8")
    return path


BROKER = str(Path(sys.executable).parent / "context-broker")


def _pct(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def in_process(config_path: Path, calls: int) -> list[float]:
    parts = build_parts(load_config(config_path))
    started = time.perf_counter()
    stats = parts.search.index()
    print(f"indexed in-process in {time.perf_counter() - started:.1f}s: {stats}", flush=True)
    sid = parts.broker.create_session().session_id
    for q in QUERIES[:3]:  # warm-up
        parts.broker.build_request_context(sid, q)
    out = []
    for i in range(calls):
        t = time.perf_counter()
        parts.broker.build_request_context(sid, QUERIES[i % len(QUERIES)])
        out.append((time.perf_counter() - t) * 1000)
    return out


async def over_stdio(config_path: Path, calls: int) -> list[float]:
    params = StdioServerParameters(
        command=BROKER, args=["--log-level", "WARNING", "serve", "--config", str(config_path)]
    )
    async with Client(params, mode="legacy") as client:
        sid = (await client.call_tool("create_session", {})).structured_content["session_id"]  # type: ignore[index]
        for q in QUERIES[:3]:  # warm-up: loads the model, reads the embedding cache
            await client.call_tool("build_request_context", {"session_id": sid, "message": q})
        out = []
        for i in range(calls):
            args = {"session_id": sid, "message": QUERIES[i % len(QUERIES)]}
            t = time.perf_counter()
            result = await client.call_tool("build_request_context", args)
            out.append((time.perf_counter() - t) * 1000)
            assert not result.is_error, result.content
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="200 items, 50 calls")
    parser.add_argument("--items", type=int, default=None)
    parser.add_argument("--calls", type=int, default=None)
    args = parser.parse_args()
    items = args.items or (200 if args.quick else 1000)
    calls = args.calls or (50 if args.quick else 300)
    with tempfile.TemporaryDirectory() as tmp:
        config = write_catalog_config(Path(tmp), items)
        local = in_process(config, calls)
        remote = anyio.run(over_stdio, config, calls)
    lp50, lp95 = _pct(local, 0.5), _pct(local, 0.95)
    rp50, rp95 = _pct(remote, 0.5), _pct(remote, 0.95)
    print(f"catalog {items} items, {calls} calls each")
    print(f"in-process  p50 {lp50:6.2f} ms  p95 {lp95:6.2f} ms  mean {statistics.mean(local):.2f}")
    print(f"stdio       p50 {rp50:6.2f} ms  p95 {rp95:6.2f} ms  mean {statistics.mean(remote):.2f}")
    ratio = rp50 / lp50 if lp50 else float("inf")
    ok = rp50 <= 15 and ratio <= 3
    print(
        f"stdio/in-process p50 ratio {ratio:.2f}x; target p50 <= 15 ms and <= 3x: "
        f"{'MET' if ok else 'NOT MET'}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
