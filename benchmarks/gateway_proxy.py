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


async def _serve_front() -> None:
    """A minimal stdio MCP server over a Gateway: exposed tools listed, calls forwarded."""
    from mcp import types
    from mcp.server import Server, ServerRequestContext
    from mcp.server.stdio import stdio_server

    async with Gateway({"time": DownstreamConfig(command=TIME)}, Catalog()) as gw:
        await gw.wait_ready()

        async def on_list_tools(
            ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
        ) -> types.ListToolsResult:
            return types.ListToolsResult(tools=[t.as_mcp_tool() for t in gw.exposed_tools()])

        async def on_call_tool(
            ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
        ) -> types.CallToolResult:
            return await gw.call_exposed(params.name, params.arguments or {})

        server: Server[Any] = Server(
            "gateway-front", on_list_tools=on_list_tools, on_call_tool=on_call_tool
        )
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())


async def _startup(tmp: Path) -> tuple[float, int]:
    servers = {
        "time": DownstreamConfig(command=TIME),
        "git": DownstreamConfig(
            command=str(Path(sys.executable).parent / "mcp-server-git"),
            args=("--repository", str(ROOT)),
        ),
        "everything": DownstreamConfig(command=str(NODE_BIN / "mcp-server-everything")),
        "filesystem": DownstreamConfig(
            command=str(NODE_BIN / "mcp-server-filesystem"), args=(str(tmp),)
        ),
        "memory": DownstreamConfig(
            command=str(NODE_BIN / "mcp-server-memory"),
            env={"MEMORY_FILE_PATH": str(tmp / "memory.jsonl")},
        ),
    }
    start = time.perf_counter()
    async with Gateway(servers, Catalog()) as gw:
        await gw.wait_ready()
        elapsed = time.perf_counter() - start
        if not all(s.connected for s in gw.status()):
            raise RuntimeError(f"not all connected: {[s.to_dict() for s in gw.status()]}")
        return elapsed, len(gw.tools())


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
    front = await _over_stdio(sys.executable, [__file__, "--serve-front"], calls, warmup)
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
    print(_row("gateway stdio", front, d50, "minimal stdio front over Gateway"))
    print(_row("fastmcp proxy", fast, d50, note))
    print("full broker over stdio: measured once server/app.py wires [servers.*]")
    if with_startup:
        with tempfile.TemporaryDirectory() as tmp:
            elapsed, count = await _startup(Path(tmp))
        print(f"startup, five servers until every tool is listed: {elapsed:.2f}s ({count} tools)")


if __name__ == "__main__":
    if "--serve-front" in sys.argv:
        anyio.run(_serve_front)
        sys.exit(0)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="50 calls, no startup figure")
    parser.add_argument("--calls", type=int, default=500)
    opts = parser.parse_args()
    n = 50 if opts.quick else opts.calls
    anyio.run(main, n, 5 if opts.quick else 20, not opts.quick)
