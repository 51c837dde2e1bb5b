"""Session history: appending, collapsing, clearing, summaries, snapshots, windows, stats."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import pytest
from history_builders import oa_assistant_calls, oa_call, oa_result, text

from contextcore.errors import HistoryError
from contextcore.history import (
    CollapseGroup,
    ConversationHistory,
    ExtractiveSummarizer,
    HistoryStats,
    SummarizerChain,
    SummaryPolicy,
    append_messages,
    clear_history,
    collapse_messages,
    get_window,
    history_stats,
    update_snapshot,
    update_summary,
    validate_window,
    window_tokens,
)


def _chat(count: int, start: int = 0) -> list[dict[str, Any]]:
    return [
        text("user" if i % 2 == 0 else "assistant", f"turn {i}")
        for i in range(start, start + count)
    ]


def _session(count: int) -> ConversationHistory:
    return append_messages(ConversationHistory(), _chat(count))


class _Fixed:
    def __init__(self, reply: str) -> None:
        self.reply = reply
        self.calls: list[tuple[int, str | None]] = []

    def summarize(
        self, messages: Sequence[Mapping[str, Any]], previous_summary: str | None, max_tokens: int
    ) -> str:
        self.calls.append((len(messages), previous_summary))
        return self.reply


class _Broken:
    def summarize(
        self, messages: Sequence[Mapping[str, Any]], previous_summary: str | None, max_tokens: int
    ) -> str:
        raise RuntimeError("model unavailable")


def test_append_reports_the_session_position_of_a_bad_message() -> None:
    with pytest.raises(HistoryError) as raised:
        append_messages(_session(3), [text("user", "ok"), {"role": "bot", "content": "x"}])
    assert raised.value.field == "messages[4].role"


def test_append_rejects_a_shape_different_from_the_session() -> None:
    history = append_messages(ConversationHistory(), [oa_result("a")])
    anthropic = {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "b"}]}

    with pytest.raises(HistoryError, match="openai-style"):
        append_messages(history, [anthropic])


def test_no_summary_is_planned_until_more_than_ten_text_messages() -> None:
    summarizer = _Fixed("S")

    assert not update_summary(_session(10), summarizer).updated
    update = update_summary(_session(11), summarizer)

    assert update.updated
    assert update.history.summary is not None
    assert (update.history.summary.covered, update.history.summary.provider) == (5, "_Fixed")
    assert summarizer.calls[-1] == (5, None)


def test_the_summary_is_refreshed_once_more_than_threshold_messages_accumulate() -> None:
    summarizer = _Fixed("S2")
    history = update_summary(_session(11), _Fixed("S1")).history
    # 11 messages, 5 covered: 6 lie beyond the summary; 4 more make 10, 5 more make 11.
    at_threshold = append_messages(history, _chat(4, 11))
    past_threshold = append_messages(history, _chat(5, 11))

    assert not update_summary(at_threshold, summarizer).updated
    update = update_summary(past_threshold, summarizer)

    assert update.history.summary is not None
    assert update.history.summary.covered == 10
    assert summarizer.calls == [(5, "S1")]


def test_a_forced_summary_folds_whatever_is_due() -> None:
    update = update_summary(_session(8), _Fixed("S"), force=True)

    assert update.history.summary is not None and update.history.summary.covered == 2


def test_the_summary_cut_never_separates_a_call_from_its_results() -> None:
    messages = [*_chat(10), oa_assistant_calls(oa_call("a")), oa_result("a"), *_chat(5, 20)]
    history = append_messages(ConversationHistory(), messages)

    update = update_summary(history, _Fixed("S"))

    assert update.history.summary is not None and update.history.summary.covered == 10


def test_the_chain_falls_back_and_reports_the_provider_used() -> None:
    chain = SummarizerChain(
        [("llm", _Broken()), ("empty", _Fixed("  ")), ("extractive", _Fixed("ok"))]
    )

    update = update_summary(_session(12), chain)

    assert update.outcome is not None
    assert update.outcome.provider == "extractive"
    assert [a.error is None for a in update.outcome.attempts] == [False, False, True]
    assert update.history.summary is not None and update.history.summary.provider == "extractive"


def test_a_failed_summary_leaves_the_previous_one_intact() -> None:
    history = update_summary(_session(11), _Fixed("first")).history

    update = update_summary(append_messages(history, _chat(12, 11)), _Broken())

    assert not update.updated
    assert update.history.summary == history.summary


def test_summaries_are_capped_by_the_policy() -> None:
    policy = SummaryPolicy(max_tokens=10)

    update = update_summary(_session(12), _Fixed("word " * 100), policy)

    assert update.history.summary is not None
    assert len(update.history.summary.text) <= 40


def test_the_window_with_a_summary_starts_with_it_and_an_acknowledgement() -> None:
    history = update_summary(_session(15), _Fixed("they said hello")).history

    window = get_window(history)

    assert window.messages[0]["content"] == "[Earlier conversation summary: they said hello]"
    assert [m["role"] for m in window.messages[:2]] == ["user", "assistant"]
    assert [m["content"] for m in window.messages[2:]] == [f"turn {i}" for i in range(9, 15)]
    assert window.summary_used


def test_the_window_without_a_summary_holds_the_last_twenty_messages() -> None:
    window = get_window(_session(30))

    assert [m["content"] for m in window.messages] == [f"turn {i}" for i in range(10, 30)]


def test_the_window_respects_the_token_budget_including_the_summary() -> None:
    history = update_summary(_session(15), _Fixed("s" * 200)).history

    window = get_window(history, max_tokens=120)

    assert window_tokens(window.messages) <= 120
    assert window.messages[0]["content"].startswith("[Earlier conversation summary:")


def test_after_a_clear_the_next_window_is_empty_and_later_messages_start_afresh() -> None:
    history = clear_history(update_summary(_session(15), _Fixed("S")).history)

    assert get_window(history).messages == []
    later = get_window(append_messages(history, [text("user", "new start")]))
    assert [m["content"] for m in later.messages] == ["new start"]
    assert not later.summary_used


def test_the_window_can_carry_only_roles_and_text() -> None:
    messages = [
        text("user", "read it"),
        oa_assistant_calls(oa_call("a", path="x.py")),
        oa_result("a", "contents"),
    ]
    window = get_window(append_messages(ConversationHistory(), messages), only_text=True)

    assert window.messages == [
        {"role": "user", "content": "read it"},
        {"role": "assistant", "content": '[called read_file({"path": "x.py"})]'},
        {"role": "user", "content": "[tool result] contents"},
    ]
    assert validate_window(window.messages) == []


def test_collapsing_unknown_message_ids_is_an_error_naming_them() -> None:
    history = _session(3)

    with pytest.raises(HistoryError, match="nope"):
        collapse_messages(history, CollapseGroup("g", (history.messages[0].id, "nope")))


def test_collapsed_groups_are_applied_to_the_window() -> None:
    history = _session(4)
    ids = tuple(m.id for m in history.messages[1:3])
    history = collapse_messages(history, CollapseGroup("middle", ids))

    window = get_window(history, filters="topic")

    assert [m["id"] for m in window.messages][1] == "collapsed:middle"
    assert len(window.messages) == 3


def test_snapshot_updates_merge_and_render_into_the_window() -> None:
    history = update_snapshot(_session(2), {"goal": "ship", "completedActions": ["plan"]})
    history = update_snapshot(
        history, {"completedActions": ["plan", "code"], "currentPhase": "test"}
    )

    assert history.snapshot is not None
    assert history.snapshot.completed_actions == ("plan", "code")
    window = get_window(history)
    assert window.messages[0]["role"] == "system"
    assert "Goal: ship" in window.messages[0]["content"]
    assert "Current phase: test" in window.messages[0]["content"]
    with pytest.raises(HistoryError) as raised:
        update_snapshot(history, {"mood": "good"})
    assert raised.value.field == "snapshot.mood"


def test_the_state_round_trips_through_plain_json() -> None:
    history = update_summary(_session(12), _Fixed("S")).history
    history = update_snapshot(history, {"goal": "g"})
    history = collapse_messages(history, CollapseGroup("g", (history.messages[0].id,), "d"))

    restored = ConversationHistory.from_dict(json.loads(json.dumps(history.to_dict())))

    assert restored.to_dict() == history.to_dict()
    assert get_window(restored).messages == get_window(history).messages


def test_stats_describe_the_session() -> None:
    history = update_snapshot(update_summary(_session(12), _Fixed("S")).history, {"goal": "g"})

    stats = history_stats(history)

    assert stats == HistoryStats(
        message_count=12,
        estimated_tokens=window_tokens(m.raw for m in history.messages),
        has_summary=True,
        has_snapshot=True,
        summarized_messages=6,
        groups=0,
        cleared=False,
    )


def test_the_extractive_summarizer_keeps_key_facts_verbatim() -> None:
    messages = [
        text("user", "Please fix the login bug. It is urgent."),
        text("assistant", "I looked around. The weather is nice today."),
        oa_assistant_calls(oa_call("a", "run_tests", path="tests/test_login.py")),
        oa_result("a", "FAILED tests/test_login.py::test_ok - AssertionError: 401 != 200"),
        text("assistant", "We decided to use bcrypt for hashing."),
    ]

    summary = ExtractiveSummarizer().summarize(messages, "Earlier: port is 8080.", 200)

    assert "port is 8080" in summary
    assert "AssertionError: 401 != 200" in summary
    assert "We decided to use bcrypt for hashing." in summary
    assert "tests/test_login.py" in summary
    assert "weather" not in summary
    assert len(summary) <= 800


def test_the_extractive_summarizer_respects_a_tight_cap() -> None:
    messages = [text("user", f"error {i} in src/module_{i}.py line {i}") for i in range(50)]

    summary = ExtractiveSummarizer().summarize(messages, None, 30)

    assert 0 < len(summary) <= 120
    assert "module_49" in summary
