"""Checks a window against the strictest provider rules.

Rules: every message has content or tool calls; every tool call is answered right after
its message (OpenAI: by tool messages immediately following; Anthropic: by the next user
message, whose ``tool_result`` blocks come first); every result answers a call made right
before it; each call is answered once.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..errors import HistoryError
from .messages import Message, content_blocks, detect_shape, parse_messages

__all__ = ["validate_window"]


def validate_window(messages: Sequence[Mapping[str, Any]]) -> list[str]:
    """Return the problems found in ``messages`` (an empty list when the window is valid)."""
    try:
        parsed = parse_messages(messages)
        shape = detect_shape([m.raw for m in parsed])
    except HistoryError as error:
        return [error.message]
    problems = [f"messages[{i}] is empty" for i, m in enumerate(parsed) if m.is_empty]
    if shape == "anthropic":
        problems += _anthropic_problems(parsed)
    else:
        problems += _openai_problems(parsed)
    return problems


def _openai_problems(messages: Sequence[Message]) -> list[str]:
    problems: list[str] = []
    index = 0
    while index < len(messages):
        message = messages[index]
        if message.role == "tool":
            problems.append(f"messages[{index}] is a tool result with no tool call right before it")
            index += 1
            continue
        index += 1
        if not message.calls:
            continue
        waiting = set(message.call_ids)
        caller = index - 1
        while index < len(messages) and messages[index].role == "tool":
            answered = messages[index].result_ids[0]
            if answered in waiting:
                waiting.discard(answered)
            else:
                problems.append(
                    f"messages[{index}] answers {answered!r}, not a pending call of "
                    f"messages[{caller}]"
                )
            index += 1
        problems += _unanswered(caller, waiting)
    return problems


def _anthropic_problems(messages: Sequence[Message]) -> list[str]:
    problems: list[str] = []
    expected: set[str] = set()
    caller = -1
    for index, message in enumerate(messages):
        if expected and not message.results:
            problems += _unanswered(caller, expected)
            expected = set()
        waiting, expected = expected, set()
        for answered in message.result_ids:
            if answered in waiting:
                waiting.discard(answered)
            else:
                problems.append(
                    f"messages[{index}] answers {answered!r}, not a pending call "
                    "of the message right before it"
                )
        if message.results:
            problems += _unanswered(caller, waiting)
            problems += _results_first(index, message)
        if message.calls:
            expected, caller = set(message.call_ids), index
    return problems + _unanswered(caller, expected)


def _results_first(index: int, message: Message) -> list[str]:
    kinds = [block.get("type") for block in content_blocks(message)]
    seen_other = False
    for kind in kinds:
        if kind != "tool_result":
            seen_other = True
        elif seen_other:
            return [f"messages[{index}] has a tool_result block after other content"]
    return []


def _unanswered(caller: int, waiting: set[str]) -> list[str]:
    return [
        f"messages[{caller}] tool call {call_id!r} is not answered right after it"
        for call_id in sorted(waiting)
    ]
