"""Proxy overhead of the gateway: ``tools/call`` of mcp-server-time's ``get_current_time``.

Measured in one run, each with an SDK client over stdio unless noted:

- direct:            client → mcp-server-time
- gateway in-proc:   Gateway.call_tool → mcp-server-time (no front hop)
- broker stdio:      client → ``context-broker serve`` → mcp-server-time, the tool listed
                     directly as ``time__get_current_time``
- broker http:       the same over Streamable HTTP: the SDK's ``streamable_http_client`` →
                     ``serve --transport http`` on a free loopback port
- broker call_tool:  the stdio broker, the call made through its ``call_tool`` tool
- broker, SDK path:  the stdio broker with ``CONTEXT_BROKER_FAST_PATH=0`` (every request
                     through the MCP SDK's server and client sessions)
- fastmcp proxy:     client → ``fastmcp.server.create_proxy`` (run from .venv-bench/) → time
- line relay:        client → a Python process that only copies lines both ways → time
                     (the floor for any proxy written in Python)

Every broker is ``python -m context_broker.server.cli serve`` run with this venv's python from
its checkout (cwd and PYTHONPATH), so it imports that checkout's code. With ``--baseline DIR``,
another checkout of the project (``git worktree add /tmp/baseline <commit>``; it needs no venv
of its own), "before stdio" and "before http" are the broker stdio and broker http rows for
DIR's code, measured in the same run, taking turns with the others; the commit of each checkout
is printed (``+``: with uncommitted changes), and a broker that would not import its checkout's
code stops the run. A last table gives, for stdio and http, the ratio to direct at p50 and p95
before and after, and after/before: what the change costs ("per-block": the median over blocks
of after's p50 over before's, blocks measured moments apart).

All paths stay connected for the whole run and take turns in blocks of 25 calls, so a noisy
neighbour slows them alike; the ratio column is p50 over direct's p50 (broker http's too: a
host's alternative is the server over stdio), and "per-block" is the median of the per-block
ratios. "cpu/call" is the CPU time (user + system, ms) the process each path talks to used
per call: the proxy's own cost (for "direct", the server's). Then the startup time of the
broker with the five reference servers until ``tools/list`` answers.

    .venv/bin/python benchmarks/gateway_proxy.py [--quick] [--calls N] [--no-startup]
        [--baseline DIR]

On a shared machine, ``chrt -f 10`` in front (root) keeps neighbours from scheduling between
the processes of a call, which otherwise dominates the spread of the figures; add
``--no-startup`` then: some reference servers spin once their input closes, and real-time
ones keep the broker from stopping them. Measure the startup without ``chrt``.

Needs scripts/setup-downstream.sh; the FastMCP row needs ``.venv-bench`` with ``fastmcp``
(``python3 -m venv .venv-bench && .venv-bench/bin/pip install fastmcp``) and is skipped otherwise.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import anyio

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from _checkouts import python_path
from context_broker.server.gateway import Gateway
from context_broker.server.settings import DownstreamConfig
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

from contextcore.catalog import Catalog

TIME = str(Path(sys.executable).parent / "mcp-server-time")
BROKER = sys.executable
SERVE = [
    "-m",
    "context_broker.server.cli",
    "serve",
    "--config",
]  # the broker of the checkout run from
NODE_BIN = ROOT / "tests" / "downstream" / "node_modules" / ".bin"
BENCH_PY = ROOT / ".venv-bench" / "bin" / "python"
ARGS = {"timezone": "Asia/Tokyo"}
FASTMCP_SCRIPT = """
import sys
from fastmcp.server import create_proxy
create_proxy({"mcpServers": {"time": {"command": sys.argv[1]}}}).run(show_banner=False)
"""
ORDER = (
    "direct",
    "gateway in-proc",
    "broker stdio",
    "broker http",
    "before stdio",
    "before http",
    "broker call_tool",
    "broker, SDK path",
    "line relay",
    "fastmcp proxy",
)
NOTES = {
    "gateway in-proc": "no front hop",
    "broker stdio": "context-broker serve, exposed tool",
    "broker http": "the same, Streamable HTTP",
    "broker call_tool": "the same, through call_tool",
    "broker, SDK path": "exposed tool, fast path off",
    "line relay": "copies lines only",
    "fastmcp proxy": "" if BENCH_PY.exists() else "no .venv-bench with fastmcp",
}


def _children() -> set[int]:
    """This process's child processes (Linux /proc)."""
    out = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == os.getpid():
                out.add(int(entry.name))
    return out


