"""Reading chat messages of either wire shape into one read-only view.

A :class:`Message` keeps the original dict untouched (unknown fields included) and adds what
the filters need: its id, role, tool calls and tool results. Everything here expects wire
dicts that :func:`~contextcore.history.messages.parse_messages` accepted.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Literal, TypeAlias

from ...errors import HistoryError

__all__ = [
    "ROLES",
    "Message",
    "Part",
    "Role",
    "Shape",
    "ToolCall",
    "ToolResult",
    "block_is_empty",
    "content_blocks",
    "content_parts",
    "detect_shape",
    "has_image",
    "make_message",
    "message_text",
    "read_tool_result",
    "text_parts",
]

Shape: TypeAlias = Literal["openai", "anthropic"]
Role: TypeAlias = Literal["system", "user", "assistant", "tool"]
ROLES: tuple[Role, ...] = ("system", "user", "assistant", "tool")

_ANTHROPIC_BLOCKS = frozenset({"tool_use", "tool_result", "image"})
_OPENAI_PARTS = frozenset({"image_url", "input_audio"})


@dataclass(frozen=True)
class ToolCall:
    """One tool call: its id, tool name and parsed arguments (``{}`` if not JSON)."""

    id: str
    name: str
    arguments: Mapping[str, Any]


@dataclass(frozen=True)
class ToolResult:
    """One tool result: the call it answers, its text and whether it is an error."""

    call_id: str
    text: str
    is_error: bool


@dataclass(frozen=True, eq=False)
class Message:
    """A parsed message; ``raw`` is the wire dict (with ``id``) and must not be mutated."""

    id: str
    role: Role
    raw: Mapping[str, Any]
    calls: tuple[ToolCall, ...] = ()
    results: tuple[ToolResult, ...] = ()

    @property
    def call_ids(self) -> tuple[str, ...]:
        """Ids of the tool calls this message makes."""
        return tuple(call.id for call in self.calls)

    @property
    def result_ids(self) -> tuple[str, ...]:
        """Ids of the tool calls this message answers."""
        return tuple(result.call_id for result in self.results)

    @cached_property
    def json_text(self) -> str:
        """The message's compact JSON (computed once; what token estimates are made from)."""
        return json.dumps(self.raw, ensure_ascii=False, separators=(",", ":"), default=str)

    @property
    def is_empty(self) -> bool:
        """True when the message has no content and no tool calls."""
        return not self.calls and _content_is_empty(self.raw.get("content"))


def make_message(raw: Mapping[str, Any]) -> Message:
    """Build a :class:`Message` from an already valid wire dict (its ``id``, ``""`` if none)."""
    role: Role = raw["role"]
    content = raw.get("content")
    calls = tuple(_openai_calls(raw)) + tuple(_anthropic_calls(content))
    if role == "tool":
        results: tuple[ToolResult, ...] = (
            ToolResult(str(raw["tool_call_id"]), _text(content), bool(raw.get("is_error"))),
        )
    else:
        results = tuple(_anthropic_results(content))
    return Message(str(raw.get("id", "")), role, raw, calls, results)


def message_text(message: Message) -> str:
    """All text of a message: its content and its tool results, joined by newlines."""
    return _text(message.raw.get("content"))


Part: TypeAlias = "str | ToolCall | ToolResult"


def content_parts(message: Message) -> Iterator[Part]:
    """The message's texts, tool calls and tool results in wire order (OpenAI tool calls
    come after the content; a tool message is its one result)."""
    if message.role == "tool":
        yield from message.results
        return
    content = message.raw.get("content")
    if isinstance(content, str) and content:
        yield content
    for block in content if isinstance(content, list) else ():
        if not isinstance(block, Mapping):
            continue
        kind = block.get("type")
        if kind == "tool_use":
            yield _tool_use(block)
        elif kind == "tool_result":
            yield read_tool_result(block)
        elif isinstance(block.get("text"), str):
            yield block["text"]
    yield from _openai_calls(message.raw)


def text_parts(message: Message) -> Iterator[tuple[str, bool]]:
    """Each text of the message in wire order, with whether it is a tool result's text."""
    for part in content_parts(message):
        if isinstance(part, str):
            yield part, False
        elif isinstance(part, ToolResult):
            yield part.text, True


