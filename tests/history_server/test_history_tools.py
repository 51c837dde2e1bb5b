"""Every history tool through the SDK's in-memory client, including bad input naming the
field at fault."""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from history_env import HistoryEnv, chat, tool_turn
from mcp import Client

from tests.support.mcp_calls import call, error
from tests.support.tool_names import HISTORY_TOOL_NAMES


async def new_session(client: Client) -> str:
    sid: str = (await call(client, "create_session"))["session_id"]
    return sid


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_the_history_tools_are_listed_with_schemas(env: HistoryEnv, mode: str) -> None:
    async with env.client(mode) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
    assert set(tools) >= HISTORY_TOOL_NAMES
    assert all(tools[n].output_schema for n in HISTORY_TOOL_NAMES)
    assert set(tools["get_history"].input_schema["properties"]) == {
        "session_id",
        "max_tokens",
        "preset",
        "filters",
    }


async def test_a_conversation_round_trips_through_the_tools(env: HistoryEnv) -> None:
    async with env.client() as client:
        sid = await new_session(client)
        appended = await call(
            client, "append_messages", session_id=sid, messages=chat(4) + tool_turn("c1")
        )
        assert appended["message_count"] == 6 and len(appended["ids"]) == 6
        window = await call(client, "get_history", session_id=sid, max_tokens=5000)
        assert [m["id"] for m in window["messages"]] == appended["ids"]
        assert window["report"]["messages_out"] == 6 and window["summary_update"] is None

        await call(
            client, "update_snapshot", session_id=sid, goal="fix bug", key_observations=["a"]
        )
        merged = await call(
            client,
            "update_snapshot",
            session_id=sid,
            current_phase="testing",
            key_observations=["b"],
        )
        assert merged["snapshot"] == {
            "goal": "fix bug",
            "completed_actions": [],
            "current_phase": "testing",
            "key_observations": ["a", "b"],
        }
        assert (await call(client, "get_snapshot", session_id=sid))["snapshot"] == merged[
            "snapshot"
        ]
        window = await call(client, "get_history", session_id=sid)
        assert window["snapshot_used"] and window["messages"][0]["role"] == "system"
        assert "Goal: fix bug" in window["messages"][0]["content"]

        groups = await call(
            client,
            "collapse_messages",
            session_id=sid,
            message_ids=appended["ids"][:2],
            name="opening",
        )
        assert groups["groups"][0]["message_ids"] == appended["ids"][:2]
        topic = await call(client, "get_history", session_id=sid, preset="topic")
        assert topic["report"]["collapsed"] == 2
        assert any('"collapsed_group"' in str(m["content"]) for m in topic["messages"])

        stats = await call(client, "get_context_stats", session_id=sid)
        assert stats["message_count"] == 6 and stats["has_snapshot"] and not stats["has_summary"]

        cleared = await call(client, "clear_history", session_id=sid)
        assert cleared["cleared"] and cleared["message_count"] == 6
        assert (await call(client, "get_history", session_id=sid))["messages"] == []


async def test_a_forced_summary_with_nothing_new_says_there_is_nothing_to_summarize(
    env: HistoryEnv,
) -> None:
    async with env.client() as client:
        sid = await new_session(client)
        await call(client, "append_messages", session_id=sid, messages=chat(8))
        assert (await call(client, "summarize_history", session_id=sid, force=True))["updated"]
        with anyio.fail_after(10):
            again = await client.call_tool("summarize_history", {"session_id": sid, "force": True})
            not_due = await client.call_tool("summarize_history", {"session_id": sid})
    assert again.structured_content is not None and not again.structured_content["updated"]
    text = again.content[0].text  # type: ignore[union-attr]
    assert text.startswith("Nothing to summarize") and "force=true" not in text
    assert not_due.content[0].text.startswith("No summary due yet")  # type: ignore[union-attr]


