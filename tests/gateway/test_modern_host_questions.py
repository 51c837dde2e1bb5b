"""A 2026-07-28 host gets what a downstream asks during its call: the broker answers the
host's call with an ``InputRequiredResult`` carrying the question, keeps the downstream's
request waiting, and answers it when the host calls again with its ``inputResponses``.
Through a real ``context-broker serve`` over stdio and HTTP, in front of a handshake-era
stdio server that asks for elicitation, sampling and roots; the host is the MCP SDK's own
client on the 2026-07-28 wire, which answers an ``InputRequiredResult`` as hosts do."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client, MCPError, StdioServerParameters

from tests.gateway.gateway_env import free_port
from tests.gateway.test_gateway_relay import FIXTURE, SERVER, Host
from tests.support.broker_procs import BROKER, running_broker, server_env, write_config

MODERN = "2026-07-28"
SHORT = SERVER.replace("timeout = 20", "timeout = 3")


def _stdio(config: Path) -> StdioServerParameters:
    return StdioServerParameters(
        command=BROKER, args=["serve", "--config", str(config)], env=server_env()
    )


async def _arrived(client: Client) -> None:
    with anyio.fail_after(30):
        while "asks__ask_name" not in {t.name for t in (await client.list_tools()).tools}:
            await anyio.sleep(0.2)


async def _text(client: Client, tool: str, **arguments: Any) -> str:
    with anyio.fail_after(30):
        result = await client.call_tool(tool, arguments)
    assert not result.is_error, result
    block = result.content[0]
    assert isinstance(block, types.TextContent)
    return block.text


async def test_a_2026_host_over_stdio_answers_elicitation_sampling_and_roots(
    tmp_path: Path,
) -> None:
    host = Host()
    config = write_config(tmp_path, extra=SERVER)
    async with Client(_stdio(config), mode=MODERN, **host.callbacks()) as client:
        assert client.protocol_version == MODERN
        await _arrived(client)
        assert await _text(client, "asks__ask_name") == "accept: Ada"
        assert await _text(client, "asks__ask_model", prompt="2+2") == "host-model: completed 2+2"
        assert await _text(client, "asks__ask_roots") == "file:///work/project"


async def test_several_questions_at_once_and_several_rounds(tmp_path: Path) -> None:
    host = Host()
    rounds: list[int] = []
    config = write_config(tmp_path, extra=SERVER)
    async with Client(_stdio(config), mode=MODERN, **host.callbacks()) as client:
        await _arrived(client)
        session = client.session
        responses: dict[str, Any] | None = None
        state: str | None = None
        with anyio.fail_after(60):
            while True:
                outcome = await session.call_tool(
                    "asks__ask_twice",
                    {},
                    input_responses=responses,
                    request_state=state,
                    allow_input_required=True,
                )
                if not isinstance(outcome, types.InputRequiredResult):
                    break
                asked = outcome.input_requests or {}
                rounds.append(len(asked))
                responses = {key: await _answer(host, request) for key, request in asked.items()}
                state = outcome.request_state
    block = outcome.content[0]
    assert isinstance(block, types.TextContent)
    assert block.text == "Ada | file:///work/project | completed Ada"
    assert rounds == [2, 1], rounds  # the name and the roots together, then the completion


async def _answer(host: Host, request: types.InputRequest) -> Any:
    """What ``host`` answers an embedded question with."""
    if isinstance(request, types.ElicitRequest):
        return await host.elicit(None, request.params)
    if isinstance(request, types.CreateMessageRequest):
        return await host.sample(None, request.params)
    return await host.roots(None)


async def test_a_2026_host_over_http_answers_them_too(tmp_path: Path) -> None:
    host = Host()
    config = write_config(tmp_path, extra=SERVER)
    async with (
        running_broker(config, "http") as (url, _),
        Client(f"{url}/mcp", mode=MODERN, **host.callbacks()) as client,
    ):
        await _arrived(client)
        assert await _text(client, "asks__ask_name") == "accept: Ada"
        assert await _text(client, "asks__ask_roots") == "file:///work/project"


async def test_the_question_comes_as_an_input_required_result_bound_to_the_call(
    tmp_path: Path,
) -> None:
    host = Host()
    config = write_config(tmp_path, extra=SERVER)
    async with Client(_stdio(config), mode=MODERN, **host.callbacks()) as client:
        await _arrived(client)
        session = client.session
        with anyio.fail_after(30):
            first = await session.call_tool("asks__ask_name", {}, allow_input_required=True)
        assert isinstance(first, types.InputRequiredResult), first
        assert first.request_state is not None and first.input_requests
        ((key, asked),) = first.input_requests.items()
        assert isinstance(asked, types.ElicitRequest)
        answer = types.ElicitResult(action="accept", content={"name": "Grace"})

        async def retry(tool: str, state: str) -> Any:
            with anyio.fail_after(30):
                return await session.call_tool(
                    tool,
                    {},
                    input_responses={key: answer},
                    request_state=state,
                    allow_input_required=True,
                )

        async def refused(tool: str, state: str) -> None:
            with pytest.raises(MCPError) as caught:
                await retry(tool, state)
            assert caught.value.error.code == types.INVALID_PARAMS, caught.value.error

        await refused("asks__ask_roots", first.request_state)  # good for this call only
        await refused("asks__ask_name", first.request_state[:-4] + "AAAA")  # made up
        done = await retry("asks__ask_name", first.request_state)  # the real one answers
        assert isinstance(done, types.CallToolResult), done
        block = done.content[0]
        assert isinstance(block, types.TextContent) and block.text == "accept: Grace"
        await refused("asks__ask_name", first.request_state)  # used once


async def test_a_host_that_never_answers_leaves_no_downstream_request_waiting(
    tmp_path: Path,
) -> None:
    host = Host()
    config = write_config(tmp_path, extra=SHORT)
    async with Client(_stdio(config), mode=MODERN, **host.callbacks()) as client:
        await _arrived(client)
        note = tmp_path / "note.txt"
        with anyio.fail_after(30):
            first = await client.session.call_tool(
                "asks__ask_or_note", {"path": str(note)}, allow_input_required=True
            )
        assert isinstance(first, types.InputRequiredResult)
        with anyio.fail_after(20):  # past the server's timeout the call is given up
            while not note.exists():
                await anyio.sleep(0.2)
        # The downstream's question was answered with an error or its call cancelled.
        assert note.read_text(encoding="utf-8") in (
            "cancelled",
            "error -32001: the host did not answer within 3s",
        ), note.read_text()
        with pytest.raises(MCPError) as expired:
            await client.session.call_tool(
                "asks__ask_or_note",
                {"path": str(note)},
                input_responses={"q1": types.ElicitResult(action="accept", content={"name": "x"})},
                request_state=first.request_state,
                allow_input_required=True,
            )
        assert "expired" in expired.value.error.message
        # The downstream is free: its next question is asked and answered as usual.
        assert await _text(client, "asks__ask_name") == "accept: Ada"


async def test_a_2026_host_without_the_capability_is_never_asked(tmp_path: Path) -> None:
    config = write_config(tmp_path, extra=SERVER)
    async with Client(_stdio(config), mode=MODERN) as client:  # declares nothing
        await _arrived(client)
        assert await _text(client, "asks__ask_name") == (
            "error -32601: the host does not support form elicitation"
        )
        assert (
            await _text(client, "asks__ask_roots")
            == "error -32601: the host does not support roots"
        )


@asynccontextmanager
async def _remote(kind: str) -> AsyncIterator[str]:
    """The asks_host fixture over ``kind`` ("http" or "sse"); its URL once it listens."""
    port = free_port()
    process = await anyio.open_process(
        [sys.executable, str(FIXTURE), kind, str(port)], stderr=subprocess.DEVNULL
    )
    try:
        with anyio.fail_after(30):
            while True:
                try:
                    await (await anyio.connect_tcp("127.0.0.1", port)).aclose()
                    break
                except OSError:
                    await anyio.sleep(0.1)
        yield f"http://127.0.0.1:{port}/{'mcp' if kind == 'http' else 'sse'}"
    finally:
        process.terminate()
        await process.wait()


@pytest.mark.parametrize("kind", ["http", "sse"])
async def test_a_handshake_era_remote_downstream_sees_each_hosts_own_capabilities(
    tmp_path: Path, kind: str
) -> None:
    async def elicit(context: Any, params: Any) -> types.ElicitResult:
        return types.ElicitResult(action="accept", content={"name": "Ada"})

    async def roots(context: Any) -> types.ListRootsResult:
        return types.ListRootsResult(roots=[types.Root(uri="file:///work/project")])

    async with _remote(kind) as url:
        server = (
            f"[gateway]\nstartup_budget = 20\n\n[servers.asks]\nurl = {url!r}\n"
            f'transport = "{kind}"\nprotocol_version = "2025-11-25"\ninclude = "always"\n'
            'trust = "auto"\ntimeout = 20\n'
        )
        config = write_config(tmp_path, extra=server)
        async with (
            Client(_stdio(config), mode=MODERN, elicitation_callback=elicit) as asks,
            Client(_stdio(config), mode=MODERN, list_roots_callback=roots) as lists,
            Client(_stdio(config), mode="legacy", list_roots_callback=roots) as older,
        ):
            for client in (asks, lists, older):
                await _arrived(client)
            assert await _text(asks, "asks__capabilities") == "elicitation"
            assert await _text(lists, "asks__capabilities") == "roots"
            assert await _text(older, "asks__capabilities") == "roots"
            assert await _text(asks, "asks__ask_name") == "accept: Ada"
            assert await _text(lists, "asks__ask_roots") == "file:///work/project"
