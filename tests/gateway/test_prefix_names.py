"""``[servers.NAME] prefix``: a downstream's tools, prompts and resources under the names it
wrote them with (``prefix = ""``) or behind a prefix, through real ``context-broker serve``
processes over stdio and Streamable HTTP; calls by a downstream's own name; clashes."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import ClientSession, MCPError, StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

from tests.support.broker_procs import (
    BROKER,
    fixture_table,
    gateway_config,
    running_broker,
    server_env,
)
from tests.support.stdio_host import stdio_broker

FIXTURE = Path(__file__).parent / "fixtures" / "app_server.py"


def server_table(name: str, *args: str, prefix: str | None = None) -> str:
    """A ``[servers.NAME]`` table running the app fixture as ``name``."""
    return fixture_table(FIXTURE, name, *args, prefix=prefix)


broker_config = gateway_config


@asynccontextmanager
async def stdio_host(config: Path) -> AsyncIterator[ClientSession]:
    params = StdioServerParameters(
        command=BROKER, args=["serve", "--config", str(config)], env=server_env()
    )
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        yield session


@asynccontextmanager
async def http_host(config: Path) -> AsyncIterator[ClientSession]:
    async with (
        running_broker(config, "http") as (url, _),
        streamable_http_client(f"{url}/mcp") as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield session


async def tool_names(session: ClientSession, waiting_for: str) -> dict[str, types.Tool]:
    """The listed tools by name, once ``waiting_for`` is among them (bounded)."""
    with anyio.fail_after(30):
        while True:
            tools = {t.name: t for t in (await session.list_tools()).tools}
            if waiting_for in tools:
                return tools
            await anyio.sleep(0.2)


async def call_text(
    session: ClientSession, name: str, *, progress: bool = False, **args: Any
) -> str:
    """The text of a successful call; ``progress`` asks for progress (the full path: with
    ``_meta`` the stdio fast lane steps aside)."""

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        pass

    with anyio.fail_after(30):
        result = await session.call_tool(
            name, args, progress_callback=on_progress if progress else None
        )
    assert not result.is_error, result
    block = result.content[0]
    assert isinstance(block, types.TextContent)
    return block.text


async def call_error(session: ClientSession, name: str) -> str:
    """The message of a call that fails, as a protocol error or a tool error."""
    with anyio.fail_after(30):
        try:
            result = await session.call_tool(name, {})
        except MCPError as exc:
            return exc.error.message
    assert result.is_error, result
    block = result.content[0]
    assert isinstance(block, types.TextContent)
    return block.text


def only_text(result: types.ReadResourceResult) -> str:
    (content,) = result.contents
    assert isinstance(content, types.TextResourceContents)
    return content.text


async def test_prefix_empty_keeps_the_downstreams_names_and_uris_over_stdio(
    tmp_path: Path,
) -> None:
    config = broker_config(tmp_path, server_table("plain", prefix=""))
    async with stdio_host(config) as session:
        tools = await tool_names(session, "echo")
        assert {"echo", "show_board"} <= set(tools)
        assert not any(name.startswith("plain__") for name in tools)
        assert tools["show_board"].meta == {"ui": {"resourceUri": "ui://plain/view.html"}}
        assert await call_text(session, "echo", text="fast") == "plain/echo:fast"  # fast lane
        assert await call_text(session, "echo", progress=True, text="full") == "plain/echo:full"
        uris = {str(r.uri) for r in (await session.list_resources()).resources}
        assert {"memo://notes", "ui://plain/view.html"} <= uris
        assert only_text(await session.read_resource("memo://notes")) == "notes of plain"
        view = await session.read_resource("ui://plain/view.html")
        assert str(view.contents[0].uri) == "ui://plain/view.html"
        assert "plain board" in only_text(view)
        prompts = {p.name for p in (await session.list_prompts()).prompts}
        assert "greet" in prompts and "plain__greet" not in prompts
        got = await session.get_prompt("greet", {"who": "Ada"})
        message = got.messages[0].content
        assert isinstance(message, types.TextContent) and message.text == "plain greets Ada"


async def test_prefix_empty_keeps_the_downstreams_names_and_uris_over_http(
    tmp_path: Path,
) -> None:
    config = broker_config(tmp_path, server_table("plain", prefix=""))
    async with http_host(config) as session:
        await tool_names(session, "echo")
        assert await call_text(session, "echo", text="web") == "plain/echo:web"
        assert only_text(await session.read_resource("memo://notes")) == "notes of plain"
        assert "plain board" in only_text(await session.read_resource("ui://plain/view.html"))


async def test_default_prefix_is_unchanged_and_a_bare_name_reaches_the_one_server_that_has_it(
    tmp_path: Path,
) -> None:
    config = broker_config(
        tmp_path, server_table("one", "only_one"), server_table("two", prefix="t_")
    )
    async with stdio_host(config) as session:
        tools = await tool_names(session, "t_echo")
        assert {"one__echo", "one__only_one", "one__show_board", "t_echo"} <= set(tools)
        assert "echo" not in tools and "only_one" not in tools
        assert tools["one__show_board"].meta == {"ui": {"resourceUri": "ui://one/view.html"}}
        assert await call_text(session, "one__echo", text="x") == "one/echo:x"
        assert await call_text(session, "t_echo", text="y") == "two/echo:y"
        # As an MCP App's HTML calls it: by the downstream's own name.
        assert await call_text(session, "only_one", text="z") == "one/only_one:z"
        assert await call_text(session, "only_one", progress=True) == "one/only_one:"
        shared = await call_error(session, "echo")
        assert "'one'" in shared and "'two'" in shared
        assert "one__echo" in shared and "t_echo" in shared
        unknown = await call_error(session, "no_such_tool")
        assert "tools/list" in unknown and "list_tools" not in unknown
        uris = {str(r.uri) for r in (await session.list_resources()).resources}
        assert {"ui://one/view.html", "ui://two/view.html"} <= uris  # ui:// keeps its scheme
        assert "downstream://one/memo%3A%2F%2Fnotes" in uris
        assert "one board" in only_text(await session.read_resource("ui://one/view.html"))
        wrapped = await session.read_resource("downstream://two/memo%3A%2F%2Fnotes")
        assert only_text(wrapped) == "notes of two"
        prompts = {p.name for p in (await session.list_prompts()).prompts}
        assert {"one__greet", "t_greet"} <= prompts
        created = await session.call_tool("create_session", {"agent": "test"})
        sid = (created.structured_content or {})["session_id"]
        built = await session.call_tool(
            "build_request_context", {"session_id": sid, "message": "echo the board"}
        )
        text = (built.structured_content or {})["text"]
        assert "`t_echo`" in text and "`one__echo`" in text  # the names to call them by


async def test_a_name_two_servers_would_expose_goes_to_the_first_and_list_servers_says_so(
    tmp_path: Path,
) -> None:
    config = broker_config(
        tmp_path,
        server_table("alpha", "list_servers", prefix=""),
        server_table("beta", "beta_only", prefix=""),
    )
    async with stdio_host(config) as session:
        tools = await tool_names(session, "beta_only")
        assert await call_text(session, "echo", text="q") == "alpha/echo:q"
        assert await call_text(session, "beta_only") == "beta/beta_only:"
        assert [t for t in tools if t == "echo"] == ["echo"]
        via = await session.call_tool("call_tool", {"server": "beta", "tool": "echo"})
        assert isinstance(via.content[0], types.TextContent)
        assert via.content[0].text == "beta/echo:"  # not listed, still reachable
        with anyio.fail_after(30):
            listed = await session.call_tool("list_servers", {})
        rows = {row["name"]: row for row in (listed.structured_content or {})["servers"]}
        beta_clashes = " ".join(rows["beta"]["name_clashes"])
        assert "'echo' of server 'beta'" in beta_clashes and "server 'alpha'" in beta_clashes
        alpha_clashes = " ".join(rows["alpha"]["name_clashes"])
        assert "'list_servers'" in alpha_clashes and "broker's own tool" in alpha_clashes
        text = listed.content[0]
        assert isinstance(text, types.TextContent) and "name clash" in text.text


def run_check(config: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [BROKER, "check", "--config", str(config), *extra],
        capture_output=True,
        text=True,
        env=server_env(),
        timeout=120,
        check=False,
    )


def test_check_shows_a_name_clash_found_when_tools_are_listed(tmp_path: Path) -> None:
    config = broker_config(
        tmp_path, server_table("alpha", prefix=""), server_table("beta", prefix="")
    )
    done = run_check(config)
    assert "name clash" in done.stdout, done.stdout + done.stderr
    assert "'echo' of server 'beta'" in done.stdout and "'alpha'" in done.stdout


@pytest.mark.parametrize(
    ("tables", "names"),
    [
        (
            (server_table("alpha", prefix="x_"), server_table("beta", prefix="x_")),
            ("alpha", "beta"),
        ),
        ((server_table("alpha"), server_table("beta", prefix="alpha__")), ("alpha", "beta")),
        ((server_table("alpha", prefix="list_"),), ("alpha", "list_servers")),
    ],
)
def test_prefixes_that_would_expose_the_same_names_are_refused_at_load(
    tmp_path: Path, tables: tuple[str, ...], names: tuple[str, ...]
) -> None:
    done = run_check(broker_config(tmp_path, *tables))
    assert done.returncode != 0
    assert "INVALID" in done.stdout, done.stdout + done.stderr
    assert all(repr(n) in done.stdout for n in names), done.stdout


def test_a_servers_file_entry_takes_a_prefix_too(tmp_path: Path) -> None:
    servers_file = tmp_path / "claude_desktop_config.json"
    entry = {"command": sys.executable, "args": [str(FIXTURE), "filed"], "prefix": "same_"}
    servers_file.write_text(json.dumps({"mcpServers": {"filed": entry}}), encoding="utf-8")
    head = f"mcp_servers_file = {str(servers_file)!r}\n"
    clash = broker_config(tmp_path, server_table("local", prefix="same_"))
    clash.write_text(head + clash.read_text(encoding="utf-8"), encoding="utf-8")
    done = run_check(clash)
    assert "INVALID" in done.stdout and "'filed'" in done.stdout and "'local'" in done.stdout
    alone = broker_config(tmp_path, server_table("local"))
    alone.write_text(head + alone.read_text(encoding="utf-8"), encoding="utf-8")
    done = run_check(alone, "--json")
    report = json.loads(done.stdout)
    assert report["ok"], report


async def test_plain_wire_calls_by_own_and_bare_names_take_the_stdio_short_path(
    tmp_path: Path,
) -> None:
    """``tools/call`` lines with only a name and arguments: what the stdio short path forwards."""
    config = broker_config(
        tmp_path, server_table("plain", prefix=""), server_table("one", "only_one")
    )
    async with stdio_broker(config, log=tmp_path / "broker.log") as host:
        with anyio.fail_after(30):
            while True:
                listed = await host.request("tools/list")
                names = {t["name"] for t in listed["result"]["tools"]}
                if {"echo", "one__only_one"} <= names:
                    break
                await anyio.sleep(0.2)
        for name, want in (("echo", "plain/echo:w"), ("only_one", "one/only_one:w")):
            request_id = host.fresh_id()
            await host.call(request_id, name, {"text": "w"})
            answer = await host.answer(request_id)
            assert answer["result"]["content"][0]["text"] == want, answer


async def test_a_profile_shows_the_resources_and_prompts_of_its_servers_whatever_their_names(
    tmp_path: Path,
) -> None:
    config = broker_config(
        tmp_path,
        server_table("plain", prefix=""),
        server_table("zed"),
        '\n[profiles.mine]\nservers = ["plain"]\n',
    )
    params = StdioServerParameters(
        command=BROKER,
        args=["serve", "--config", str(config), "--profile", "mine"],
        env=server_env(),
    )
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        await tool_names(session, "echo")
        uris = {str(r.uri) for r in (await session.list_resources()).resources}
        assert {"memo://notes", "ui://plain/view.html"} <= uris
        assert not any("zed" in uri for uri in uris), uris
        with pytest.raises(MCPError, match="profile 'mine'"):
            await session.read_resource("ui://zed/view.html")
        prompts = {p.name for p in (await session.list_prompts()).prompts}
        assert "greet" in prompts and "zed__greet" not in prompts
        with pytest.raises(MCPError, match="profile 'mine'"):
            await session.get_prompt("zed__greet")