def content_blocks(message: Message) -> list[Mapping[str, Any]]:
    """The content blocks of the message (``[]`` when its content is a string or absent)."""
    content = message.raw.get("content")
    return [b for b in content if isinstance(b, Mapping)] if isinstance(content, list) else []


def has_image(message: Message) -> bool:
    """True when the message, or a tool result in it, carries an image."""
    for block in content_blocks(message):
        kind = block.get("type")
        inner = block.get("content") if kind == "tool_result" else None
        if kind in ("image", "image_url") or (
            isinstance(inner, list)
            and any(b.get("type") == "image" for b in inner if isinstance(b, Mapping))
        ):
            return True
    return False


def detect_shape(raws: Sequence[Mapping[str, Any]], *, start: int = 0) -> Shape | None:
    """Return the shape the messages use, ``None`` if plain text fits both; raise on a mix.

    ``start`` is the position of ``raws[0]`` in a longer list, used in error fields.
    """
    seen: Shape | None = None
    for offset, raw in enumerate(raws):
        hint = _shape_hint(raw)
        if hint is None:
            continue
        if seen is not None and hint != seen:
            index = start + offset
            raise HistoryError(
                f"messages[{index}] is {hint}-style but earlier messages are {seen}-style; "
                "send one shape per conversation",
                field=f"messages[{index}]",
            )
        seen = hint
    return seen


def _shape_hint(raw: Mapping[str, Any]) -> Shape | None:
    if raw.get("role") == "tool" or "tool_calls" in raw:
        return "openai"
    content = raw.get("content")
    if isinstance(content, list):
        for block in content:
            kind = block.get("type") if isinstance(block, Mapping) else None
            if kind in _ANTHROPIC_BLOCKS:
                return "anthropic"
            if kind in _OPENAI_PARTS:
                return "openai"
    return None


def _openai_calls(raw: Mapping[str, Any]) -> Iterator[ToolCall]:
    for call in raw.get("tool_calls") or ():
        function = call["function"]
        yield ToolCall(
            str(call["id"]), str(function["name"]), _parse_args(function.get("arguments"))
        )


def _anthropic_calls(content: object) -> Iterator[ToolCall]:
    if isinstance(content, list):
        for block in content:
            if block.get("type") == "tool_use":
                yield _tool_use(block)


def _anthropic_results(content: object) -> Iterator[ToolResult]:
    if isinstance(content, list):
        for block in content:
            if block.get("type") == "tool_result":
                yield read_tool_result(block)


def _tool_use(block: Mapping[str, Any]) -> ToolCall:
    arguments = block.get("input")
    return ToolCall(
        str(block["id"]), str(block["name"]), arguments if isinstance(arguments, Mapping) else {}
    )


def read_tool_result(block: Mapping[str, Any]) -> ToolResult:
    """The :class:`ToolResult` an Anthropic ``tool_result`` block carries."""
    return ToolResult(
        str(block["tool_use_id"]), _text(block.get("content")), bool(block.get("is_error"))
    )


def _parse_args(arguments: object) -> Mapping[str, Any]:
    if isinstance(arguments, Mapping):
        return arguments
    if isinstance(arguments, str):
        try:
            parsed = json.loads(arguments)
        except ValueError:
            return {}
        return parsed if isinstance(parsed, Mapping) else {}
    return {}


def _text(content: object) -> str:
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    parts: list[str] = []
    for block in content:
        if not isinstance(block, Mapping):
            continue
        if isinstance(block.get("text"), str):
            parts.append(block["text"])
        elif block.get("type") == "tool_result":
            parts.append(_text(block.get("content")))
    return "\n".join(part for part in parts if part)


def _content_is_empty(content: object) -> bool:
    if content is None:
        return True
    if isinstance(content, str):
        return not content.strip()
    if isinstance(content, list):
        return all(block_is_empty(block) for block in content)
    return False


def block_is_empty(block: object) -> bool:
    """True for a text block with no visible text."""
    if not isinstance(block, Mapping):
        return False
    if block.get("type") == "text":
        text = block.get("text")
        return not (isinstance(text, str) and text.strip())
    return False
