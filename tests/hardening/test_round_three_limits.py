"""Security, round three (issue 34, findings 8 and 9), through a real ``context-broker serve``
over HTTP: limits say no cleanly. Calls of more hosts than a downstream has handshake-era
sessions for (one per host connection) wait for one instead of failing, and a host's resource
subscriptions are bounded and released downstream when it leaves."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from context_broker.server.gateway.links.eras import LIMIT
from mcp import Client, ClientSession, MCPError
from mcp.client.streamable_http import streamable_http_client

from tests.support.broker_procs import fixture_table, running_broker, write_config

FIXTURES = Path(__file__).parent / "fixtures"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@asynccontextmanager
async def _host(url: str, name: str = "host") -> AsyncIterator[ClientSession]:
    """A handshake-era host over HTTP that names itself ``name`` (its own kind of host)."""
    info = types.Implementation(name=name, version="1")
    async with (
        streamable_http_client(f"{url}/mcp") as (read, write),
        ClientSession(read, write, client_info=info) as session,
    ):
        await session.initialize()
        yield session


async def _listed(session: ClientSession, tool: str) -> None:
    with anyio.fail_after(30):
        while tool not in {t.name for t in (await session.list_tools()).tools}:
            await anyio.sleep(0.2)


def _text(result: types.CallToolResult) -> str:
    block = result.content[0]
    assert isinstance(block, types.TextContent), result
    return block.text


@pytest.fixture
def lanes_url() -> Any:
    port = _free_port()
    process = subprocess.Popen(
        [sys.executable, str(FIXTURES / "lanes_server.py"), str(port)],
        stderr=subprocess.DEVNULL,
    )
    try:
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.terminate()
        process.wait(timeout=10)


async def test_a_host_beyond_the_session_bound_waits_for_a_session_instead_of_failing(
    tmp_path: Path, lanes_url: str
) -> None:
    table = (
        f'\n[servers.lanes]\nurl = "{lanes_url}"\ntransport = "http"\n'
        'include = "always"\ntrust = "auto"\ntimeout = 20\n'
    )
    config = write_config(tmp_path, extra="\n[gateway]\nstartup_budget = 20\n" + table)
    async with (
        running_broker(config, "http") as (url, _),
        # A 2026-07-28 host's calls to a 2026-07-28 server take no handshake-era session:
        # it watches while every session is busy.
        Client(f"{url}/mcp", mode="2026-07-28") as watcher,
        anyio.create_task_group() as tg,
    ):
        with anyio.fail_after(30):
            while "lanes__hold" not in {t.name for t in (await watcher.list_tools()).tools}:
                await anyio.sleep(0.2)
        answers: dict[str, str] = {}

        async def call(name: str, seconds: float) -> None:
            async with _host(url, name) as session:
                with anyio.fail_after(40):
                    result = await session.call_tool("lanes__hold", {"seconds": seconds})
            answers[name] = _text(result)

        for i in range(LIMIT):  # each host connection its own session: every one taken
            tg.start_soon(call, f"busy-{i}", 4)

        async def all_held() -> bool:
            result = await watcher.call_tool("lanes__holding", {})
            return bool(json.loads(_text(result)) >= LIMIT)

        with anyio.fail_after(30):
            while not await all_held():
                await anyio.sleep(0.1)
        async with _host(url, "late") as late_host:  # one more host
            with anyio.fail_after(40):  # waits for a session to go idle
                late = await late_host.call_tool("lanes__hold", {"seconds": 0})
    assert _text(late) == "held" and not late.is_error, late
    assert answers == {name: "held" for name in answers} and len(answers) == LIMIT


async def _subscribe(session: ClientSession, uri: str) -> None:
    request = types.SubscribeRequest(params=types.SubscribeRequestParams(uri=uri))
    with anyio.fail_after(20):
        await session.send_request(request, types.EmptyResult)


async def test_subscriptions_are_bounded_per_host_and_released_when_it_leaves(
    tmp_path: Path,
) -> None:
    table = fixture_table(FIXTURES / "round_three_server.py", "round", prefix="")
    gateway = "\n[gateway]\nstartup_budget = 20\nmax_subscriptions_per_host = 3\n"
    config = write_config(tmp_path, extra=gateway + table)
    async with running_broker(config, "http") as (url, _), _host(url, "other") as other:
        await _listed(other, "live")

        async def live() -> dict[str, int]:
            return json.loads(_text(await other.call_tool("live", {})))  # type: ignore[no-any-return]

        async with _host(url, "leaving") as leaving:
            for i in range(3):
                await _subscribe(leaving, f"test://item/{i}")
            await _subscribe(leaving, "test://item/2")  # again: no new subscription
            with pytest.raises(MCPError, match="max_subscriptions_per_host"):
                await _subscribe(leaving, "test://item/3")
            assert await live() == {"live": 3, "made": 3}  # nothing asked for the fourth
        with anyio.fail_after(20):  # its connection closed: released downstream
            while (await live())["live"]:
                await anyio.sleep(0.1)
        assert await live() == {"live": 0, "made": 3}
