"""Proxy overhead of the gateway: ``tools/call`` of mcp-server-time's ``get_current_time``.

Measured in one run, each with an SDK client over stdio unless noted:

- direct:            client → mcp-server-time
- gateway in-proc:   Gateway.call_tool → mcp-server-time (no front hop)
- gateway stdio:     client → a minimal stdio MCP front over the Gateway → mcp-server-time
                     (the same wiring the broker's server will use; the full broker over stdio
                     is measured once server/app.py connects ``[servers.*]``)
- fastmcp proxy:     client → ``fastmcp.server.create_proxy`` (run from .venv-bench/) → time

plus the startup time of a Gateway with the five reference servers until every tool is listed.

    .venv/bin/python benchmarks/gateway_proxy.py [--quick] [--calls N]

Needs scripts/setup-downstream.sh; the FastMCP row needs ``.venv-bench`` with ``fastmcp``
(``python3 -m venv .venv-bench && .venv-bench/bin/pip install fastmcp``) and is skipped otherwise.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from mcp import ClientSession, StdioServerParameters, stdio_client

from contextcore.catalog import Catalog
from contextcore.config import DownstreamConfig
from server.gateway import Gateway

TIME = str(Path(sys.executable).parent / "mcp-server-time")
BROKER = str(Path(sys.executable).parent / "context-broker")
NODE_BIN = ROOT / "tests" / "downstream" / "node_modules" / ".bin"
BENCH_PY = ROOT / ".venv-bench" / "bin" / "python"
ARGS = {"timezone": "Asia/Tokyo"}
FASTMCP_SCRIPT = """
import sys
from fastmcp.server import create_proxy
create_proxy({"mcpServers": {"time": {"command": sys.argv[1]}}}).run(show_banner=False)
"""


def _pct(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))] * 1000


async def _timed(call: Callable[[], Awaitable[Any]], calls: int, warmup: int) -> list[float]:
    for _ in range(warmup):
        await call()
    out = []
    for _ in range(calls):
        start = time.perf_counter()
        result = await call()
        out.append(time.perf_counter() - start)
        if getattr(result, "is_error", False):
            raise RuntimeError(f"call failed: {result}")
    return out


async def _over_stdio(command: str, args: list[str], calls: int, warmup: int) -> list[float]:
    params = StdioServerParameters(command=command, args=args)
    with open("/dev/null", "w") as devnull:  # the peers' stderr chatter is not a figure
        async with stdio_client(params, errlog=devnull) as (r, w), ClientSession(r, w) as s:
            with anyio.fail_after(60):
                await s.initialize()
                tools = await s.list_tools()
            name = next(t.name for t in tools.tools if t.name.endswith("get_current_time"))
            return await _timed(lambda: s.call_tool(name, ARGS), calls, warmup)


async def _gateway_inproc(calls: int, warmup: int) -> list[float]:
    async with Gateway({"time": DownstreamConfig(command=TIME)}, Catalog()) as gw:
        await gw.wait_ready()
        return await _timed(lambda: gw.call_tool("time", "get_current_time", ARGS), calls, warmup)


def _broker_config(tmp: Path, servers: str) -> str:
    path = tmp / "broker.toml"
    path.write_text("[search]\nsemantic = false\n" + servers, encoding="utf-8")
    return str(path)


def _five_servers(tmp: Path) -> str:
    bin_dir = Path(sys.executable).parent
    return f"""
[servers.time]
command = "{TIME}"
[servers.git]
command = "{bin_dir / "mcp-server-git"}"
args = ["--repository", "{ROOT}"]
[servers.everything]
command = "{NODE_BIN / "mcp-server-everything"}"
[servers.filesystem]
command = "{NODE_BIN / "mcp-server-filesystem"}"
args = ["{tmp}"]
[servers.memory]
command = "{NODE_BIN / "mcp-server-memory"}"
env = {{ MEMORY_FILE_PATH = "{tmp / "memory.jsonl"}" }}
"""


async def _startup(tmp: Path) -> tuple[float, int]:
    """Seconds from starting the broker with the five servers until tools/list answers."""
    params = StdioServerParameters(
        command=BROKER, args=["serve", "--config", _broker_config(tmp, _five_servers(tmp))]
    )
    start = time.perf_counter()
    with open("/dev/null", "w") as devnull:
        async with stdio_client(params, errlog=devnull) as (r, w), ClientSession(r, w) as s:
            with anyio.fail_after(120):
                await s.initialize()
                tools = await s.list_tools()
    return time.perf_counter() - start, len(tools.tools)


def _row(name: str, samples: list[float] | None, direct_p50: float | None, note: str = "") -> str:
    if samples is None:
        return f"{name:<18} {'skipped':>9}   {note}"
    p50, p95 = _pct(samples, 0.5), _pct(samples, 0.95)
    ratio = f"{p50 / direct_p50:5.2f}x" if direct_p50 else "     "
    mean = statistics.fmean(samples) * 1000
    return f"{name:<18} {p50:8.3f}  {p95:8.3f}  {mean:8.3f}  {ratio}  {note}"


async def main(calls: int, warmup: int, with_startup: bool) -> None:
    direct = await _over_stdio(TIME, [], calls, warmup)
    inproc = await _gateway_inproc(calls, warmup)
    with tempfile.TemporaryDirectory() as tmp:
        cfg = _broker_config(Path(tmp), f'[servers.time]\ncommand = "{TIME}"\n')
        broker = await _over_stdio(BROKER, ["serve", "--config", cfg], calls, warmup)
    fast: list[float] | None = None
    note = "no .venv-bench with fastmcp"
    if BENCH_PY.exists():
        fast = await _over_stdio(str(BENCH_PY), ["-c", FASTMCP_SCRIPT, TIME], calls, warmup)
        note = ""
    d50 = _pct(direct, 0.5)
    print(f"tools/call get_current_time, {calls} calls after {warmup} warm-up (ms)")
    print(f"{'path':<18} {'p50':>8}  {'p95':>8}  {'mean':>8}  vs direct")
    print(_row("direct", direct, d50))
    print(_row("gateway in-proc", inproc, d50, "no front hop"))
    print(_row("broker stdio", broker, d50, "context-broker serve, exposed tool"))
    print(_row("fastmcp proxy", fast, d50, note))
    if with_startup:
        with tempfile.TemporaryDirectory() as tmp:
            elapsed, count = await _startup(Path(tmp))
        print(f"startup, five servers until every tool is listed: {elapsed:.2f}s ({count} tools)")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="50 calls, no startup figure")
    parser.add_argument("--calls", type=int, default=500)
    opts = parser.parse_args()
    n = 50 if opts.quick else opts.calls
    anyio.run(main, n, 5 if opts.quick else 20, not opts.quick)
