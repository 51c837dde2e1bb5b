"""What a model pays over a conversation: each tool given in full once per conversation (the
conversation is the one whose ``session_id`` a call passes back), no tool described that the
host's tool list already carries, every tool of a small catalog within reach, a one-server
catalog's candidates filling their budget, and app-only tools kept from the model. Real
downstream servers, the real model, through the MCP server as a host uses it."""

from __future__ import annotations

import json
import re
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from context_broker.server.embedding import resolve_model_dir
from context_broker.server.runtime import Runtime, build_runtime
from context_broker.server.settings import load_config
from mcp import Client

from contextcore.context_text import estimate_tokens
from tests.gateway.gateway_env import FIXTURES, ROOT, VENV_BIN, executable, tool_error
from tests.support.mcp_calls import call

REFERENCE_TOOLS = ROOT / "benchmarks" / "data" / "reference_tools.json"
TIME = f"[servers.time]\ncommand = {json.dumps(executable(VENV_BIN / 'mcp-server-time'))}\n"
OFFICE = (
    f"[servers.office]\ncommand = {json.dumps(sys.executable)}\n"
    f"args = [{json.dumps(str(FIXTURES / 'office_tools.py'))}]\n"
    'include = "agent"\nmax_tools = 200\n'
)
REPORT = "Make a short report document with the current time in Tokyo, as a PDF"
STEPS = ["get the current time", "write a document with a paragraph", "convert it to PDF"]


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One embedding cache for the module: each catalog is embedded once."""
    return tmp_path_factory.mktemp("cost-cache") / "embeddings.sqlite3"


@asynccontextmanager
async def broker(
    folder: Path,
    servers: str,
    cache: Path,
    extra: str = "",
    mode: Any = "legacy",
    search: str = "",
) -> AsyncIterator[tuple[Runtime, Client]]:
    """A broker of ``servers`` (TOML tables) and one host connection to it (handshake era
    by default: one connection, as a desktop host keeps); ``search``: ``[search]`` lines."""
    path = folder / "broker.toml"
    path.write_text(
        f"{extra}\n[search]\nembedding_cache = {json.dumps(str(cache))}\n{search}"
        f"[gateway]\nstartup_budget = 60\n{servers}",
        encoding="utf-8",
    )
    config = load_config(path, environ={})
    if resolve_model_dir(config) is None:
        pytest.fail("embedding model not prepared; run scripts/setup.sh")
    built = build_runtime(config, path)
    with anyio.fail_after(240):
        async with built.gateway, Client(built.server, mode=mode) as client:
            await built.gateway.wait_ready()
            await anyio.to_thread.run_sync(built.parts.search.index)
            yield built, client


def full_entries(text: str) -> set[str]:
    """The tools a text gives in full: its ``### <name> (server S, tool T)`` headings."""
    return set(re.findall(r"^### (\S+) \(server ", text, re.MULTILINE))


def reference_catalog(folder: Path) -> Path:
    """The five reference servers' tools (time, git, everything, filesystem, memory) as a
    catalog file whose servers are ``agent``."""
    listed = json.loads(REFERENCE_TOOLS.read_text(encoding="utf-8"))
    servers = {
        server: {
            "include": "agent",
            "tools": [
                {
                    "name": t["name"],
                    "description": t["description"],
                    "inputSchema": t["input_schema"],
                }
                for t in tools
            ],
        }
        for server, tools in listed.items()
    }
    path = folder / "reference.json"
    path.write_text(json.dumps({"servers": servers}), encoding="utf-8")
    return path


