"""The rest of a downstream's MCP surface through real ``context-broker serve`` processes (stdio
and Streamable HTTP hosts): resource templates, completions, resource subscriptions and the
resource and prompt list changes, under ``prefix = ""`` and under the default prefix."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import ClientSession, MCPError, StdioServerParameters, stdio_client
from mcp.client.session import IncomingMessage
from mcp.client.streamable_http import streamable_http_client
from mcp.client.subscriptions import listen
from mcp.shared.subscriptions import ResourceUpdated

from tests.support.broker_procs import (
    BROKER,
    fixture_table,
    gateway_config,
    running_broker,
    server_env,
)

FIXTURE = Path(__file__).parent / "fixtures" / "surface_server.py"
TEMPLATE = "test://template/{id}/data"
WRAPPED_TEMPLATE = "downstream://wrapped/test%3A%2F%2Ftemplate%2F{id}%2Fdata"
WRAPPED_STATIC = "downstream://wrapped/test%3A%2F%2Fstatic"


def server_table(name: str, *args: str, prefix: str | None = None) -> str:
    """A ``[servers.NAME]`` table running the surface fixture as ``name``."""
    return fixture_table(FIXTURE, name, *args, prefix=prefix)


broker_config = gateway_config


class Host:
    """A host's session with the notifications it received."""

    def __init__(self) -> None:
        self.notices: list[types.ServerNotification] = []
        self.session: ClientSession

    async def handle(self, message: IncomingMessage) -> None:
        if not isinstance(message, Exception):
            self.notices.append(message)

    async def start(self, read: Any, write: Any) -> AsyncIterator[Host]:
        async with ClientSession(read, write, message_handler=self.handle) as session:
            self.session = session
            await session.initialize()
            yield self

    async def wait_for(self, kind: type[Any], within: float = 20) -> list[Any]:
        """The notifications of ``kind`` received, once there is one (bounded)."""
        with anyio.fail_after(within):
            while not (found := [n for n in self.notices if isinstance(n, kind)]):
                await anyio.sleep(0.05)
        return found

    def count(self, kind: type[Any]) -> int:
        return sum(isinstance(n, kind) for n in self.notices)


@asynccontextmanager
async def stdio_host(config: Path) -> AsyncIterator[Host]:
    params = StdioServerParameters(
        command=BROKER, args=["serve", "--config", str(config)], env=server_env()
    )
    async with stdio_client(params) as (read, write):
        async for host in Host().start(read, write):
            yield host


@asynccontextmanager
async def http_hosts(config: Path, count: int) -> AsyncIterator[list[Host]]:
    """``count`` hosts, each on its own Streamable HTTP connection to one broker."""
    async with running_broker(config, "http") as (url, _):
        hosts: list[Host] = []
        async with anyio.create_task_group() as tg:
            ready = anyio.Event()
            done = anyio.Event()

            async def one() -> None:
                async with streamable_http_client(f"{url}/mcp") as (read, write):
                    async for host in Host().start(read, write):
                        hosts.append(host)
                        if len(hosts) == count:
                            ready.set()
                        await done.wait()

            for _ in range(count):
                tg.start_soon(one)
            with anyio.fail_after(30):
                await ready.wait()
            yield hosts
            done.set()


async def until(check: Callable[[], Any], within: float = 30) -> Any:
    """``check()`` once it gives something truthy (it may raise meanwhile)."""
    with anyio.fail_after(within):
        while True:
            try:
                if found := await check():
                    return found
            except MCPError:
                pass
            await anyio.sleep(0.2)


async def templates(session: ClientSession, wanted: str) -> list[str]:
    async def listed() -> list[str] | None:
        rows = [
            t.uri_template for t in (await session.list_resource_templates()).resource_templates
        ]
        return rows if wanted in rows else None

    found: list[str] = await until(listed)
    return found


def text_of(result: types.ReadResourceResult) -> str:
    (content,) = result.contents
    assert isinstance(content, types.TextResourceContents)
    return content.text


async def complete(
    session: ClientSession,
    ref: types.PromptReference | types.ResourceTemplateReference,
    name: str,
    value: str,
    context: dict[str, str] | None = None,
) -> list[str]:
    with anyio.fail_after(20):
        done = await session.complete(ref, {"name": name, "value": value}, context)
    return done.completion.values


async def subscribe(session: ClientSession, uri: str, *, unsubscribe: bool = False) -> None:
    """``resources/subscribe`` (or ``unsubscribe``), sent as a 2025-era host sends it."""
    request: types.SubscribeRequest | types.UnsubscribeRequest = (
        types.UnsubscribeRequest(params=types.UnsubscribeRequestParams(uri=uri))
        if unsubscribe
        else types.SubscribeRequest(params=types.SubscribeRequestParams(uri=uri))
    )
    with anyio.fail_after(20):
        await session.send_request(request, types.EmptyResult)


