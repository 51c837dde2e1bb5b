"""Filter specs, the registry, message validation and ids."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pytest
from history_builders import an_result, an_tool_use, oa_assistant_calls, oa_call, oa_result, text

from contextcore.errors import HistoryError
from contextcore.history import (
    FilterDefinition,
    FilterRun,
    Message,
    build_pipeline,
    default_registry,
    parse_messages,
    run_pipeline,
    validate_window,
)


def test_presets_name_their_filters_in_order() -> None:
    assert build_pipeline("general").names == ("sizeLimiter", "toolCallBackfill")
    assert build_pipeline("topic").names == (
        "collapseGroupReplacer",
        "fileContentsLimiter",
        "sizeLimiter",
        "toolCallBackfill",
    )
    assert build_pipeline("topic").filters[2].options.max_tokens == 20000


def test_tool_call_backfill_runs_last_even_when_listed_first_or_omitted() -> None:
    listed = build_pipeline(
        [{"name": "toolCallBackfill", "options": {"missingContent": "x"}}, "pruneMiddle"]
    )

    assert listed.names == ("pruneMiddle", "toolCallBackfill")
    assert listed.filters[-1].options.missing_content == "x"
    assert build_pipeline(["pruneMiddle"]).names == ("pruneMiddle", "toolCallBackfill")


@pytest.mark.parametrize(
    ("spec", "field"),
    [
        (["sizeLimiter", "shrinker"], "filters[1]"),
        (["sizeLimiter", {"name": "nope"}], "filters[1].name"),
        (
            ["pruneMiddle", {"name": "sizeLimiter", "options": {"maxTokns": 5}}],
            "filters[1].options.maxTokns",
        ),
        (
            [{"name": "sizeLimiter", "options": {"maxTokens": "many"}}],
            "filters[0].options.maxTokens",
        ),
        ([{"name": "sizeLimiter", "options": {"maxTokens": -1}}], "filters[0].options.maxTokens"),
        (
            [{"name": "sizeLimiter", "options": {"tokenizer": "bpe"}}],
            "filters[0].options.tokenizer",
        ),
        (
            [{"name": "toolCallBackfill", "options": {"orphanRole": "tool"}}],
            "filters[0].options.orphanRole",
        ),
        ([{"name": "sizeLimiter", "opts": {}}], "filters[0].opts"),
        ("everything", "filters"),
    ],
)
def test_bad_filter_specs_are_errors_naming_the_field(spec: Any, field: str) -> None:
    with pytest.raises(HistoryError) as raised:
        build_pipeline(spec)
    assert raised.value.field == field
    assert field.rsplit(".", 1)[-1].split("[")[0] in raised.value.message


@dataclass(frozen=True)
class _ShoutOptions:
    suffix: str = "!"


def _shout(messages: Sequence[Message], options: _ShoutOptions, run: FilterRun) -> list[Message]:
    return [
        m
        if m.role != "user"
        else Message(
            m.id, m.role, {**m.raw, "content": str(m.raw["content"]).upper() + options.suffix}
        )
        for m in messages
    ]


def test_a_registered_custom_filter_runs_with_its_options() -> None:
    registry = default_registry()
    registry.register(FilterDefinition("shout", _ShoutOptions, _shout))

    result = run_pipeline(
        [text("user", "hi")], [{"name": "shout", "options": {"suffix": "?"}}], registry=registry
    )

    assert result.messages[0]["content"] == "HI?"
    with pytest.raises(HistoryError):
        build_pipeline(["shout"], default_registry())


def test_registering_a_taken_name_is_an_error() -> None:
    registry = default_registry()
    with pytest.raises(HistoryError, match="sizeLimiter"):
        registry.register(FilterDefinition("sizeLimiter", _ShoutOptions, _shout))


def test_missing_ids_are_assigned_deterministically_from_content_and_position() -> None:
    first = parse_messages([text("user", "same"), text("user", "same")])
    again = parse_messages([text("user", "same"), text("user", "same")])

    assert [m.id for m in first] == [m.id for m in again]
    assert first[0].id != first[1].id
    assert parse_messages([dict(text("user", "x"), id="mine")])[0].id == "mine"


@pytest.mark.parametrize(
    ("messages", "field"),
    [
        ([text("user", "ok"), {"role": "robot", "content": "x"}], "messages[1].role"),
        (["hello"], "messages[0]"),
        ([{"role": "user", "content": 5}], "messages[0].content"),
        ([{"role": "tool", "content": "x"}], "messages[0].tool_call_id"),
        (
            [{"role": "assistant", "tool_calls": [{"id": "a", "function": {}}]}],
            "messages[0].tool_calls[0].function.name",
        ),
        (
            [{"role": "user", "content": [{"type": "tool_use", "id": "a", "name": "x"}]}],
            "messages[0].content[0]",
        ),
        ([dict(text("user", "a"), id="x"), dict(text("user", "b"), id="x")], "messages[1].id"),
        (
            [oa_assistant_calls(oa_call("a")), oa_result("a"), oa_assistant_calls(oa_call("a"))],
            "messages[2].tool_calls",
        ),
        ([oa_result("a"), {"role": "user", "content": [an_result("a")]}], "messages[1]"),
    ],
)
def test_malformed_messages_are_errors_naming_the_field(messages: list[Any], field: str) -> None:
    with pytest.raises(HistoryError) as raised:
        parse_messages(messages)
    assert raised.value.field == field


def test_validate_window_names_each_broken_rule() -> None:
    broken = [
        oa_assistant_calls(oa_call("a"), oa_call("b")),
        oa_result("a"),
        text("user", ""),
        oa_result("b"),
    ]

    problems = validate_window(broken)

    assert problems == [
        "messages[2] is empty",
        "messages[0] tool call 'b' is not answered right after it",
        "messages[3] is a tool result with no tool call right before it",
    ]


def test_validate_window_requires_anthropic_results_first_in_the_next_user_message() -> None:
    call = {"role": "assistant", "content": [an_tool_use("a")]}
    late = {"role": "user", "content": [{"type": "text", "text": "hi"}, an_result("a")]}
    skipped = [call, text("user", "hi"), {"role": "user", "content": [an_result("a")]}]

    assert validate_window([call, late]) == [
        "messages[1] has a tool_result block after other content"
    ]
    assert len(validate_window(skipped)) == 2
    assert validate_window([call, {"role": "user", "content": [an_result("a")]}]) == []