def _cpu_seconds(pid: int) -> float:
    """User + system CPU time a process has used so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def _spawned(pids: dict[str, int], name: str, made: Awaitable[Call]) -> Call:
    """``made``, noting the one process it started under ``name`` (for its CPU time)."""
    before = _children()
    call = await made
    new = _children() - before
    if len(new) == 1:
        pids[name] = new.pop()
    return call


def _pct(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))] * 1000


Call = Callable[[], Awaitable[Any]]
BLOCK = 25


def _broker_env(checkout: Path, **extra: str) -> dict[str, str]:
    """The environment of a broker run from ``checkout``: that checkout's code first on the
    path, no ``CONTEXT_BROKER_*`` setting from outside but ``extra``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("CONTEXT_BROKER_")}
    return {**env, "PYTHONPATH": python_path(checkout), **extra}


def _checkout(path: Path) -> str:
    """``path``'s commit (``+`` if its code has uncommitted changes), once a python started
    as its brokers are is seen to import ``path``'s own code."""
    probe = (
        "import contextcore, context_broker.server as s, context_broker.tools as t; "
        "print(s.__file__); print(t.__file__); print(contextcore.__file__)"
    )
    found = subprocess.run(
        [BROKER, "-c", probe], cwd=path, env=_broker_env(path), capture_output=True, check=True
    ).stdout.decode()
    if not all(Path(f).resolve().is_relative_to(path.resolve()) for f in found.split()):
        raise SystemExit(f"a broker run from {path} would import {found.split()}")

    def git(*args: str) -> str:
        done = subprocess.run(["git", "-C", str(path), *args], capture_output=True, check=True)
        return done.stdout.decode().strip()

    dirty = git("status", "--porcelain", "--", "server", "contextcore", "tools")
    return git("rev-parse", "--short", "HEAD") + ("+" if dirty else "")


async def _session_call(
    stack: AsyncExitStack, read: Any, write: Any, *, via_call_tool: bool = False
) -> Call:
    """A ready-to-time call of get_current_time over a new client session on these streams
    (through the broker's ``call_tool`` with ``via_call_tool``)."""
    s = await stack.enter_async_context(ClientSession(read, write))
    with anyio.fail_after(60):
        await s.initialize()
        tools = await s.list_tools()
    if via_call_tool:
        wrapped = {"server": "time", "tool": "get_current_time", "arguments": ARGS}
        return lambda: s.call_tool("call_tool", wrapped)
    name = next(t.name for t in tools.tools if t.name.endswith("get_current_time"))
    return lambda: s.call_tool(name, ARGS)


async def _stdio_call(
    stack: AsyncExitStack,
    command: str,
    args: list[str],
    *,
    via_call_tool: bool = False,
    env: dict[str, str] | None = None,
    cwd: Path = ROOT,
) -> Call:
    """A ready-to-time call over a new stdio client of ``command`` (``env``: the child's whole
    environment; None: the SDK's default one)."""
    params = StdioServerParameters(command=command, args=args, env=env, cwd=cwd)
    devnull = stack.enter_context(open(os.devnull, "w"))  # noqa: SIM115 (stderr is not a figure)
    r, w = await stack.enter_async_context(stdio_client(params, errlog=devnull))
    return await _session_call(stack, r, w, via_call_tool=via_call_tool)


def _stop(proc: subprocess.Popen[bytes]) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


async def _http_broker(
    stack: AsyncExitStack, cfg: str, checkout: Path, log: Path
) -> tuple[str, int]:
    """A ``serve --transport http`` broker of ``checkout`` on a free port, stopped with the
    stack: (its MCP endpoint's URL, its pid). It logs to ``log``, read for the URL."""
    err = stack.enter_context(log.open("w"))
    proc = subprocess.Popen(
        [BROKER, *SERVE, cfg, "--transport", "http", "--port", "0"],
        cwd=checkout,
        env=_broker_env(checkout),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=err,
    )
    stack.callback(_stop, proc)
    with anyio.fail_after(60):
        while not (found := re.search(r"listening on (http://\S+/mcp)\b", log.read_text())):
            if proc.poll() is not None:
                raise RuntimeError(f"the http broker of {checkout} stopped:\n{log.read_text()}")
            await anyio.sleep(0.1)
    return found.group(1), proc.pid


async def _broker_paths(
    stack: AsyncExitStack, pids: dict[str, int], cfg: str, checkout: Path, label: str
) -> dict[str, Call]:
    """The rows "``label`` stdio" and "``label`` http": ``checkout``'s broker, the tool
    listed directly, over stdio and over Streamable HTTP."""
    stdio, http = f"{label} stdio", f"{label} http"
    made = _stdio_call(stack, BROKER, [*SERVE, cfg], env=_broker_env(checkout), cwd=checkout)
    paths = {stdio: await _spawned(pids, stdio, made)}
    url, pids[http] = await _http_broker(stack, cfg, checkout, Path(cfg).parent / f"{label}.log")
    r, w = await stack.enter_async_context(streamable_http_client(url))
    paths[http] = await _session_call(stack, r, w)
    return paths


