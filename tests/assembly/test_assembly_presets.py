"""assemble_context with the built-in models: the complete input in the preset's order, the
report accounting for every message and token, and the same recorded turn as
build_request_context."""

from __future__ import annotations

from typing import Any

from assembly_env import AssemblyEnv, chat, new_session, tool_turn

from contextcore.assembly_model import DEFAULT_INTRO
from contextcore.config import HistoryConfig
from contextcore.history import message_tokens
from tests.support.mcp_calls import call, error


def kinds(out: dict[str, Any]) -> list[str]:
    return [c["kind"] for c in out["report"]["components"]]


async def test_the_tool_is_listed_with_its_arguments(env: AssemblyEnv) -> None:
    async with env.client() as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
    tool = tools["assemble_context"]
    assert set(tool.input_schema["properties"]) == {"session_id", "message", "model", "preset"}
    assert tool.input_schema["required"] == ["session_id", "message"]
    assert tool.output_schema is not None


async def test_the_default_preset_assembles_every_part_in_order(env: AssemblyEnv) -> None:
    async with env.client() as client:
        sid = await new_session(client, ("reference", "schema", None))
        await call(client, "append_messages", session_id=sid, messages=chat(4) + tool_turn("c1"))
        await call(client, "update_snapshot", session_id=sid, goal="ship orders API")
        out = await call(client, "assemble_context", session_id=sid, message="How do I list?")
    messages = out["messages"]
    assert kinds(out) == [
        "intro",
        "rules",
        "references",
        "summary",
        "snapshot",
        "history",
        "message",
    ]
    assert messages[0] == {"role": "system", "content": DEFAULT_INTRO}
    assert messages[1]["content"].startswith("## Rules\n\n### 005 tone — always\nHow to talk")
    assert messages[1]["content"].index("tone") < messages[1]["content"].index("commits")
    assert "### 000 schema — manual\nDatabase schema\norders(id, status)" in messages[2]["content"]
    assert messages[3]["role"] == "system" and "Goal: ship orders API" in messages[3]["content"]
    assert [m["role"] for m in messages[4:10]] == ["user", "assistant"] * 2 + [
        "assistant",
        "tool",
    ]
    assert messages[-1] == {"role": "user", "content": "How do I list?"}
    assert out["report"]["model"] == "default" and out["report"]["warnings"] == []


async def test_the_report_accounts_for_every_message_and_token(env: AssemblyEnv) -> None:
    async with env.client() as client:
        sid = await new_session(client)
        await call(client, "append_messages", session_id=sid, messages=chat(6))
        out = await call(client, "assemble_context", session_id=sid, message="next?")
    report, messages = out["report"], out["messages"]
    positions = [i for c in report["components"] for i in c["messages"]]
    assert positions == list(range(len(messages)))
    for row in report["components"]:
        assert row["tokens"] == sum(message_tokens(messages[i]) for i in row["messages"])
    assert report["total_tokens"] == sum(c["tokens"] for c in report["components"])
    assert report["total_tokens"] == report["filters"]["tokens_after"]
    summary, snapshot = report["components"][3], report["components"][4]
    assert summary == {"path": "components[2]", "kind": "summary", "messages": [], "tokens": 0}
    assert snapshot["messages"] == [] and snapshot["tokens"] == 0
    assert report["filters"]["steps"][-1]["name"] == "toolCallBackfill"


async def test_the_recorded_turn_is_what_get_request_context_returns(env: AssemblyEnv) -> None:
    async with env.client() as client:
        sid = await new_session(client, ("tool", "get_current_time", "time"))
        out = await call(client, "assemble_context", session_id=sid, message="What time is it?")
        recorded = await call(
            client, "get_request_context", session_id=sid, request_id=out["request_id"]
        )
        turns = (await call(client, "list_turns", session_id=sid))["turns"]
        built = await call(client, "build_request_context", session_id=sid, message="again")
    assert [t["request_id"] for t in turns] == [out["request_id"]]
    assert recorded["message"] == "What time is it?"
    assert recorded["items"] == built["items"]  # the same selection as build_request_context
    names = {(i["type"], i["name"]) for i in recorded["items"]}
    assert names == {
        ("rule", "tone"),
        ("rule", "commits"),
        ("reference", "api"),
        ("tool", "get_current_time"),
    }
    # the assembled rules and references are exactly the recorded ones
    assert out["messages"][1:3] == recorded["messages"][::-1][1:3]


async def test_the_topic_preset_runs_the_topic_filters(env: AssemblyEnv) -> None:
    async with env.client() as client:
        sid = await new_session(client)
        appended = await call(client, "append_messages", session_id=sid, messages=chat(6))
        await call(
            client,
            "collapse_messages",
            session_id=sid,
            message_ids=appended["ids"][:3],
            name="setup",
        )
        out = await call(client, "assemble_context", session_id=sid, message="go", preset="topic")
    steps = [s["name"] for s in out["report"]["filters"]["steps"]]
    assert steps == [
        "collapseGroupReplacer",
        "fileContentsLimiter",
        "sizeLimiter",
        "toolCallBackfill",
    ]
    assert out["report"]["model"] == "topic"
    history = next(c for c in out["report"]["components"] if c["kind"] == "history")
    assert len(history["messages"]) == 4  # one placeholder and three messages
    assert '"collapsed_group"' in out["messages"][history["messages"][0]]["content"]


async def test_unknown_presets_and_sessions_are_errors_naming_the_field(
    env: AssemblyEnv,
) -> None:
    async with env.client() as client:
        sid = await new_session(client)
        text = await error(client, "assemble_context", session_id=sid, message="x", preset="nope")
        assert "preset: unknown assembly preset 'nope'" in text and "default, topic" in text
        text = await error(client, "assemble_context", session_id="s_unknown", message="x")
        assert "session_id" in text
        turns = (await call(client, "list_turns", session_id=sid))["turns"]
    assert turns == []


async def test_a_summary_is_made_when_due_and_leads_the_window(make_env: Any) -> None:
    env = make_env(history=HistoryConfig(summarize_after=4, keep_recent=2))
    async with env.client() as client:
        sid = await new_session(client)
        await call(client, "append_messages", session_id=sid, messages=chat(8))
        out = await call(client, "assemble_context", session_id=sid, message="continue")
    rows = {c["kind"]: c for c in out["report"]["components"]}
    summary = [out["messages"][i] for i in rows["summary"]["messages"]]
    assert summary[0]["role"] == "user"
    assert summary[0]["content"].startswith("[Earlier conversation summary:")
    assert summary[1]["role"] == "assistant"
    assert out["report"]["window_start"] == 6 and len(rows["history"]["messages"]) == 2


async def test_a_cleared_history_contributes_nothing(env: AssemblyEnv) -> None:
    async with env.client() as client:
        sid = await new_session(client)
        await call(client, "append_messages", session_id=sid, messages=chat(4))
        await call(client, "clear_history", session_id=sid)
        out = await call(client, "assemble_context", session_id=sid, message="fresh start")
    history = next(c for c in out["report"]["components"] if c["kind"] == "history")
    assert history["messages"] == [] and out["report"]["window_start"] == 4
    assert out["messages"][-1]["content"] == "fresh start"