async def test_each_conversation_on_one_connection_gets_each_tool_in_full_once(
    tmp_path: Path, cache: Path
) -> None:
    async with broker(tmp_path, TIME + 'include = "agent"\n', cache) as (_, client):
        first = await call(client, "build_request_context", message="What time is it in Tokyo?")
        given = full_entries(first["text"])
        assert "time__get_current_time" in given, first["text"]
        sid = first["session_id"]
        follow = await call(
            client, "build_request_context", message="And in Lisbon?", session_id=sid
        )
        assert not full_entries(follow["text"]), follow["text"]
        assert "Given earlier in this conversation" in follow["text"]
        assert all(f"`{name}`" in follow["text"] for name in given), follow["text"]
        assert estimate_tokens(follow["text"]) <= 150, follow["text"]
        # A second conversation on the same connection starts without the id: in full again.
        other = await call(client, "build_request_context", message="What's the time in Oslo?")
        assert other["session_id"] == sid  # the connection's session, as desktop hosts get
        assert "time__get_current_time" in full_entries(other["text"]), other["text"]
        again = await call(client, "build_request_context", message="and in Paris?", session_id=sid)
        assert not full_entries(again["text"]), again["text"]
        # Leaving the id out (a host that compacted its history) gets the full text again.
        fresh = await call(client, "build_request_context", message="and in Rome?")
        assert "time__get_current_time" in full_entries(fresh["text"]), fresh["text"]
        # The record says what the text named as given earlier.
        turn = await call(
            client, "get_request_context", session_id=sid, request_id=follow["request_id"]
        )
        assert turn["text"] == follow["text"]


async def test_a_tool_the_host_relisted_and_an_always_tool_are_named_not_described(
    tmp_path: Path, cache: Path
) -> None:
    servers = (
        TIME
        + 'include = "agent"\n'
        + (
            f"[servers.app]\ncommand = {json.dumps(sys.executable)}\n"
            f"args = [{json.dumps(str(FIXTURES / 'app_server.py'))}, 'app']\n"
            'include = "always"\n'
        )
    )
    extra = "[server]\nrelist_selected = true\n"
    async with broker(tmp_path, servers, cache, extra) as (_, client):
        first = await call(client, "build_request_context", message="What time is it in Tokyo?")
        assert "time__get_current_time" in full_entries(first["text"]), first["text"]
        assert not {n for n in full_entries(first["text"]) if n.startswith("app__")}
        assert "Already in your tool list:" in first["text"] and "`app__echo`" in first["text"]
        listed = {t.name for t in (await client.list_tools()).tools}
        assert "time__get_current_time" in listed  # the host re-listed the selected tools
        second = await call(client, "build_request_context", message="What time is it in Oslo?")
        assert not {n for n in full_entries(second["text"]) if n.startswith("time__")}, second[
            "text"
        ]
        assert "`time__get_current_time`" in second["text"]


async def test_remember_reaches_a_memory_tool_on_the_reference_servers(
    tmp_path: Path, cache: Path
) -> None:
    catalog = reference_catalog(tmp_path)
    extra = f"[sources]\ncatalog_files = [{json.dumps(str(catalog))}]\n"
    async with broker(tmp_path, "", cache, extra) as (_, client):
        built = await call(
            client, "build_request_context", message="Remember that Anna works on the billing team"
        )
        memory = re.search(r"^- server memory: (.*)$", built["text"], re.MULTILINE)
        assert memory is not None or "(server memory, tool " in built["text"], built["text"]
        named = set(memory.group(1).split(", ")) if memory else set()
        assert named & {"create_entities", "add_observations"} or re.search(
            r"server memory, tool (create_entities|add_observations)", built["text"]
        ), built["text"]
        # Its schema is one call away by the name the directory gives.
        entry = await call(client, "get_context_items", keys=["memory/create_entities"])
        assert entry["items"][0]["input_schema"]["properties"]["entities"]


def candidate_servers(built: dict[str, Any]) -> list[str]:
    return [c["server"] for c in built["candidates"]]


async def test_a_one_server_catalog_fills_the_candidate_budget(tmp_path: Path, cache: Path) -> None:
    async with broker(tmp_path, OFFICE, cache) as (runtime, client):
        built = await call(client, "build_request_context", message=REPORT, intents=STEPS)
        servers = candidate_servers(built)
        assert len(servers) > 8 and set(servers) == {"office"}, built["text"]
        lines = built["text"].partition("## More tools within reach")[2]
        budget = runtime.parts.search.settings.reach.tokens
        assert estimate_tokens(lines) > budget // 2, built["text"]


