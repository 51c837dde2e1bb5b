"""Size limits on stored fields and on tool results: an oversized write is refused before
anything is stored, with the limit's config key named; a result over the cap arrives cut to
fit, saying what was cut; over real HTTP, a session filled to the limits still reads."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
from mcp import Client

from contextcore.config import LimitsConfig
from tests.support.broker_procs import running_broker, write_config
from tests.support.mcp_calls import call, error

ONE_MIB = 1024 * 1024


def _wire_bytes(result: Any) -> int:
    return len(result.model_dump_json(by_alias=True, exclude_none=True).encode())


async def _session(client: Client) -> str:
    sid: str = (await call(client, "create_session"))["session_id"]
    return sid


async def test_an_oversized_snapshot_field_is_refused_and_the_old_snapshot_stays(
    history_client: Callable[..., Client],
) -> None:
    async with history_client() as client:
        sid = await _session(client)
        await call(client, "update_snapshot", session_id=sid, goal="ship", completed_actions=["a"])
        huge = [f"{i:02}" + "x" * 99_998 for i in range(12)]
        text = await error(client, "update_snapshot", session_id=sid, completed_actions=huge)
        after = await call(client, "get_snapshot", session_id=sid)
    assert "completed_actions of 1,200,001 characters exceeds" in text
    assert "limits.max_snapshot_field_chars (50000)" in text
    assert after["snapshot"]["completed_actions"] == ["a"] and after["snapshot"]["goal"] == "ship"


async def test_oversized_messages_are_refused_one_by_one_and_per_call_and_nothing_is_stored(
    history_client: Callable[..., Client],
) -> None:
    limits = LimitsConfig(max_history_message_chars=2_000, max_append_chars=5_000)
    async with history_client(limits) as client:
        sid = await _session(client)
        await call(client, "append_messages", session_id=sid, messages=[_user("hello")])
        one = await error(
            client,
            "append_messages",
            session_id=sid,
            messages=[_user("fine"), _user("y" * 3_000)],
        )
        many = await error(
            client, "append_messages", session_id=sid, messages=[_user("z" * 1_500)] * 4
        )
        stats = await call(client, "get_context_stats", session_id=sid)
    assert "messages[2] of 3," in one and "limits.max_history_message_chars (2000)" in one
    assert "limits.max_append_chars (5000)" in many and "several smaller calls" in many
    assert stats["message_count"] == 1


async def test_long_labels_and_previous_summaries_are_refused_naming_the_limit(
    history_client: Callable[..., Client],
) -> None:
    async with history_client() as client:
        sid = await _session(client)
        ids = (await call(client, "append_messages", session_id=sid, messages=[_user("a")]))["ids"]
        name = await error(
            client, "collapse_messages", session_id=sid, message_ids=ids, name="n" * 5_000
        )
        summary = await error(
            client, "summarize_history", messages=[_user("a")], previous_summary="s" * 30_000
        )
        agent = await error(client, "create_session", agent="a" * 5_000)
        groups = await call(
            client, "collapse_messages", session_id=sid, message_ids=ids * 3, name="g"
        )
    assert "limits.max_label_chars (1000)" in name
    assert "limits.max_summary_chars (20000)" in summary
    assert "agent" in agent and "1000 characters" in agent
    assert groups["groups"][0]["message_ids"] == ids


async def test_a_result_over_the_cap_arrives_under_it_with_a_note_on_what_was_cut(
    history_client: Callable[..., Client],
) -> None:
    limits = LimitsConfig(max_result_bytes=16 * 1024)
    messages = [_user(f"message {i}: " + "w" * 4_000) for i in range(20)]
    async with history_client(limits) as client:
        sid = await _session(client)
        await call(client, "append_messages", session_id=sid, messages=messages)
        with anyio.fail_after(10):
            result = await client.call_tool(
                "get_history", {"session_id": sid, "max_tokens": 1_000_000}
            )
    assert not result.is_error
    assert _wire_bytes(result) <= 16 * 1024
    note = result.content[-1].text  # type: ignore[union-attr]
    assert "limits.max_result_bytes (16384)" in note and "max_tokens" in note
    window = result.structured_content
    assert window is not None and window["session_id"] == sid
    cut = [m["content"] for m in window["messages"] if m["content"].startswith("message ")]
    assert cut and all(c.endswith("characters cut]") for c in cut)


def _user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


async def test_a_session_filled_to_the_limits_still_reads_over_http(tmp_path: Path) -> None:
    limits = LimitsConfig()
    field = limits.max_snapshot_field_chars
    message = limits.max_history_message_chars - 100
    async with running_broker(write_config(tmp_path)) as (url, _):
        with anyio.fail_after(120):
            async with Client(f"{url}/mcp") as client:
                sid = await _session(client)
                await call(
                    client,
                    "update_snapshot",
                    session_id=sid,
                    goal="g" * field,
                    current_phase="p" * field,
                    completed_actions=[f"{i:04}" + "c" * 996 for i in range(50)],
                    key_observations=[f"{i:04}" + "k" * 996 for i in range(50)],
                )
                per_call = limits.max_append_chars // message
                for _ in range(3):
                    batch = [_user("m" * message) for _ in range(per_call)]
                    await call(client, "append_messages", session_id=sid, messages=batch)
                await call(
                    client,
                    "append_messages",
                    session_id=sid,
                    messages=[_user(f"short {i}") for i in range(12)],
                )
                refused = await error(
                    client, "update_snapshot", session_id=sid, key_observations=["more"]
                )
                reads = {
                    "get_snapshot": {"session_id": sid},
                    "get_history": {"session_id": sid, "max_tokens": 10_000_000},
                    "assemble_context": {"session_id": sid, "message": "what next?"},
                    "get_context_stats": {"session_id": sid},
                }
                results = {name: await client.call_tool(name, args) for name, args in reads.items()}
    assert "limits.max_snapshot_field_chars" in refused
    for name, result in results.items():
        assert not result.is_error, (name, result.content)
        assert _wire_bytes(result) < ONE_MIB, (name, _wire_bytes(result))
    snapshot = results["get_snapshot"].structured_content
    assert snapshot is not None and len(snapshot["snapshot"]["goal"]) == field
    assert json.dumps(results["get_context_stats"].structured_content)