async def _other_paths(stack: AsyncExitStack, pids: dict[str, int], cfg: str) -> dict[str, Call]:
    """The rows after the broker's stdio and http ones: call_tool, SDK path, the line relay
    and (with .venv-bench) FastMCP's proxy."""
    serve, relay = [*SERVE, cfg], [__file__, "--relay", TIME]
    made = {
        "broker call_tool": _stdio_call(
            stack, BROKER, serve, via_call_tool=True, env=_broker_env(ROOT)
        ),
        "broker, SDK path": _stdio_call(
            stack, BROKER, serve, env=_broker_env(ROOT, CONTEXT_BROKER_FAST_PATH="0")
        ),
        "line relay": _stdio_call(stack, sys.executable, relay),
    }
    if BENCH_PY.exists():
        made["fastmcp proxy"] = _stdio_call(stack, str(BENCH_PY), ["-c", FASTMCP_SCRIPT, TIME])
    return {name: await _spawned(pids, name, call) for name, call in made.items()}


async def _gateway_call(stack: AsyncExitStack) -> Call:
    gw = await stack.enter_async_context(
        Gateway({"time": DownstreamConfig(command=TIME)}, Catalog())
    )
    await gw.wait_ready()
    return lambda: gw.call_tool("time", "get_current_time", ARGS)


async def _block(call: Call, n: int) -> list[float]:
    out = []
    for _ in range(n):
        start = time.perf_counter()
        result = await call()
        out.append(time.perf_counter() - start)
        if getattr(result, "is_error", False):
            raise RuntimeError(f"call failed: {result}")
    return out


Blocks = dict[str, list[list[float]]]


