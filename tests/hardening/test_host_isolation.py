"""One host cannot stand in for another, through a real ``context-broker serve`` over HTTP in
front of a downstream that asks its client questions (``asks_host.py``, over stdio: one
session every host shares): a question one host leaves unanswered does not keep another
host's questions refused, and what the broker hands one host to come back with redeems
nothing for another."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx2
import mcp_types as types
import pytest
from context_broker.server.gateway.relay.host import Host
from mcp import Client, ClientSession, MCPError
from mcp.client.streamable_http import streamable_http_client

from tests.support.broker_procs import running_broker, server_env, write_config

ASKS = Path(__file__).parents[1] / "gateway" / "fixtures" / "asks_host.py"
MODERN = "2026-07-28"
TIMEOUT = 60  # the server's: how long a question may wait for its host, uncontended


def _config(folder: Path, extra: str = "") -> Path:
    table = (
        f"\n[gateway]\nstartup_budget = 20\n\n[servers.asks]\ncommand = {sys.executable!r}\n"
        f'args = [{str(ASKS)!r}]\ninclude = "always"\ntrust = "auto"\ntimeout = {TIMEOUT}\n'
    )
    return write_config(folder, extra=table + extra)


class _Asked:
    """A host's answers to elicitation: ``name``, or (None) never, once it was asked."""

    def __init__(self, name: str | None) -> None:
        self.name = name
        self.asked = anyio.Event()

    async def elicit(self, context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        self.asked.set()
        if self.name is None:
            await anyio.sleep_forever()
        return types.ElicitResult(action="accept", content={"name": self.name})


@asynccontextmanager
async def _handshake_host(url: str, asked: _Asked) -> AsyncIterator[ClientSession]:
    async with (
        streamable_http_client(f"{url}/mcp") as (read, write),
        ClientSession(read, write, elicitation_callback=asked.elicit) as session,
    ):
        await session.initialize()
        with anyio.fail_after(30):
            while "asks__ask_name" not in {t.name for t in (await session.list_tools()).tools}:
                await anyio.sleep(0.2)
        yield session


def _text(result: types.CallToolResult) -> str:
    block = result.content[0]
    assert isinstance(block, types.TextContent), result
    return block.text


async def _modern_leaves_it(url: str, asked: anyio.Event) -> None:
    """A 2026-07-28 host that gets the question in its call's answer and never comes back."""
    async with Client(f"{url}/mcp", mode=MODERN, elicitation_callback=_Asked("x").elicit) as host:
        with anyio.fail_after(30):
            first = await host.session.call_tool("asks__ask_name", {}, allow_input_required=True)
        assert isinstance(first, types.InputRequiredResult), first
        asked.set()
        await anyio.sleep_forever()


@pytest.mark.parametrize("leaving", ["handshake", "modern"])
async def test_a_question_one_host_leaves_unanswered_does_not_keep_another_hosts_refused(
    tmp_path: Path, leaving: str
) -> None:
    async with running_broker(_config(tmp_path), "http") as (url, _):
        silent, answering = _Asked(None), _Asked("Bea")
        left: list[str] = []
        async with (
            _handshake_host(url, silent) as quiet,
            _handshake_host(url, answering) as other,
            anyio.create_task_group() as tg,
        ):
            if leaving == "handshake":

                async def leave() -> None:
                    left.append(_text(await quiet.call_tool("asks__ask_name", {})))

                tg.start_soon(leave)
            else:
                tg.start_soon(_modern_leaves_it, url, silent.asked)
            with anyio.fail_after(30):
                await silent.asked.wait()  # its question waits for it, unanswered
            # Well within the server's timeout, the other host's own question is asked and
            # answered (the first try may meet the waiting question and be told to ask again).
            answers: list[str] = []
            with anyio.fail_after(TIMEOUT / 3):
                while not answers or answers[-1] != "accept: Bea":
                    answers.append(_text(await other.call_tool("asks__ask_name", {})))
                    if answers[-1] != "accept: Bea":
                        assert "ask again" in answers[-1], answers
                        await anyio.sleep(0.5)
            if leaving == "handshake":
                with anyio.fail_after(10):  # the one that left it gets the error, and only it
                    while not left:
                        await anyio.sleep(0.1)
                assert left[0].startswith("error -32001:") and "another host" in left[0], left
            tg.cancel_scope.cancel()


@asynccontextmanager
async def _modern_host(url: str, token: str, name: str) -> AsyncIterator[Client]:
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=30)
    async with (
        http,
        Client(
            streamable_http_client(f"{url}/mcp", http_client=http),
            mode=MODERN,
            elicitation_callback=_Asked(name).elicit,
        ) as client,
    ):
        yield client


async def test_a_request_state_one_host_was_given_redeems_nothing_for_another(
    tmp_path: Path,
) -> None:
    profile = (
        '\n[profiles.team]\nservers = ["asks"]\ntoken_env = ["ALICE_TOKEN", "MALLORY_TOKEN"]\n'
    )
    env = {**server_env(), "ALICE_TOKEN": "alice-" + "a" * 32, "MALLORY_TOKEN": "mal-" + "m" * 32}
    async with (
        running_broker(_config(tmp_path, profile), "http", env=env) as (url, _),
        _modern_host(url, env["ALICE_TOKEN"], "Ada") as alice,
        _modern_host(url, env["MALLORY_TOKEN"], "Mallory") as mallory,
    ):
        with anyio.fail_after(30):
            while "asks__ask_name" not in {t.name for t in (await alice.list_tools()).tools}:
                await anyio.sleep(0.2)
            first = await alice.session.call_tool("asks__ask_name", {}, allow_input_required=True)
        assert isinstance(first, types.InputRequiredResult) and first.request_state, first
        ((key, _),) = (first.input_requests or {}).items()

        async def answer(host: Client, name: str) -> Any:
            with anyio.fail_after(30):
                return await host.session.call_tool(
                    "asks__ask_name",
                    {},
                    input_responses={
                        key: types.ElicitResult(action="accept", content={"name": name})
                    },
                    request_state=first.request_state,
                    allow_input_required=True,
                )

        # The other host of the same profile, holding the token the first was given, is
        # refused and changes nothing: the call stays the first host's to answer.
        with pytest.raises(MCPError) as refused:
            await answer(mallory, "Mallory")
        assert refused.value.error.code == types.INVALID_PARAMS, refused.value.error
        done = await answer(alice, "Ada")
        assert isinstance(done, types.CallToolResult) and _text(done) == "accept: Ada", done


class _Connection:
    """What a host connection's session objects share (the SDK's ``Connection``)."""


class _Session:
    def __init__(self, connection: _Connection) -> None:
        self._connection = connection


def test_a_new_host_connection_never_takes_the_key_of_a_closed_one() -> None:
    """Lanes, relays and subscriptions know a host connection by its key: a connection that
    opens after another closed (and may sit at the same address) never gets the other's."""
    keys: set[object] = set()
    for _ in range(64):
        connection = _Connection()
        first = Host(_Session(connection), 1)  # type: ignore[arg-type]
        again = Host(_Session(connection), 2)  # type: ignore[arg-type]
        assert first.key == again.key  # every request of one connection: one key
        keys.add(first.key)
        del first, again, connection
    assert len(keys) == 64
