"""Paths and builders for the gateway tests: real downstream servers as subprocesses."""

from __future__ import annotations

import os
import socket
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from anyio.streams.text import TextReceiveStream
from context_broker.server.gateway import Gateway, GatewaySettings, ServerStatus
from context_broker.server.settings import DownstreamConfig

from contextcore.catalog import Catalog

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = Path(__file__).parent / "fixtures"
VENV_BIN = Path(sys.executable).parent
NODE_BIN = ROOT / "tests" / "downstream" / "node_modules" / ".bin"
FAST = GatewaySettings(backoff_base=0.2, backoff_max=1.0, debounce=0.05)


def tool_error(answer: object) -> str:
    """The text of the tool error a gateway call was answered with (failing if it was not
    one): every failure the gateway meets comes back so, naming server and tool."""
    assert getattr(answer, "is_error", False), answer
    return str(answer.content[0].text)


def executable(path: Path) -> str:
    """``path`` as a command, or fail naming the setup step that installs it."""
    if not path.exists():
        pytest.fail(f"{path} is missing; run scripts/setup-downstream.sh first")
    return str(path)


def stdio(command: str, *args: str, **extra: Any) -> DownstreamConfig:
    return DownstreamConfig(command=command, args=args, **extra)


def fixture_server(script: str, *args: str, **extra: Any) -> DownstreamConfig:
    return stdio(sys.executable, str(FIXTURES / script), *args, **extra)


def time_server(**extra: Any) -> DownstreamConfig:
    return stdio(executable(VENV_BIN / "mcp-server-time"), **extra)


def everything_server(**extra: Any) -> DownstreamConfig:
    return stdio(executable(NODE_BIN / "mcp-server-everything"), **extra)


def five_servers(tmp_path: Path) -> dict[str, DownstreamConfig]:
    """The five reference servers over stdio."""
    return {
        "time": time_server(),
        "git": stdio(executable(VENV_BIN / "mcp-server-git"), "--repository", str(ROOT)),
        "everything": everything_server(),
        "filesystem": stdio(executable(NODE_BIN / "mcp-server-filesystem"), str(tmp_path)),
        "memory": stdio(
            executable(NODE_BIN / "mcp-server-memory"),
            env={"MEMORY_FILE_PATH": str(tmp_path / "memory.jsonl")},
        ),
    }


@asynccontextmanager
async def running(
    servers: dict[str, DownstreamConfig], catalog: Catalog | None = None, **kwargs: Any
) -> AsyncIterator[Gateway]:
    """A started gateway whose first connection attempts are all done."""
    kwargs.setdefault("settings", FAST)
    async with Gateway(servers, catalog if catalog is not None else Catalog(), **kwargs) as gw:
        with anyio.fail_after(90):
            await gw.wait_ready()
        yield gw


def status_of(gw: Gateway, name: str) -> ServerStatus:
    """One server's row of ``gw.status()``."""
    return next(s for s in gw.status() if s.name == name)


def child_pids(needle: str) -> list[int]:
    """Processes started by this test process whose command line contains ``needle``."""
    me, out = os.getpid(), []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        if ppid == me and needle in cmdline:
            out.append(int(entry.name))
    return out


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@asynccontextmanager
async def oauth_downstream_server(lifetime: float) -> AsyncIterator[str]:
    """The local OAuth-protected MCP server of ``fixtures/oauth_downstream.py`` (its access
    tokens live ``lifetime`` seconds), running until the block exits; yields its base URL."""
    port = free_port()
    command = [sys.executable, str(FIXTURES / "oauth_downstream.py"), str(port), str(lifetime)]
    process = await anyio.open_process(command, stdout=None)
    try:
        assert process.stderr is not None
        with anyio.fail_after(30):
            async for chunk in TextReceiveStream(process.stderr):
                if "Uvicorn running" in chunk:
                    break
        yield f"http://127.0.0.1:{port}"
    finally:
        process.terminate()
        with anyio.fail_after(10):
            await process.wait()
        await process.aclose()