async def _interleaved(paths: dict[str, Call], calls: int, warmup: int) -> Blocks:
    """Per path, the timings of each block; the paths take turns block by block."""
    for call in paths.values():
        await _block(call, warmup)
    blocks: dict[str, list[list[float]]] = {name: [] for name in paths}
    for _ in range(max(1, calls // BLOCK)):
        for name, call in paths.items():
            blocks[name].append(await _block(call, BLOCK))
    return blocks


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
        command=BROKER, args=[*SERVE, _broker_config(tmp, _five_servers(tmp))], cwd=ROOT
    )
    start = time.perf_counter()
    with open("/dev/null", "w") as devnull:
        async with stdio_client(params, errlog=devnull) as (r, w), ClientSession(r, w) as s:
            with anyio.fail_after(120):
                await s.initialize()
                tools = await s.list_tools()
    return time.perf_counter() - start, len(tools.tools)


def _flat(blocks: list[list[float]]) -> list[float]:
    return [x for b in blocks for x in b]


def _row(name: str, blocks: list[list[float]] | None, direct: list[list[float]], note: str) -> str:
    if blocks is None:
        return f"{name:<16} {'skipped':>9}   {note}"
    samples = _flat(blocks)
    p50, p95 = _pct(samples, 0.5), _pct(samples, 0.95)
    mean = statistics.fmean(samples) * 1000
    ratio = p50 / _pct(_flat(direct), 0.5)
    per_block = statistics.median(
        _pct(b, 0.5) / _pct(d, 0.5) for b, d in zip(blocks, direct, strict=True)
    )
    figures = f"{p50:8.3f}  {p95:8.3f}  {mean:8.3f}  {ratio:5.2f}x  {per_block:7.2f}x"
    return f"{name:<16} {figures}  {note}"


def _cost_table(blocks: Blocks) -> None:
    """Per transport, the ratio to direct at p50 and p95 before and after, and after/before."""
    direct = _flat(blocks["direct"])
    print("\ncost of the change: ratio to direct, before and after")
    head = f"{'before':>8} {'after':>7} {'after/before':>13}"
    print(f"{'':<6}  {'at p50':^30}  {'at p95':^30}".rstrip())
    print(f"{'':<6}  {head}  {head}  per-block")
    for transport in ("stdio", "http"):
        after, before = blocks[f"broker {transport}"], blocks[f"before {transport}"]
        cells = []
        for q in (0.5, 0.95):
            was = _pct(_flat(before), q) / _pct(direct, q)
            now = _pct(_flat(after), q) / _pct(direct, q)
            cells.append(f"{was:7.2f}x {now:6.2f}x {now / was:12.3f}x")
        per_block = statistics.median(
            _pct(a, 0.5) / _pct(b, 0.5) for a, b in zip(after, before, strict=True)
        )
        print(f"{transport:<6}  {cells[0]}  {cells[1]}  {per_block:8.3f}x")


def _report(blocks: Blocks, cpu: dict[str, float], calls: int, warmup: int) -> None:
    print(f"tools/call get_current_time, {calls} calls per path after {warmup} warm-up (ms)")
    print(f"{'path':<16} {'p50':>8}  {'p95':>8}  {'mean':>8}  {'ratio':>6}  per-block  cpu/call")
    for name in ORDER:
        if name.startswith("before") and name not in blocks:
            continue
        used = f"{cpu[name]:8.3f}" if name in cpu and name in blocks else " " * 8
        print(_row(name, blocks.get(name), blocks["direct"], f"{used}  {NOTES.get(name, '')}"))
    if "before stdio" in blocks:
        _cost_table(blocks)


async def _measure(
    calls: int, warmup: int, baseline: Path | None
) -> tuple[Blocks, dict[str, float]]:
    """The timings of every path's blocks, and each process's CPU ms per call."""
    with tempfile.TemporaryDirectory() as tmp:
        cfg = _broker_config(Path(tmp), f'[servers.time]\ncommand = "{TIME}"\n')
        async with AsyncExitStack() as stack:
            pids: dict[str, int] = {}
            direct = _stdio_call(stack, TIME, [])
            paths = {
                "direct": await _spawned(pids, "direct", direct),
                "gateway in-proc": await _gateway_call(stack),
                **await _broker_paths(stack, pids, cfg, ROOT, "broker"),
            }
            if baseline is not None:
                paths |= await _broker_paths(stack, pids, cfg, baseline, "before")
            paths |= await _other_paths(stack, pids, cfg)
            cpu_before = {name: _cpu_seconds(pid) for name, pid in pids.items()}
            blocks = await _interleaved(paths, calls, warmup)
            done = warmup + max(1, calls // BLOCK) * BLOCK
            cpu = {n: (_cpu_seconds(p) - cpu_before[n]) / done * 1000 for n, p in pids.items()}
    return blocks, cpu


async def _relay(command: str) -> None:
    """Copy stdin lines to ``command`` and its stdout lines back, nothing else."""
    import asyncio

    loop = asyncio.get_running_loop()
    child = await asyncio.create_subprocess_exec(
        command, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, limit=2**24
    )
    assert child.stdin is not None and child.stdout is not None
    reader = asyncio.StreamReader(limit=2**24)
    stdin = os.fdopen(0, "rb", buffering=0)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), stdin)
    stdout = os.fdopen(1, "wb", buffering=0)
    transport, protocol = await loop.connect_write_pipe(asyncio.streams.FlowControlMixin, stdout)
    out = asyncio.StreamWriter(transport, protocol, None, loop)

    async def up() -> None:
        while line := await reader.readline():
            child.stdin.write(line)  # type: ignore[union-attr]
        child.stdin.close()  # type: ignore[union-attr]

    async def down() -> None:
        while line := await child.stdout.readline():  # type: ignore[union-attr]
            out.write(line)

    await asyncio.gather(up(), down())


async def main(calls: int, warmup: int, with_startup: bool, baseline: Path | None) -> None:
    print(f"after:  {ROOT} at {_checkout(ROOT)}")
    if baseline is not None:
        print(f"before: {baseline} at {_checkout(baseline)}")
        NOTES["before stdio"] = f"broker stdio of {baseline}"
        NOTES["before http"] = f"broker http of {baseline}"
    blocks, cpu = await _measure(calls, warmup, baseline)
    _report(blocks, cpu, calls, warmup)
    if with_startup:
        with tempfile.TemporaryDirectory() as tmp:
            elapsed, count = await _startup(Path(tmp))
        print(f"startup, five servers until every tool is listed: {elapsed:.2f}s ({count} tools)")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="50 calls, no startup figure")
    parser.add_argument("--calls", type=int, default=500)
    parser.add_argument(
        "--no-startup",
        action="store_true",
        help="no startup figure (under chrt, downstream servers that spin after their input "
        "closes keep a real-time broker from stopping them)",
    )
    parser.add_argument(
        "--baseline",
        metavar="DIR",
        type=Path,
        help="another checkout of the project: its broker rows too, and the cost of the change",
    )
    parser.add_argument("--relay", metavar="COMMAND", help=argparse.SUPPRESS)
    opts = parser.parse_args()
    if opts.relay:
        anyio.run(_relay, opts.relay)
        sys.exit(0)
    if opts.baseline is not None and not (opts.baseline / "server" / "cli").is_dir():
        parser.error(f"{opts.baseline} is not a checkout of the project")
    n = 50 if opts.quick else opts.calls
    startup = not (opts.quick or opts.no_startup)
    anyio.run(main, n, 5 if opts.quick else 20, startup, opts.baseline)