async def call(session: ClientSession, tool: str, **args: Any) -> str:
    with anyio.fail_after(20):
        result = await session.call_tool(tool, args)
    block = result.content[0]
    assert not result.is_error and isinstance(block, types.TextContent), result
    return block.text


async def test_templates_completions_and_capabilities_under_prefix_empty_over_stdio(
    tmp_path: Path,
) -> None:
    config = broker_config(tmp_path, server_table("plain", prefix=""))
    async with stdio_host(config) as host:
        session = host.session
        caps = session.server_capabilities
        assert caps is not None and caps.completions is not None
        assert caps.resources is not None and caps.resources.subscribe
        assert caps.resources.list_changed and caps.prompts and caps.prompts.list_changed
        listed = await templates(session, TEMPLATE)
        assert "test://search{?q}" in listed  # the downstream's second page
        assert "context://sessions/{session_id}" in listed  # the broker's own stay
        read = await session.read_resource("test://template/123/data")
        assert text_of(read) == "plain data for 123"
        assert str(read.contents[0].uri) == "test://template/123/data"
        assert text_of(await session.read_resource("test://search?q=abc")) == "plain found abc"
        asked = await complete(session, types.PromptReference(name="ask"), "topic", "py")
        assert asked == ["python", "pytest", "plain:ask:[]"]
        by_template = await complete(
            session, types.ResourceTemplateReference(uri=TEMPLATE), "id", "12", {"x": "y"}
        )
        assert by_template == ["123", "124", f"plain:{TEMPLATE}:[('x', 'y')]"]
        own = await complete(session, types.PromptReference(name="context"), "message", "h")
        assert own == []
        with pytest.raises(MCPError, match="no downstream prompt 'nothing'"):
            await complete(session, types.PromptReference(name="nothing"), "a", "b")


async def test_templates_and_completions_under_the_default_prefix_over_http(
    tmp_path: Path,
) -> None:
    config = broker_config(tmp_path, server_table("wrapped"))
    async with http_hosts(config, 1) as (host,):
        session = host.session
        listed = await templates(session, WRAPPED_TEMPLATE)
        assert TEMPLATE not in listed
        assert "downstream://wrapped/test%3A%2F%2Fsearch{?q}" in listed
        filled = WRAPPED_TEMPLATE.replace("{id}", "123")
        read = await session.read_resource(filled)
        assert text_of(read) == "wrapped data for 123" and str(read.contents[0].uri) == filled
        search = await session.read_resource("downstream://wrapped/test%3A%2F%2Fsearch?q=abc")
        assert text_of(search) == "wrapped found abc"
        ref = types.ResourceTemplateReference(uri=WRAPPED_TEMPLATE)
        assert await complete(session, ref, "id", "2") == ["200", f"wrapped:{TEMPLATE}:[]"]
        prompt = types.PromptReference(name="wrapped__ask")
        assert await complete(session, prompt, "topic", "r") == ["rust", "wrapped:ask:[]"]
        mine = types.ResourceTemplateReference(uri="context://rules/{name}")
        assert await complete(session, mine, "name", "p") == []


async def test_an_update_reaches_the_hosts_subscribed_by_the_uri_they_used_over_http(
    tmp_path: Path,
) -> None:
    config = broker_config(tmp_path, server_table("wrapped"))
    async with http_hosts(config, 2) as (fan, other):
        await until(lambda: fan.session.read_resource(WRAPPED_STATIC))
        await subscribe(fan.session, WRAPPED_STATIC)
        await subscribe(other.session, WRAPPED_STATIC)
        await subscribe(other.session, WRAPPED_STATIC, unsubscribe=True)
        assert await call(other.session, "wrapped__touch", uri="test://static") == "told 1"
        (update,) = await fan.wait_for(types.ResourceUpdatedNotification)
        assert str(update.params.uri) == WRAPPED_STATIC
        await anyio.sleep(0.5)
        assert other.count(types.ResourceUpdatedNotification) == 0
        before = text_of(await fan.session.read_resource(WRAPPED_STATIC))
        assert before.endswith("unsubscribed: ")  # another host still wants it
        await subscribe(fan.session, WRAPPED_STATIC, unsubscribe=True)
        after = text_of(await fan.session.read_resource(WRAPPED_STATIC))
        assert after.endswith("unsubscribed: test://static")
        assert await call(other.session, "wrapped__touch", uri="test://static") == "told 0"


