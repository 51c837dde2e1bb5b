"""Property tests: whatever the conversation and filters, the window is valid, ordered,
within budget and deterministic."""

from __future__ import annotations

from typing import Any

from history_builders import conversations
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from contextcore.history import (
    CollapseGroup,
    RunContext,
    parse_messages,
    run_pipeline,
    validate_window,
    window_tokens,
)

SETTINGS = settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

ALL_FILTERS: list[Any] = [
    "collapseGroupReplacer",
    "uiCompression",
    "pruneMiddle",
    "fileContentsLimiter",
    {"name": "importanceRetention", "options": {"maxMessages": 8}},
    "sizeLimiter",
]


def _specs(budget: int) -> list[Any]:
    return [
        [{"name": "sizeLimiter", "options": {"maxTokens": budget}}],
        "topic",
        [*ALL_FILTERS[:-1], {"name": "sizeLimiter", "options": {"maxTokens": budget}}],
        [
            {"name": "sizeLimiter", "options": {"maxTokens": budget, "prioritizeSystem": True}},
            "collapseGroupReplacer",
            "pruneMiddle",
        ],
    ]


def _groups(messages: list[dict[str, Any]], picks: list[int]) -> tuple[CollapseGroup, ...]:
    ids = [m["id"] for m in messages]
    chosen = tuple(ids[p % len(ids)] for p in picks) if ids else ()
    return (CollapseGroup("g", chosen, "a group", ("one",)),) if chosen else ()


@SETTINGS
@given(
    conversations(),
    st.integers(0, 3),
    st.integers(40, 6000),
    st.lists(st.integers(0, 50), max_size=4),
)
def test_every_window_is_valid_ordered_within_budget_and_deterministic(
    conversation: list[dict[str, Any]], which: int, budget: int, picks: list[int]
) -> None:
    messages = [dict(m.raw) for m in parse_messages(conversation)]
    spec = _specs(budget)[which]
    context = RunContext(groups=_groups(messages, picks), max_tokens=budget)

    result = run_pipeline(messages, spec, context)

    assert validate_window(result.messages) == []
    assert result.messages == run_pipeline(messages, spec, context).messages
    _assert_chronological(messages, result.messages)
    total = window_tokens(result.messages)
    systems = window_tokens(m for m in result.messages if m["role"] == "system")
    assert total <= budget or systems > budget
    assert result.report.tokens_after == total


def _assert_chronological(before: list[dict[str, Any]], after: list[dict[str, Any]]) -> None:
    def is_result(m: dict[str, Any]) -> bool:
        content = m.get("content")
        blocks = content if isinstance(content, list) else []
        return m["role"] == "tool" or any(b.get("type") == "tool_result" for b in blocks)

    order = {m["id"]: i for i, m in enumerate(before) if not is_result(m)}
    kept = [order[m["id"]] for m in after if m["id"] in order]
    assert kept == sorted(kept)


@SETTINGS
@given(conversations(messy=False))
def test_a_valid_window_under_budget_comes_back_unchanged(
    conversation: list[dict[str, Any]],
) -> None:
    for message in conversation:
        message["x_unknown"] = {"kept": True}
    messages = [dict(m.raw) for m in parse_messages(conversation)]

    result = run_pipeline(
        messages,
        [{"name": "sizeLimiter", "options": {"maxTokens": 10**7, "maxContentChars": 10**6}}],
    )

    assert validate_window(messages) == []
    assert result.messages == messages


@SETTINGS
@given(conversations())
def test_validate_window_reports_nothing_only_for_repaired_or_valid_windows(
    conversation: list[dict[str, Any]],
) -> None:
    repaired = run_pipeline(conversation, ["toolCallBackfill"]).messages

    assert validate_window(repaired) == []
    if validate_window(conversation) == [] and all(
        m.get("content") for m in conversation if m["role"] != "assistant"
    ):
        assert len(repaired) == len(conversation)
