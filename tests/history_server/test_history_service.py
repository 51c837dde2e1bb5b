"""The history service on the broker's sessions: every change saved when the call returns,
automatic summaries on get_history, failed or raced summaries never clobbering state."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
from context_broker.server.parts import build_parts
from context_broker.server.settings import AppConfig
from context_broker.server.stores.sqlite import SqliteSessionStore
from history_env import HistoryEnv, chat, tool_turn

from contextcore.config import HistoryConfig
from contextcore.errors import HistoryError, SessionError
from contextcore.history import SummarizerChain
from contextcore.services.history import HistoryService
from tests.support.hash_embedder import HashEmbedder


class Failing:
    def summarize(
        self, messages: Sequence[Mapping[str, Any]], previous: str | None, max_tokens: int
    ) -> str:
        raise RuntimeError("provider down")


def test_appended_messages_get_ids_and_are_stored_with_the_session(env: HistoryEnv) -> None:
    sid = env.broker.create_session().session_id
    result = env.service.append_messages(sid, [{"role": "user", "content": "hi", "id": "m1"}])
    more = env.service.append_messages(sid, [{"role": "assistant", "content": "hello"}])
    assert result.ids == ("m1",) and len(more.ids) == 1 and more.ids[0] != "m1"
    assert [m.id for m in env.broker.store.messages(sid)] == ["m1", more.ids[0]]


def test_get_history_summarizes_once_the_policy_says_so(env: HistoryEnv) -> None:
    sid = env.broker.create_session().session_id
    env.service.append_messages(sid, chat(10))
    first = env.service.get_history(sid)
    assert first.summary_update is None and not first.window.summary_used
    env.service.append_messages(sid, chat(2, start=10))
    second = env.service.get_history(sid)
    assert second.summary_update is not None and second.summary_update.stored
    assert second.summary_update.plan is not None and second.summary_update.plan.reason == "first"
    assert second.summary is not None and second.summary.provider == "extractive"
    contents = [m["content"] for m in second.window.messages]
    assert contents[0].startswith("[Earlier conversation summary:")
    assert len(second.window.messages) == 2 + 6


def test_auto_summarize_off_leaves_the_history_unsummarized(
    make_env: Callable[..., HistoryEnv],
) -> None:
    env = make_env(history=HistoryConfig(auto_summarize=False))
    sid = env.broker.create_session().session_id
    env.service.append_messages(sid, chat(30))
    result = env.service.get_history(sid)
    assert result.summary_update is None and not result.window.summary_used
    assert len(result.window.messages) == 20


def test_a_failed_summary_keeps_the_previous_one(env: HistoryEnv) -> None:
    sid = env.broker.create_session().session_id
    env.service.append_messages(sid, chat(12))
    kept = env.service.summarize(sid).summary
    env.service.append_messages(sid, chat(12, start=12))
    failing = SummarizerChain([("down", Failing())])
    result = env.service.summarize(sid, summarizer=failing)
    assert not result.stored and result.summary == kept
    assert result.outcome is not None and "provider down" in str(result.outcome.attempts[0].error)
    assert env.service.history(sid).summary == kept


def test_a_summary_computed_while_the_history_was_cleared_is_dropped(env: HistoryEnv) -> None:
    sid = env.broker.create_session().session_id
    env.service.append_messages(sid, chat(12))

    class ClearsMeanwhile:
        def summarize(
            self, messages: Sequence[Mapping[str, Any]], previous: str | None, max_tokens: int
        ) -> str:
            env.service.clear_history(sid)
            return "stale summary"

    result = env.service.summarize(sid, summarizer=SummarizerChain([("slow", ClearsMeanwhile())]))
    assert not result.stored and result.summary is None
    history = env.service.history(sid)
    assert history.summary is None and history.cleared


def test_history_survives_the_brokers_own_session_changes(env: HistoryEnv) -> None:
    sid = env.broker.create_session().session_id
    env.service.append_messages(sid, chat(3))
    env.broker.build_request_context(sid, "what next?")
    assert len(env.service.history(sid).messages) == 3


def test_stateless_trim_and_summary_touch_no_session(env: HistoryEnv) -> None:
    messages = chat(4) + tool_turn("c1")[:1]
    trimmed = env.service.trim_messages(messages, max_tokens=10_000)
    assert trimmed.report.backfilled == 1 and trimmed.messages[-1]["role"] == "tool"
    outcome = env.service.summarize_messages(chat(3), "earlier: chose sqlite")
    assert outcome.provider == "extractive" and outcome.text and "sqlite" in outcome.text
    assert env.broker.store.list_session_ids() == []


def test_preset_and_filters_together_are_refused(env: HistoryEnv) -> None:
    with pytest.raises(HistoryError) as info:
        env.service.trim_messages(chat(2), preset="topic", filters=["sizeLimiter"])
    assert info.value.field == "filters"
    with pytest.raises(HistoryError) as info:
        env.service.trim_messages(chat(2), preset="nope")
    assert info.value.field == "preset"


def test_unknown_sessions_are_refused(env: HistoryEnv) -> None:
    with pytest.raises(SessionError) as info:
        env.service.append_messages("s_" + "x" * 32, chat(1))
    assert info.value.field == "session_id"


def test_everything_is_on_disk_when_each_call_returns_and_survives_a_restart(
    tmp_path: Path, make_env: Callable[..., HistoryEnv]
) -> None:
    path = tmp_path / "sessions.db"
    env = make_env(store_path=path)
    sid = env.broker.create_session().session_id

    def on_disk() -> dict[str, Any]:
        fresh = SqliteSessionStore(path)
        history: dict[str, Any] = {
            **(fresh.history_state(sid) or {}),
            "messages": fresh.messages(sid),
            "snapshot": fresh.snapshot(sid),
        }
        fresh.close()
        return history

    ids = env.service.append_messages(sid, chat(12) + tool_turn("c1")).ids
    assert len(on_disk()["messages"]) == 14
    env.service.collapse_messages(sid, list(ids[:2]), "intro", "greetings")
    assert on_disk()["groups"] == [
        {"name": "intro", "messageIds": list(ids[:2]), "description": "greetings"}
    ]
    env.service.update_snapshot(sid, {"goal": "ship it", "completedActions": ["tests"]})
    assert on_disk()["snapshot"]["goal"] == "ship it"
    summary = env.service.summarize(sid).summary
    assert summary is not None and on_disk()["summary"]["text"] == summary.text

    # A restart: a new store object and a new broker and service over the same file.
    store = SqliteSessionStore(path)
    broker = build_parts(AppConfig(), embedder=HashEmbedder(), store=store).broker
    service = HistoryService(broker, HistoryConfig())
    history = service.history(sid)
    assert [m.id for m in history.messages] == list(ids)
    assert history.summary == summary
    assert history.groups[0].name == "intro" and history.groups[0].description == "greetings"
    assert history.snapshot is not None and history.snapshot.completed_actions == ("tests",)
    stats = service.get_context_stats(sid)
    assert stats.message_count == 14 and stats.has_summary and stats.has_snapshot
    service.clear_history(sid)
    reloaded = HistoryService(
        build_parts(AppConfig(), embedder=HashEmbedder(), store=SqliteSessionStore(path)).broker,
        HistoryConfig(),
    )
    assert reloaded.history(sid).cleared
    assert reloaded.get_history(sid).window.messages == []