async def test_updates_and_list_changes_reach_a_stdio_host(tmp_path: Path) -> None:
    config = broker_config(tmp_path, server_table("plain", prefix=""))
    async with stdio_host(config) as host:
        session = host.session
        await until(lambda: session.read_resource("test://template/7/data"))
        await subscribe(session, "test://template/7/data")  # a URI from a template
        assert await call(session, "touch", uri="test://template/7/data") == "told 1"
        (update,) = await host.wait_for(types.ResourceUpdatedNotification)
        assert str(update.params.uri) == "test://template/7/data"
        await session.list_resources()
        await session.list_prompts()
        assert await call(session, "change_lists") == "told 1"
        await host.wait_for(types.ResourceListChangedNotification)
        await host.wait_for(types.PromptListChangedNotification)


async def test_a_subscription_is_refused_where_the_server_offers_none(tmp_path: Path) -> None:
    config = broker_config(tmp_path, server_table("quiet", "--no-subscribe"))
    async with stdio_host(config) as host:
        session = host.session
        static = "downstream://quiet/test%3A%2F%2Fstatic"
        await until(lambda: session.read_resource(static))
        with pytest.raises(MCPError, match=r"'quiet' does not offer subscriptions"):
            await subscribe(session, static)
        with pytest.raises(MCPError, match="sends no updates"):
            await subscribe(session, "context://catalog")
        with pytest.raises(MCPError, match="no downstream server named 'nobody'"):
            await subscribe(session, "downstream://nobody/test%3A%2F%2Fstatic")


async def test_without_a_subscribing_server_a_http_host_is_not_offered_subscriptions(
    tmp_path: Path,
) -> None:
    config = broker_config(tmp_path, server_table("quiet", "--no-subscribe"))
    async with running_broker(config, "http") as (url, _):
        await anyio.sleep(0)  # the broker logs its URL once serving; the server may lag

        async def caps() -> types.ServerCapabilities | None:
            async with (
                streamable_http_client(f"{url}/mcp") as (read, write),
                ClientSession(read, write) as session,
            ):
                await session.initialize()
                found = session.server_capabilities
                resources = found.resources if found is not None else None
                return found if resources is not None and not resources.subscribe else None

        found = await until(caps)
        assert found.completions is not None and found.resources.list_changed


async def test_subscriptions_are_made_again_when_the_server_comes_back(tmp_path: Path) -> None:
    config = broker_config(tmp_path, server_table("plain", prefix=""))
    text = config.read_text(encoding="utf-8").replace(
        "[gateway]\n", "[gateway]\nbackoff_base = 0.1\nbackoff_max = 0.2\n"
    )
    config.write_text(text, encoding="utf-8")
    async with stdio_host(config) as host:
        session = host.session
        await until(lambda: session.read_resource("test://static"))
        await subscribe(session, "test://static")
        with anyio.fail_after(20), contextlib.suppress(MCPError):  # either way the call fails
            crashed = await session.call_tool("crash", {})
            assert crashed.is_error

        async def touched() -> bool:
            result = await session.call_tool("touch", {"uri": "test://static"})
            block = result.content[0]
            return isinstance(block, types.TextContent) and block.text == "told 1"

        assert await until(touched)  # the new process was subscribed by the broker
        (update,) = await host.wait_for(types.ResourceUpdatedNotification)
        assert str(update.params.uri) == "test://static"


async def test_a_2026_host_listening_for_a_resource_gets_its_updates(tmp_path: Path) -> None:
    config = broker_config(tmp_path, server_table("wrapped"))
    async with (
        running_broker(config, "http") as (url, _),
        streamable_http_client(f"{url}/mcp") as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.discover()
        await until(lambda: session.read_resource(WRAPPED_STATIC))
        async with listen(session, resource_subscriptions=[WRAPPED_STATIC]) as stream:
            assert await call(session, "wrapped__touch", uri="test://static") == "told 1"
            with anyio.fail_after(20):
                event = await anext(stream)
        assert isinstance(event, ResourceUpdated) and event.uri == WRAPPED_STATIC

        async def unsubscribed() -> bool:  # once the stream ended, on the server too
            text = text_of(await session.read_resource(WRAPPED_STATIC))
            return text.endswith("unsubscribed: test://static")

        await until(unsubscribed)
        too_many = [f"{WRAPPED_STATIC}?n={i}" for i in range(257)]
        with pytest.raises(MCPError, match="at most 256 per stream"):
            async with listen(session, resource_subscriptions=too_many):
                pass
