"""What a host's model pays and what it can reach: the default tool surface is the few tools a
model needs, within its token bound, every broker tool still answering by name; a request
context gives the best tools in full and names further candidates one line each, which the
model can fetch by name and call. Real downstream servers (mcp-server-time and a 200-tool
office server), the real model, through the MCP server as a host uses it."""

from __future__ import annotations

import json
import math
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
from mcp import Client, types

from contextcore.errors import ConfigError
from tests.gateway.gateway_env import VENV_BIN, executable
from tests.support.mcp_calls import call

OFFICE = Path(__file__).parent / "fixtures" / "office_tools.py"
OFF_TOPIC = "what's a good name for a cat?"
REPORT_TOOLS = ("create_document", "add_paragraph", "add_picture", "convert_to_pdf")
MODEL_SURFACE = {
    "build_request_context",
    "get_context_items",
    "call_tool",
    "run_code",
    "ui_request_context",
}


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One embedding cache for the module: the 202 tools are embedded once, not per test."""
    return tmp_path_factory.mktemp("reach-cache") / "embeddings.sqlite3"


def config_file(folder: Path, extra: str = "", cache: Path | None = None, search: str = "") -> Path:
    """``search``: lines added to the ``[search]`` table."""
    path = folder / "broker.toml"
    cached = f"embedding_cache = {json.dumps(str(cache))}\n" if cache else ""
    cached = f"[search]\n{cached}{search}" if cached or search else ""
    path.write_text(
        f"{extra}\n{cached}"
        "[gateway]\nstartup_budget = 60\n"
        "[servers.time]\n"
        f"command = {json.dumps(executable(VENV_BIN / 'mcp-server-time'))}\n"
        'include = "agent"\n'
        "[servers.office]\n"
        f"command = {json.dumps(sys.executable)}\n"
        f"args = [{json.dumps(str(OFFICE))}]\n"
        'include = "agent"\n'
        "max_tools = 200\n",
        encoding="utf-8",
    )
    return path


@asynccontextmanager
async def broker(
    folder: Path,
    extra: str = "",
    mode: Any = "auto",
    cache: Path | None = None,
    search: str = "",
) -> AsyncIterator[tuple[Runtime, Client]]:
    path = config_file(folder, extra, cache, search)
    config = load_config(path, environ={})
    if resolve_model_dir(config) is None:
        pytest.fail("embedding model not prepared; run scripts/setup.sh")
    built = build_runtime(config, path)
    with anyio.fail_after(240):
        async with built.gateway, Client(built.server, mode=mode) as client:
            await built.gateway.wait_ready()
            await anyio.to_thread.run_sync(built.parts.search.index)  # embed the tools once
            yield built, client


def tokens(tool: types.Tool) -> int:
    """What a model pays for a listed tool: its name, description and input schema."""
    shown = {"name": tool.name, "description": tool.description, "inputSchema": tool.input_schema}
    return math.ceil(len(json.dumps(shown)) / 4)


def candidates(text: str) -> list[tuple[str, str, str]]:
    """(name shown, server, tool) of each line of the text's "within reach" list."""
    _, found, rest = text.partition("## More tools within reach")
    assert found, text
    section = rest.split("\n## ", 1)[0]
    line = re.compile(r"^- (\S+) \(server ([^,]+), tool ([^)]+)\): \S", re.MULTILINE)
    return line.findall(section)


async def test_the_default_surface_is_what_a_model_needs_within_its_bound(
    tmp_path: Path, cache: Path
) -> None:
    # A handshake-era host: one connection, one session the model never has to manage.
    async with broker(tmp_path, mode="legacy", cache=cache) as (_, client):
        listed = {t.name: t for t in (await client.list_tools()).tools}
        own = {n: t for n, t in listed.items() if "__" not in n}
        assert set(own) == MODEL_SURFACE, sorted(own)
        assert sum(tokens(t) for t in own.values()) <= 1500
        # No session to manage: the connection's own session, named in the result.
        first = await call(client, "build_request_context", message="What time is it in Tokyo?")
        again = await call(client, "build_request_context", message="and in Oslo?")
        assert first["session_id"] == again["session_id"]
        assert f"in session {first['session_id']}" in first["text"]
        # Every broker tool still answers a script by its name.
        turns = await call(client, "list_turns", session_id=first["session_id"])
        assert len(turns["turns"]) == 2


async def test_a_2026_host_keeps_its_session_by_the_id_a_result_names(
    tmp_path: Path, cache: Path
) -> None:
    async with broker(tmp_path, cache=cache) as (_, client):
        first = await call(client, "build_request_context", message="What time is it in Tokyo?")
        sid = first["session_id"]
        assert f"in session {sid}" in first["text"]
        again = await call(client, "build_request_context", message="and in Oslo?", session_id=sid)
        assert again["session_id"] == sid
        assert len((await call(client, "list_turns", session_id=sid))["turns"]) == 2