async def test_summaries_through_the_tools_report_their_provider(env: HistoryEnv) -> None:
    async with env.client() as client:
        sid = await new_session(client)
        await call(client, "append_messages", session_id=sid, messages=chat(8))
        not_due = await call(client, "summarize_history", session_id=sid)
        assert not not_due["updated"] and not_due["reason"] is None
        forced = await call(client, "summarize_history", session_id=sid, force=True)
        assert forced["updated"] and forced["reason"] == "forced"
        assert forced["provider"] == "extractive" and forced["summary"]["covered"] == 2
        await call(client, "append_messages", session_id=sid, messages=chat(12, start=8))
        window = await call(client, "get_history", session_id=sid)
        assert window["summary_update"]["reason"] == "threshold"
        assert window["summary_used"] and window["summary"]["covered"] == 14

        stateless = await call(
            client, "summarize_history", messages=chat(3), previous_summary="we chose sqlite"
        )
        assert stateless["session_id"] is None and "sqlite" in stateless["summary"]["text"]


async def test_trim_messages_needs_no_session_and_repairs_tool_chains(env: HistoryEnv) -> None:
    async with env.client() as client:
        orphan = {"role": "tool", "tool_call_id": "zz", "content": "late"}
        out = await call(
            client,
            "trim_messages",
            messages=[*chat(2), orphan, *tool_turn("c1")[:1]],
            filters=[{"name": "sizeLimiter", "options": {"maxTokens": 4000}}],
        )
        assert out["report"]["orphans_converted"] == 1 and out["report"]["backfilled"] == 1
        roles = [m["role"] for m in out["messages"]]
        assert roles == ["user", "assistant", "system", "assistant", "tool"]


BAD_INPUTS: list[tuple[str, dict[str, Any], str]] = [
    (
        "append_messages",
        {"messages": [{"role": "user", "content": "a"}, {"role": "robot"}]},
        "messages[3].role",
    ),  # counted in the session, which already holds 2
    ("append_messages", {"messages": "hello"}, "messages"),
    ("append_messages", {"messages": [], "extra": 1}, "extra"),
    ("get_history", {"filters": ["sizeLimiter", "noSuchFilter"]}, "filters[1]"),
    (
        "get_history",
        {"filters": [{"name": "sizeLimiter", "options": {"maxTokns": 5}}]},
        "filters[0].options.maxTokns",
    ),
    ("get_history", {"preset": "nope"}, "preset"),
    ("get_history", {"max_tokens": 0}, "max_tokens"),
    ("collapse_messages", {"message_ids": ["nope"], "name": "g"}, "message_ids"),
    ("collapse_messages", {"message_ids": [], "name": "g"}, "message_ids"),
    ("update_snapshot", {"completed_actions": "done"}, "completed_actions"),
    ("get_snapshot", {"session_id": "s_unknown"}, "session_id"),
    ("get_context_stats", {"session_id": "s_" + "a" * 32}, "session_id"),
    ("clear_history", {"session_id": 7}, "session_id"),
]


@pytest.mark.parametrize(("tool", "arguments", "field"), BAD_INPUTS)
async def test_bad_input_is_a_tool_error_naming_the_field(
    env: HistoryEnv, tool: str, arguments: dict[str, Any], field: str
) -> None:
    async with env.client() as client:
        sid = await new_session(client)
        await call(client, "append_messages", session_id=sid, messages=chat(2))
        text = await error(client, tool, **{"session_id": sid, **arguments})
    assert field in text


async def test_trim_and_summarize_refuse_bad_combinations(env: HistoryEnv) -> None:
    async with env.client() as client:
        sid = await new_session(client)
        assert "session_id" in await error(client, "summarize_history")
        text = await error(client, "summarize_history", session_id=sid, messages=chat(1))
        assert "session_id" in text
        text = await error(client, "summarize_history", session_id=sid, previous_summary="x")
        assert "previous_summary" in text
        text = await error(
            client, "trim_messages", messages=chat(1), preset="topic", filters=["sizeLimiter"]
        )
        assert "filters" in text
        text = await error(client, "trim_messages", messages=[{"role": "user", "content": 5}])
        assert "messages[0].content" in text
