"""Tool-chain repair: every call answered right after it, no result without its call.

This is the core of the ``toolCallBackfill`` filter; the size limiter runs it too, so the
budget it enforces already includes what repair adds. On a valid window it changes nothing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from ._options import OPTIONS_CONFIG, Flag, Text
from .messages import (
    Message,
    Shape,
    block_is_empty,
    content_blocks,
    make_message,
    read_tool_result,
    result_block,
    text_block,
    tool_message,
)
from .report import Tally

__all__ = ["RepairOptions", "repair_chains"]

EMPTY_RESULT = "(empty tool result)"


@dataclass(frozen=True)
class RepairOptions:
    """Options of ``toolCallBackfill``.

    ``role`` is the role of synthetic results in OpenAI shape (only ``"tool"`` is valid there;
    Anthropic results always travel as ``tool_result`` blocks in a user message).
    """

    __pydantic_config__ = OPTIONS_CONFIG

    missing_content: Text = "[no tool result: the call was interrupted or its result was dropped]"
    role: Literal["tool"] = "tool"
    orphan_role: Literal["system", "user", "assistant"] = "system"
    strip_orphan_tool_id: Flag = True


def repair_chains(
    messages: Sequence[Message],
    shape: Shape | None,
    options: RepairOptions,
    tally: Tally | None = None,
) -> list[Message]:
    """Return ``messages`` with tool results moved, backfilled or turned into plain messages.

    Empty messages are dropped. Relative order of the other messages is kept.
    """
    tally = tally if tally is not None else Tally()
    if shape == "anthropic":
        return _AnthropicRepair(messages, options, tally).run()
    return _repair_openai(messages, options, tally)


def _callers(messages: Sequence[Message]) -> dict[str, int]:
    owner: dict[str, int] = {}
    for index, message in enumerate(messages):
        for call_id in message.call_ids:
            owner.setdefault(call_id, index)
    return owner


def _count_moved(caller: int, positions: Sequence[int]) -> int:
    expected, moved = caller + 1, 0
    for position in positions:
        if position == expected:
            expected += 1
        else:
            moved += 1
    return moved


def _repair_openai(
    messages: Sequence[Message], options: RepairOptions, tally: Tally
) -> list[Message]:
    owner = _callers(messages)
    answers: dict[str, int] = {}
    for index, message in enumerate(messages):
        if message.role == "tool":
            call_id = message.result_ids[0]
            if call_id in owner and call_id not in answers:
                answers[call_id] = index
    routed = set(answers.values())
    out: list[Message] = []
    for index, message in enumerate(messages):
        if index in routed:
            continue
        if message.role == "tool":
            out.append(_openai_orphan(message, options))
            tally.orphans += 1
        elif message.is_empty:
            tally.dropped += 1
        else:
            out.append(message)
            out += _openai_results(index, message, messages, answers, options, tally)
    return out


def _openai_results(
    index: int,
    message: Message,
    messages: Sequence[Message],
    answers: Mapping[str, int],
    options: RepairOptions,
    tally: Tally,
) -> list[Message]:
    if not message.calls:
        return []
    positions = sorted(answers[c] for c in message.call_ids if c in answers)
    tally.moved += _count_moved(index, positions)
    results = [_filled(messages[p]) for p in positions]
    for call_id in message.call_ids:
        if call_id not in answers:
            tally.backfilled += 1
            missing = tool_message(
                call_id,
                options.missing_content,
                role=options.role,
                id=f"{message.id}:{call_id}:missing",
            )
            results.append(make_message(missing))
    return results


def _filled(message: Message) -> Message:
    if not message.is_empty:
        return message
    return make_message({**message.raw, "content": EMPTY_RESULT})


def _openai_orphan(message: Message, options: RepairOptions) -> Message:
    raw = {
        k: v
        for k, v in message.raw.items()
        if not (k == "tool_call_id" and options.strip_orphan_tool_id)
    }
    raw["role"] = options.orphan_role
    if message.is_empty:
        raw["content"] = EMPTY_RESULT
    return make_message(raw)


class _AnthropicRepair:
    """One repair pass over an Anthropic-style list (results are blocks in user messages)."""

    def __init__(self, messages: Sequence[Message], options: RepairOptions, tally: Tally) -> None:
        self.messages, self.options, self.tally = messages, options, tally
        owner = _callers(messages)
        self.answers: dict[str, tuple[int, int]] = {}
        for index, message in enumerate(messages):
            for position, block in enumerate(content_blocks(message)):
                call_id = block.get("tool_use_id") if block.get("type") == "tool_result" else None
                if call_id in owner and call_id not in self.answers:
                    self.answers[str(call_id)] = (index, position)
        self.routed = {place for place in self.answers.values()}
        self.carriers: set[int] = set()

    def run(self) -> list[Message]:
        out: list[Message] = []
        for index, message in enumerate(self.messages):
            if message.results:
                out += self._split(index, message)
            elif message.is_empty:
                self.tally.dropped += 1
            else:
                out.append(message)
                if message.calls:
                    out.append(self._results_for(index, message))
        return out

    def _rest(self, index: int) -> list[Any]:
        return [b for b in content_blocks(self.messages[index]) if b.get("type") != "tool_result"]

    def _orphans(self, index: int) -> list[Mapping[str, Any]]:
        return [
            b
            for p, b in enumerate(content_blocks(self.messages[index]))
            if b.get("type") == "tool_result" and (index, p) not in self.routed
        ]

    def _split(self, index: int, message: Message) -> list[Message]:
        orphans, rest = self._orphans(index), self._rest(index)
        has_rest = any(not block_is_empty(b) for b in rest)
        out: list[Message] = []
        if orphans:
            self.tally.orphans += len(orphans)
            reuse = not has_rest and index not in self.carriers
            out.append(self._orphan_message(message, orphans, reuse))
        if has_rest and index not in self.carriers:
            out.append(make_message({**message.raw, "content": rest}))
        return out

    def _orphan_message(
        self, message: Message, blocks: Sequence[Mapping[str, Any]], reuse: bool
    ) -> Message:
        texts = []
        for block in blocks:
            text = read_tool_result(block).text or EMPTY_RESULT
            if not self.options.strip_orphan_tool_id:
                text = f"[tool result for {block['tool_use_id']}] {text}"
            texts.append(text_block(text))
        base = dict(message.raw) if reuse else {"id": f"{message.id}:orphans"}
        return make_message({**base, "role": self.options.orphan_role, "content": texts})

    def _results_for(self, index: int, message: Message) -> Message:
        places = sorted(self.answers[c] for c in message.call_ids if c in self.answers)
        self.tally.moved += sum(1 for place in places if place[0] != index + 1)
        blocks: list[Any] = [content_blocks(self.messages[i])[p] for i, p in places]
        for call_id in message.call_ids:
            if call_id not in self.answers:
                self.tally.backfilled += 1
                blocks.append(result_block(call_id, self.options.missing_content, is_error=True))
        following = index + 1
        if any(i == following for i, _ in places):
            self.carriers.add(following)
            carrier = self.messages[following]
            content = blocks + [b for b in self._rest(following) if not block_is_empty(b)]
            if content == carrier.raw.get("content"):
                return carrier
            return make_message({**carrier.raw, "content": content})
        return make_message({"role": "user", "content": blocks, "id": f"{message.id}:results"})
