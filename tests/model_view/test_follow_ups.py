"""Follow-ups chosen with the conversation: a scripted host that calls build_request_context
each turn (and the tools it is shown, through call_tool with its session) drives the broker
over stdio in front of the real downstream servers with the real embedding model."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from tests.model_view.test_scripted_host import five_servers, host, new_session, write_config

pytestmark = pytest.mark.model

TIME_TOOLS = {"tool:time/get_current_time", "tool:time/convert_time"}


async def build(client: Client, sid: str, message: str, **options: Any) -> dict[str, Any]:
    with anyio.fail_after(60):
        result = await client.call_tool(
            "build_request_context", {"session_id": sid, "message": message, **options}
        )
    assert not result.is_error, result.content
    out = result.structured_content
    assert out is not None
    return out


def agent_keys(out: dict[str, Any]) -> set[str]:
    return {
        f"tool:{i['server']}/{i['name']}" if i["type"] == "tool" else f"{i['type']}:{i['name']}"
        for i in out["items"]
        if i["include_mode"] == "agent"
    }


def carried(out: dict[str, Any]) -> list[dict[str, Any]]:
    return [i for i in out["items"] if i.get("via") == "conversation"]


async def call(client: Client, sid: str, server: str, tool: str, **arguments: Any) -> str:
    with anyio.fail_after(60):
        result = await client.call_tool(
            "call_tool",
            {"server": server, "tool": tool, "arguments": arguments, "session_id": sid},
        )
    assert not result.is_error, result.content
    return "".join(getattr(b, "text", "") for b in result.content)


async def test_follow_ups_select_what_the_earlier_turn_was_about_and_name_that_turn(
    tmp_path: Path,
) -> None:
    config = write_config(tmp_path, five_servers(tmp_path))
    with anyio.fail_after(240):
        async with host(config) as client:
            sid = await new_session(client)
            first = await build(client, sid, "What time is it in Sydney?")
            assert agent_keys(first) & TIME_TOOLS
            await call(client, sid, "time", "get_current_time", timezone="Australia/Sydney")

            alone = await build(client, await new_session(client), "and in Oslo?")
            assert not agent_keys(alone) & TIME_TOOLS  # the message alone says too little

            follow = await build(client, sid, "and in Oslo?")
            assert agent_keys(follow) & TIME_TOOLS
            assert follow["context_turns"] == [first["request_id"]]
            assert {i["turn"] for i in carried(follow)} == {first["request_id"]}
            # The first text gave the time tool in full, so this one names it in one line.
            given = next(
                line
                for line in follow["text"].splitlines()
                if line.startswith("Given earlier in this conversation")
            )
            assert "`time__get_current_time`" in given, follow["text"]

            recorded = await client.call_tool(
                "get_request_context", {"session_id": sid, "request_id": follow["request_id"]}
            )
            text = "".join(getattr(b, "text", "") for b in recorded.content)
            assert given in text

            switch = await build(client, sid, "ok, new thing: list what is in the downloads folder")
            assert not agent_keys(switch) & TIME_TOOLS
            assert switch["context_turns"] == [] and not carried(switch)
            assert "tool:filesystem/list_directory" in agent_keys(switch)


async def test_with_the_conversation_at_zero_a_follow_up_selects_as_in_a_fresh_session(
    tmp_path: Path,
) -> None:
    config = write_config(tmp_path, five_servers(tmp_path))
    with anyio.fail_after(240):
        async with host(config) as client:
            sid = await new_session(client)
            await build(client, sid, "What time is it in Sydney?")
            for message in ("and in Oslo?", "same for Tokyo please", "now convert that to UTC"):
                fresh = await build(client, await new_session(client), message)
                off = await build(client, sid, message, conversation=0)
                assert agent_keys(off) == agent_keys(fresh)
                assert [i["similarity_score"] for i in off["items"]] == [
                    i["similarity_score"] for i in fresh["items"]
                ]
                assert off["context_turns"] == [] and not carried(off)

            # A session created with the conservative preset is not led by its past.
            quiet = await client.call_tool("create_session", {"preset": "conservative"})
            qid = quiet.structured_content["session_id"]  # type: ignore[index]
            await build(client, qid, "What time is it in Sydney?")
            follow = await build(client, qid, "and in Oslo?")
            assert follow["context_turns"] == [] and not carried(follow)


async def test_a_host_that_sends_its_own_history_gets_the_same_follow_up(
    tmp_path: Path,
) -> None:
    config = write_config(tmp_path, five_servers(tmp_path))
    with anyio.fail_after(240):
        async with host(config) as client:
            sid = await new_session(client)
            history = [
                {"role": "user", "content": "What time is it in Sydney?"},
                {"role": "assistant", "content": "It is 9:00 in Sydney (Australia/Sydney)."},
                {"role": "user", "content": "and in Oslo?"},
            ]
            with anyio.fail_after(60):
                appended = await client.call_tool(
                    "append_messages", {"session_id": sid, "messages": history}
                )
            assert not appended.is_error, appended.content
            follow = await build(client, sid, "and in Oslo?")
            assert agent_keys(follow) & TIME_TOOLS
            assert carried(follow) and follow["context_turns"] == []  # no turns, the history
