"""50 concurrent clients over Streamable HTTP, on 1 and 3 broker replicas: latency and throughput.

    .venv/bin/python benchmarks/http_load.py [--clients 50] [--rounds 10] [--redis]

Each client creates a session, then ``--rounds`` times appends two messages and builds a
request context; every call goes to the next replica in turn, as a round-robin balancer would
send it. Setups, all in one run: SQLite with one replica (the embedded store, the baseline),
PostgreSQL with one and with three replicas, and with ``--redis`` Redis with three. PostgreSQL
and Redis are real servers from the test wheels (``tests/store/servers.py``), started here on
free ports. Clients connect before the clock starts; p50/p95 are per call kind, throughput is
calls per second of wall time, and "client CPU" how much of one core the load generator itself
used (near 100%, it is the bottleneck). Everything (clients, replicas, database) shares this
machine's cores, so the figures compare setups, not hardware.
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, ExitStack, asynccontextmanager
from pathlib import Path

import anyio
from mcp import Client

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.store.servers import running_postgres, running_redis
from tests.support.broker_procs import running_broker, server_env, write_config

KINDS = ("create_session", "append_messages", "build_request_context")
MESSAGES = ["How do I write the SQL for the report?", "Use parameterized queries, never format."]


def store_url(backend: str, stack: ExitStack) -> str | None:
    """A fresh store for ``backend`` that lives as long as ``stack`` (None: SQLite, a file
    next to the config)."""
    if backend == "postgres":
        return stack.enter_context(running_postgres()).create_database("bench")
    if backend == "redis":
        return stack.enter_context(running_redis()).url()
    return None


@asynccontextmanager
async def replicas(folder: Path, backend: str, url: str | None, n: int) -> AsyncIterator[list[str]]:
    config = write_config(folder, backend=backend)
    env = server_env()
    if url is not None:
        line = f'backend = "{backend}"'
        text = config.read_text(encoding="utf-8")
        config.write_text(text.replace(line, line + '\nurl = "${env:BROKER_STORE_URL}"', 1))
        env["BROKER_STORE_URL"] = url
    async with AsyncExitStack() as stack:
        yield [
            (await stack.enter_async_context(running_broker(config, env=env)))[0] for _ in range(n)
        ]


async def _client(
    urls: list[str],
    offset: int,
    rounds: int,
    start: anyio.Event,
    ready: list[int],
    latencies: dict[str, list[float]],
    errors: list[str],
) -> None:
    connected = False
    try:
        async with AsyncExitStack() as stack:
            clients = [await stack.enter_async_context(Client(f"{u}/mcp")) for u in urls]
            connected = True
            ready.append(1)
            await start.wait()
            await _calls(clients, offset, rounds, latencies, errors)
    except Exception as exc:  # a benchmark reports a broken connection instead of stopping
        errors.append(f"client {offset} stopped: {exc!r}")
        if not connected:
            ready.append(1)


async def _calls(
    clients: list[Client],
    offset: int,
    rounds: int,
    latencies: dict[str, list[float]],
    errors: list[str],
) -> None:
    turn = itertools.count(offset)

    async def timed(name: str, **arguments: object) -> dict[str, object]:
        client = clients[next(turn) % len(clients)]
        began = time.perf_counter()
        result = await client.call_tool(name, arguments)
        latencies[name].append(time.perf_counter() - began)
        if result.is_error or not isinstance(result.structured_content, dict):
            errors.append(f"{name}: {result.content}")
            return {}
        return result.structured_content

    created = await timed("create_session", agent="bench")
    sid = created.get("session_id")
    for r in range(rounds):
        messages = [
            {"role": "user", "content": f"{MESSAGES[0]} ({r})"},
            {"role": "assistant", "content": MESSAGES[1]},
        ]
        await timed("append_messages", session_id=sid, messages=messages)
        await timed("build_request_context", session_id=sid, message=f"{MESSAGES[0]} {r}")


async def measure(urls: list[str], clients: int, rounds: int) -> dict[str, object]:
    latencies: dict[str, list[float]] = {k: [] for k in KINDS}
    errors: list[str] = []
    start = anyio.Event()
    ready: list[int] = []
    async with anyio.create_task_group() as tg:
        for c in range(clients):
            tg.start_soon(_client, urls, c, rounds, start, ready, latencies, errors)
        with anyio.fail_after(120):
            while len(ready) < clients:
                await anyio.sleep(0.05)  # polling the connection count, not synchronising
        began, cpu = time.perf_counter(), time.process_time()
        start.set()
    wall = time.perf_counter() - began
    client_cpu = (time.process_time() - cpu) / wall
    calls = sum(len(v) for v in latencies.values())
    return {
        "latencies": latencies,
        "errors": errors,
        "wall": wall,
        "calls": calls,
        "client_cpu": client_cpu,
    }


def _ms(values: list[float], q: float) -> str:
    if not values:
        return "-"
    if len(values) == 1:
        return f"{values[0] * 1000:.0f}"
    return f"{statistics.quantiles(values, n=100)[int(q) - 1] * 1000:.0f}"


def report(label: str, result: dict[str, object]) -> str:
    lat: dict[str, list[float]] = result["latencies"]  # type: ignore[assignment]
    cells = [f"{_ms(lat[k], 50)} / {_ms(lat[k], 95)}" for k in KINDS]
    calls, wall = int(result["calls"]), float(result["wall"])  # type: ignore[call-overload, arg-type]
    errors: list[str] = result["errors"]  # type: ignore[assignment]
    cpu = float(result["client_cpu"])  # type: ignore[arg-type]
    return f"| {label} | {' | '.join(cells)} | {calls / wall:.0f} | {cpu:.0%} | {len(errors)} |"


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--redis", action="store_true", help="also Redis with three replicas")
    args = parser.parse_args()
    setups = [("sqlite", 1), ("postgres", 1), ("postgres", 3)]
    if args.redis:
        setups.append(("redis", 3))
    print(f"{args.clients} clients, each: create_session, then {args.rounds} x (append 2, build)")
    print(
        "| store, replicas | create p50 / p95 ms | append p50 / p95 ms | build p50 / p95 ms "
        "| calls/s | client CPU | errors |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for backend, n in setups:
        with tempfile.TemporaryDirectory() as tmp, ExitStack() as stack:
            url = store_url(backend, stack)
            async with replicas(Path(tmp), backend, url, n) as urls:
                result = await measure(urls, args.clients, args.rounds)
        print(report(f"{backend}, {n}", result), flush=True)
        for line in result["errors"][:3]:  # type: ignore[index]
            print(f"    error: {line}", file=sys.stderr)


if __name__ == "__main__":
    anyio.run(main)
