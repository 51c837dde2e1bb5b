"""Security, round three (issue 34, findings 1 and 7), through a real ``context-broker serve``
in front of a hostile downstream of our own (``fixtures/round_three_server.py``): one server
cannot speak for another, and what a downstream says about one host's request reaches no
other host."""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from tests.support.broker_procs import fixture_table, gateway_config, running_broker
from tests.support.stdio_host import StdioHost, stdio_broker

FIXTURE = Path(__file__).parent / "fixtures" / "round_three_server.py"


def _config(folder: Path) -> Path:
    return gateway_config(folder, fixture_table(FIXTURE, "round", prefix=""))


async def _listed(host: StdioHost, tool: str) -> None:
    with anyio.fail_after(30):
        while True:
            answer = await host.request("tools/list")
            if tool in {t["name"] for t in answer["result"]["tools"]}:
                return
            await anyio.sleep(0.2)


def _text(answer: dict[str, Any]) -> str:
    assert "result" in answer, answer
    return str(answer["result"]["content"][0]["text"])


async def test_a_downstream_cannot_answer_another_call_of_the_host_on_the_stdio_fast_path(
    tmp_path: Path,
) -> None:
    async with stdio_broker(_config(tmp_path), log=tmp_path / "broker.log") as host:
        await _listed(host, "forge")
        waiting, forging = host.fresh_id(), host.fresh_id()
        await host.call(waiting, "wait", {})  # plain calls: both take the fast path
        await host.call(forging, "forge", {"target": waiting})
        assert _text(await host.answer(forging)) == "forged"
        assert _text(await host.answer(waiting)) == "real answer"
        await host.assert_alive()
    wire = b"\n".join(host.lines)
    assert b"forged answer" not in wire and b"smuggled note" not in wire
    # What was sound stays: the server's well-formed log message reached the host, as a
    # notification and nothing more.
    notes = [json.loads(line) for line in host.lines if b"notifications/message" in line]
    assert notes == [
        {
            "jsonrpc": "2.0",
            "method": "notifications/message",
            "params": {"level": "info", "data": "a real note"},
        }
    ]


class _Host:
    """An HTTP host that keeps the log messages it is sent."""

    def __init__(self) -> None:
        self.logs: list[Any] = []
        self.session: ClientSession

    async def log(self, params: types.LoggingMessageNotificationParams) -> None:
        self.logs.append(params.data)


@asynccontextmanager
async def _http_host(url: str) -> AsyncIterator[_Host]:
    host = _Host()
    async with (
        streamable_http_client(f"{url}/mcp") as (read, write),
        ClientSession(read, write, logging_callback=host.log) as session,
    ):
        await session.initialize()
        host.session = session
        yield host


async def _until(check: Any, within: float = 30) -> None:
    with anyio.fail_after(within):
        while not await check():
            await anyio.sleep(0.1)


async def _ask(host: Any, asked: str) -> str:
    """Ask the downstream, through the broker, something it logs about while answering: a
    subscription, or a completion of a template's argument. Returns what it logs."""
    if asked == "subscribe":
        request = types.SubscribeRequest(params=types.SubscribeRequestParams(uri="test://item/41"))
        await host.session.send_request(request, types.EmptyResult)
        return "about the subscriber's resource test://item/41"
    templates = (await host.session.list_resource_templates()).resource_templates
    ref = types.ResourceTemplateReference(uri=templates[-1].uri_template)
    done = await host.session.complete(ref, {"name": "id", "value": "4"})
    assert done.completion.values == ["41", "42"]
    return "about the completion of 4"


@pytest.mark.parametrize("asked", ["subscribe", "complete"])
async def test_a_downstream_log_about_one_hosts_request_never_reaches_another_host(
    tmp_path: Path, asked: str
) -> None:
    async with (
        running_broker(_config(tmp_path), "http") as (url, _),
        _http_host(url) as asker,
        _http_host(url) as bystander,
    ):

        async def listed() -> bool:
            return "hold" in {t.name for t in (await bystander.session.list_tools()).tools}

        await _until(listed)
        held: list[types.CallToolResult] = []

        async def hold() -> None:
            with anyio.fail_after(30):
                held.append(await bystander.session.call_tool("hold", {}))

        async with anyio.create_task_group() as tg:
            tg.start_soon(hold)

            async def holding() -> bool:
                return "holding" in bystander.logs

            await _until(holding)  # the bystander's call is in flight downstream
            with anyio.fail_after(20):  # the downstream logs about it while answering
                about = await _ask(asker, asked)
        block = held[0].content[0]
        assert isinstance(block, types.TextContent) and block.text == "held"
        assert about not in bystander.logs, bystander.logs
        assert bystander.logs == ["holding"]


@pytest.mark.parametrize("kind", ["http", "stdio"])
async def test_a_late_log_about_one_hosts_call_never_reaches_another_hosts_call(
    tmp_path: Path, kind: str
) -> None:
    """A log message the downstream sends after host A's call ended, while only host B has a
    call in flight, never reaches B: over HTTP each host connection has its own downstream
    session (the message is A's, and dropped, A having no call); a stdio server's one session
    is shared, so a log message on it goes to nobody once two hosts have used it."""
    from tests.gateway.test_gateway_relay import FIXTURE as ASKS
    from tests.gateway.test_modern_host_questions import _remote

    async with AsyncExitStack() as stack:
        if kind == "http":
            downstream = await stack.enter_async_context(_remote("http"))
            where = f'url = "{downstream}"\ntransport = "http"\nprotocol_version = "2025-11-25"\n'
        else:
            where = f"command = {sys.executable!r}\nargs = [{str(ASKS)!r}]\n"
        table = f'\n[servers.asks]\n{where}include = "always"\ntrust = "auto"\ntimeout = 20\n'
        config = gateway_config(tmp_path, table)
        url, _ = await stack.enter_async_context(running_broker(config, "http"))
        first = await stack.enter_async_context(_http_host(url))
        second = await stack.enter_async_context(_http_host(url))

        async def listed() -> bool:
            names = {t.name for t in (await second.session.list_tools()).tools}
            return "asks__wait" in names

        await _until(listed)
        with anyio.fail_after(30):
            done = await first.session.call_tool("asks__late_log", {})
            waited = await second.session.call_tool("asks__wait", {"seconds": 2.5})
        assert not done.is_error and not waited.is_error
        await anyio.sleep(0.5)
    assert "late note" not in second.logs, second.logs
    assert "late note" not in first.logs, first.logs  # its call had ended: it is nobody's