async def test_tools_all_lists_every_tool_and_a_list_lists_those_named(
    tmp_path: Path, cache: Path
) -> None:
    async with broker(tmp_path, '[server]\ntools = "all"', cache=cache) as (_, client):
        names = {t.name for t in (await client.list_tools()).tools}
        assert {"create_session", "append_messages", "list_servers", "get_usage_stats"} <= names
        assert len([n for n in names if "__" not in n]) >= 24
    async with broker(
        tmp_path, '[server]\ntools = ["build_request_context", "list_servers"]', cache=cache
    ) as (
        _,
        client,
    ):
        names = {t.name for t in (await client.list_tools()).tools}
        assert names == {"build_request_context", "list_servers"}
    path = config_file(tmp_path, '[server]\ntools = ["build_request_context", "make_coffee"]')
    with pytest.raises(ConfigError, match="make_coffee"):
        build_runtime(load_config(path, environ={}), path)


async def test_a_plan_step_tool_past_the_full_entries_is_named_fetched_and_called(
    tmp_path: Path, cache: Path
) -> None:
    async with broker(tmp_path, cache=cache) as (_, client):
        built = await call(
            client,
            "build_request_context",
            message="Make a short report document with the current time in Tokyo, as a PDF",
            intents=[
                "get the current time in Tokyo",
                "write a document with a paragraph and a picture",
                "convert the document to PDF",
            ],
            top_n=1,
        )
        full = {(i["server"], i["name"]) for i in built["items"]}
        lines = candidates(built["text"])
        named = {(server, tool) for _, server, tool in lines}
        # Every tool the report needs is within reach, some past the full entries.
        needed = {("office", t) for t in REPORT_TOOLS}
        assert needed <= full | named, (full, lines)
        past = sorted(needed & named - full)
        assert past, (full, lines)
        assert {(c["server"], c["name"]) for c in built["candidates"]} == named
        # The 200-tool server holds nearly every tool, so its lines fill the budget past the
        # per-server cap; the other server keeps its place first.
        office = [n for n, (_, server, _) in enumerate(lines) if server == "office"]
        assert len(office) > 8
        assert ("time", "convert_time") in named | full, lines
        time_lines = [n for n, (_, server, _) in enumerate(lines) if server == "time"]
        assert all(n < office[8] for n in time_lines), lines
        tool = past[0][1]
        shown = next(name for name, _, t in lines if t == tool)
        entry = await call(client, "get_context_items", keys=[shown])
        assert entry["items"][0]["input_schema"]["properties"]["document_id"]
        result = await client.call_tool(
            "call_tool", {"server": "office", "tool": tool, "arguments": {"document_id": "d1"}}
        )
        assert not result.is_error and tool in result.content[0].text  # type: ignore[union-attr]
        direct = await client.call_tool(shown, {"document_id": "d2"})
        assert not direct.is_error and "d2" in direct.content[0].text  # type: ignore[union-attr]
        # The record says which tools were given in full and which were named.
        recorded = await call(
            client,
            "get_request_context",
            session_id=built["session_id"],
            request_id=built["request_id"],
        )
        assert recorded["candidates"] == built["candidates"]
        assert {c["via"] for c in recorded["candidates"]} <= {"server", "rank", "step"}


async def test_an_off_topic_message_selects_nothing_and_lists_no_candidates(
    tmp_path: Path, cache: Path
) -> None:
    async with broker(tmp_path, cache=cache) as (_, client):
        built = await call(client, "build_request_context", message=OFF_TOPIC)
        assert [i for i in built["items"] if i["include_mode"] == "agent"] == []
        assert built["candidates"] == []
        assert "More tools within reach" not in built["text"]


SMALL_TALK = ("thanks, that's all", "perfect, cheers", "good night", "hello")


async def test_small_talk_selects_nothing_while_a_greeting_with_a_request_still_selects(
    tmp_path: Path, cache: Path
) -> None:
    async with broker(tmp_path, cache=cache) as (_, client):
        for message in SMALL_TALK:
            built = await call(client, "build_request_context", message=message)
            agent = [i["name"] for i in built["items"] if i["include_mode"] == "agent"]
            assert (agent, built["candidates"]) == ([], []), message
        built = await call(
            client, "build_request_context", message="hi! what time is it in Tokyo right now?"
        )
        agent = [i["name"] for i in built["items"] if i["include_mode"] == "agent"]
        assert "get_current_time" in agent
        # A plan whose steps are small talk but one still selects for that one.
        built = await call(
            client,
            "build_request_context",
            message="thanks, that's all",
            intents=["say thanks", "convert the report to a PDF"],
        )
        assert "convert_to_pdf" in [i["name"] for i in built["items"]]


def test_a_candidate_is_one_line_with_what_it_does() -> None:
    from contextcore.reach import brief_description

    long = "Convert a document to a PDF file. It keeps fonts, pictures and tables as they are."
    assert brief_description(long, 90) == "Convert a document to a PDF file."
    assert brief_description("x " * 80, 20).endswith("…")
    assert len(brief_description("word " * 80, 40)) <= 40