async def test_a_many_server_catalog_with_a_200_tool_server_names_several_servers(
    tmp_path: Path, cache: Path
) -> None:
    catalog = reference_catalog(tmp_path)
    extra = f"[sources]\ncatalog_files = [{json.dumps(str(catalog))}]\n"
    async with broker(tmp_path, OFFICE, cache, extra) as (_, client):
        built = await call(client, "build_request_context", message=REPORT, intents=STEPS)
        servers = candidate_servers(built)
        assert servers.count("office") <= 8, built["text"]
        assert len(set(servers)) >= 2, built["text"]


async def test_an_app_only_tool_stays_with_its_app(tmp_path: Path, cache: Path) -> None:
    servers = (
        f"[servers.board]\ncommand = {json.dumps(sys.executable)}\n"
        f"args = [{json.dumps(str(FIXTURES / 'app_only_server.py'))}]\n"
        'include = "agent"\n'
    )
    async with broker(tmp_path, servers, cache, mode="auto") as (_, client):
        message = "Refresh the board's private view cache"
        built = await call(client, "build_request_context", message=message)
        assert "refresh_view" not in built["text"], built["text"]
        assert "refresh_board" in built["text"], built["text"]  # its model-visible sibling
        assert all(c["name"] != "refresh_view" for c in built["candidates"])
        found = await call(client, "search_context_items", query=message)
        assert all(i["name"] != "refresh_view" for i in found["items"]), found
        fetched = await client.call_tool("get_context_items", {"keys": ["board/refresh_view"]})
        assert fetched.is_error
        refused = await client.call_tool(
            "call_tool", {"server": "board", "tool": "refresh_view", "arguments": {}}
        )
        assert refused.is_error and "MCP App alone" in tool_error(refused)
        direct = await client.call_tool("board__refresh_view", {})
        assert not direct.is_error and "refreshed the view" in str(direct.content[0])


async def test_a_direct_call_with_bad_arguments_reaches_nothing(
    tmp_path: Path, cache: Path
) -> None:
    async with broker(tmp_path, TIME + 'include = "always"\n', cache) as (_, client):
        bad = await client.call_tool("time__get_current_time", {"timezone": 42})
        # The broker's own check answered: the server never saw the call.
        assert tool_error(bad).startswith("time__get_current_time: "), tool_error(bad)
        assert "timezone" in tool_error(bad) and "Traceback" not in tool_error(bad)


async def test_a_turn_that_selected_nothing_is_never_named_as_where_a_tool_came_from(
    tmp_path: Path, cache: Path
) -> None:
    servers = TIME + 'include = "agent"\n'
    turns = "conversation_turns = 1\n"
    async with broker(tmp_path, servers, cache, search=turns) as (_, client):
        first = await call(client, "build_request_context", message="What time is it in Sydney?")
        sid = first["session_id"]
        called = await client.call_tool(
            "call_tool",
            {
                "server": "time",
                "tool": "get_current_time",
                "arguments": {"timezone": "Australia/Sydney"},
                "session_id": sid,
            },
        )
        assert not called.is_error
        # Small talk, judged alone (conversation=0), selects nothing.
        chat = await call(
            client, "build_request_context", message="thanks, that's all", conversation=0.0
        )
        assert not [i for i in chat["items"] if i["include_mode"] == "agent"], chat["text"]
        follow = await call(client, "build_request_context", message="and in Oslo?")
        carried = [i for i in follow["items"] if i.get("via") == "conversation"]
        assert carried, follow["text"]  # the call made after the first turn carried it
        assert chat["request_id"] not in follow["text"], follow["text"]
        assert chat["request_id"] not in follow["context_turns"]
        assert all(i.get("turn") != chat["request_id"] for i in carried)
