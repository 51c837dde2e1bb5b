"""What a downstream tool asks during a host's call reaches that host, through a real
``context-broker serve`` (HTTP and stdio): elicitation, sampling, roots and log messages go to
the host and its answers come back; a host that cannot answer gives the downstream the
protocol's error at once."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

from tests.support.broker_procs import BROKER, running_broker, server_env, write_config

FIXTURE = Path(__file__).parent / "fixtures" / "asks_host.py"
SERVER = f"""
[gateway]
startup_budget = 20

[servers.asks]
command = {str(sys.executable)!r}
args = [{str(FIXTURE)!r}]
include = "always"
trust = "auto"
timeout = 20
"""


class Host:
    """A host that answers everything a server may ask, and keeps the log messages."""

    def __init__(self) -> None:
        self.logs: list[tuple[str, Any]] = []

    async def elicit(self, context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        assert isinstance(params, types.ElicitRequestFormParams)
        assert params.message == "What is your name?"
        return types.ElicitResult(action="accept", content={"name": "Ada"})

    async def sample(
        self, context: Any, params: types.CreateMessageRequestParams
    ) -> types.CreateMessageResult:
        asked = params.messages[0].content
        assert isinstance(asked, types.TextContent)
        answer = types.TextContent(type="text", text=f"completed {asked.text}")
        return types.CreateMessageResult(role="assistant", content=answer, model="host-model")

    async def roots(self, context: Any) -> types.ListRootsResult:
        return types.ListRootsResult(roots=[types.Root(uri="file:///work/project")])

    async def log(self, params: types.LoggingMessageNotificationParams) -> None:
        self.logs.append((params.level, params.data))

    def callbacks(self) -> dict[str, Any]:
        return {
            "elicitation_callback": self.elicit,
            "sampling_callback": self.sample,
            "list_roots_callback": self.roots,
            "logging_callback": self.log,
        }


async def _text(session: ClientSession, tool: str, **arguments: Any) -> str:
    """The text of a tool's result; the call asks for progress, as hosts that show it do."""

    async def progress(value: float, total: float | None, message: str | None) -> None:
        pass

    with anyio.fail_after(30):
        result = await session.call_tool(tool, arguments, progress_callback=progress)
    assert not result.is_error, result
    block = result.content[0]
    assert isinstance(block, types.TextContent)
    return block.text


async def _tools_arrived(session: ClientSession) -> None:
    with anyio.fail_after(30):
        while "asks__ask_name" not in {t.name for t in (await session.list_tools()).tools}:
            await anyio.sleep(0.2)


@asynccontextmanager
async def _stdio_host(config: Path, **callbacks: Any) -> AsyncIterator[ClientSession]:
    params = StdioServerParameters(
        command=BROKER, args=["serve", "--config", str(config)], env=server_env()
    )
    async with (
        stdio_client(params) as (read, write),
        ClientSession(read, write, **callbacks) as session,
    ):
        await session.initialize()
        await _tools_arrived(session)
        yield session


async def test_an_http_host_answers_what_a_downstream_tool_asks_during_its_call(
    tmp_path: Path,
) -> None:
    config = write_config(tmp_path, extra=SERVER)
    host = Host()
    async with (
        running_broker(config, "http") as (url, _),
        streamable_http_client(f"{url}/mcp") as (read, write),
        ClientSession(read, write, **host.callbacks()) as session,
    ):
        await session.initialize()
        await _tools_arrived(session)
        assert await _text(session, "asks__ask_name") == "accept: Ada"
        assert await _text(session, "asks__ask_model", prompt="2+2") == "host-model: completed 2+2"
        assert await _text(session, "asks__ask_roots") == "file:///work/project"
        assert await _text(session, "asks__log_twice") == "logged"
        assert ("info", "first note") in host.logs and ("warning", "second note") in host.logs


async def test_a_stdio_host_answers_what_a_downstream_tool_asks_during_its_call(
    tmp_path: Path,
) -> None:
    config = write_config(tmp_path, extra=SERVER)
    host = Host()
    async with _stdio_host(config, **host.callbacks()) as session:
        assert await _text(session, "asks__ask_name") == "accept: Ada"
        assert await _text(session, "asks__ask_model", prompt="hi") == "host-model: completed hi"
        assert await _text(session, "asks__ask_roots") == "file:///work/project"
        # A plain call (no _meta) of a host that can be asked goes where the relay reaches it.
        with anyio.fail_after(30):
            plain = await session.call_tool("asks__ask_name", {})
    block = plain.content[0]
    assert isinstance(block, types.TextContent) and block.text == "accept: Ada", plain


async def test_a_host_without_the_capabilities_gives_the_downstream_a_clean_error(
    tmp_path: Path,
) -> None:
    config = write_config(tmp_path, extra=SERVER)
    async with _stdio_host(config) as session:  # declares neither elicitation nor the rest
        name = await _text(session, "asks__ask_name")
        model = await _text(session, "asks__ask_model", prompt="hi")
        roots = await _text(session, "asks__ask_roots")
        # A plain call (no _meta) takes the stdio fast path, with no host to ask.
        with anyio.fail_after(30):
            plain = await session.call_tool("call_tool", {"server": "asks", "tool": "ask_name"})
    assert name == "error -32601: the host does not support form elicitation"
    assert model == "error -32601: the host does not support sampling"
    assert roots == "error -32601: the host does not support roots"
    block = plain.content[0]
    assert isinstance(block, types.TextContent)
    assert block.text.startswith("error -32601: elicitation: no "), block.text
