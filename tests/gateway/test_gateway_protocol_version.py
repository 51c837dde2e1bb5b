"""The protocol version of a downstream connection: the newest both sides speak by default
(2026-07-28 over Streamable HTTP when the server speaks it, the handshake's newest over
stdio), or the one ``protocol_version`` names."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest
from context_broker.server.gateway import Gateway
from context_broker.server.settings import DownstreamConfig
from gateway_env import fixture_server, free_port, running, status_of, tool_error

ASKS = Path(__file__).parent / "fixtures" / "asks_host.py"


@pytest.fixture
def asks_over_http() -> Iterator[str]:
    """The asks_host fixture over Streamable HTTP; its URL."""
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, str(ASKS), "http", str(port)], stderr=subprocess.DEVNULL
    )
    try:
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.terminate()
        process.wait(timeout=10)


async def _version(gw: Gateway, server: str) -> str:
    result = await gw.call_tool(server, "version", {})
    return getattr(result.content[0], "text", "")


async def _http(url: str, **extra: object) -> DownstreamConfig:
    """An http server entry, once the server accepts connections."""
    host, port = url.split("//")[1].split("/")[0].split(":")
    with anyio.fail_after(30):
        while True:
            try:
                await (await anyio.connect_tcp(host, int(port))).aclose()
                break
            except OSError:
                await anyio.sleep(0.1)
    return DownstreamConfig(url=url, transport="http", timeout=20, **extra)  # type: ignore[arg-type]


async def test_an_http_server_speaks_2026_07_28_unless_a_version_is_set(
    asks_over_http: str,
) -> None:
    servers = {
        "newest": await _http(asks_over_http),
        "pinned": await _http(asks_over_http, protocol_version="2025-06-18"),
    }
    async with running(servers) as gw:
        assert await _version(gw, "newest") == "2026-07-28"
        assert await _version(gw, "pinned") == "2025-06-18"


async def test_a_server_that_keeps_asking_for_input_fails_the_call_not_the_connection(
    asks_over_http: str,
) -> None:
    async with running({"asks": await _http(asks_over_http)}) as gw:
        asked = tool_error(await gw.call_tool("asks", "keep_asking", {}))
        assert "asked for input 10 times without giving a result" in asked
        assert await _version(gw, "asks") == "2026-07-28"
        assert status_of(gw, "asks").reconnects == 0


async def test_a_stdio_server_speaks_the_newest_handshake_unless_a_version_is_set() -> None:
    servers = {
        "newest": fixture_server("asks_host.py"),
        "pinned": fixture_server("asks_host.py", protocol_version="2024-11-05"),
    }
    async with running(servers) as gw:
        assert await _version(gw, "newest") == "2025-11-25"
        assert await _version(gw, "pinned") == "2024-11-05"


def test_2026_07_28_is_refused_for_a_stdio_server() -> None:
    with pytest.raises(ValueError, match="'2026-07-28' works with 'url' http servers only"):
        DownstreamConfig(command="server", protocol_version="2026-07-28")
