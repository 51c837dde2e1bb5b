"""Chat messages in the two common wire shapes, parsed into one read-only view.

Messages are plain JSON dicts at the edge, either OpenAI-style (``role`` system / user /
assistant / tool, assistant ``tool_calls``, tool messages with ``tool_call_id``) or
Anthropic-style (``content`` lists of ``text``, ``tool_use``, ``tool_result`` and ``image``
blocks). A :class:`Message` keeps the original dict untouched (unknown fields included) and
adds what the filters need: its id, role, tool calls and tool results.

Ids: a message without an ``id`` gets ``msg_<hash>`` where the hash covers the message's
canonical JSON and its position in the list (or the session), so the same input always gets
the same ids.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Literal, TypeAlias

from ..errors import HistoryError

__all__ = [
    "ROLES",
    "Message",
    "Role",
    "Shape",
    "ToolCall",
    "ToolResult",
    "detect_shape",
    "make_message",
    "message_text",
    "parse_messages",
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
    """Build a :class:`Message` from an already valid wire dict that carries an ``id``."""
    role: Role = raw["role"]
    content = raw.get("content")
    calls = tuple(_openai_calls(raw)) + tuple(_anthropic_calls(content))
    if role == "tool":
        results: tuple[ToolResult, ...] = (
            ToolResult(str(raw["tool_call_id"]), _text(content), bool(raw.get("is_error"))),
        )
    else:
        results = tuple(_anthropic_results(content))
    return Message(str(raw["id"]), role, raw, calls, results)


def message_text(message: Message) -> str:
    """All text of a message: its content and its tool results, joined by newlines."""
    return _text(message.raw.get("content"))


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


def parse_messages(
    raws: Sequence[object],
    *,
    start: int = 0,
    taken_ids: frozenset[str] = frozenset(),
    taken_call_ids: frozenset[str] = frozenset(),
) -> list[Message]:
    """Validate wire dicts and return them as messages, assigning missing ids.

    ``start`` is the position of the first message in the session (for ids and error
    fields); ``taken_ids`` and ``taken_call_ids`` are message and tool call ids already used
    there. Raises ``HistoryError`` naming ``messages[i].field`` for the first problem found.
    """
    if isinstance(raws, str | bytes) or not isinstance(raws, Sequence):
        raise HistoryError(f"messages must be a list, got {raws!r}", field="messages")
    checked = [_check_message(raw, start + offset) for offset, raw in enumerate(raws)]
    detect_shape(checked, start=start)
    ids = set(taken_ids)
    call_ids = set(taken_call_ids)
    messages = []
    for offset, raw in enumerate(checked):
        index = start + offset
        message = make_message(_with_id(raw, index))
        if message.id in ids:
            raise HistoryError(
                f"messages[{index}].id {message.id!r} is already used; give each message "
                "a unique id or leave it out",
                field=f"messages[{index}].id",
            )
        for call_id in message.call_ids:
            if call_id in call_ids:
                raise HistoryError(
                    f"messages[{index}] reuses tool call id {call_id!r}; tool call ids must "
                    "be unique in a conversation",
                    field=f"messages[{index}].tool_calls",
                )
            call_ids.add(call_id)
        ids.add(message.id)
        messages.append(message)
    return messages


def _with_id(raw: Mapping[str, Any], index: int) -> Mapping[str, Any]:
    if "id" in raw:
        return raw
    canonical = json.dumps(raw, sort_keys=True, ensure_ascii=False, default=str)
    digest = hashlib.sha256(f"{index}#{canonical}".encode()).hexdigest()[:16]
    return {**raw, "id": f"msg_{digest}"}


def _check_message(raw: object, index: int) -> Mapping[str, Any]:
    where = f"messages[{index}]"
    if not isinstance(raw, Mapping):
        raise HistoryError(f"{where} must be an object, got {raw!r}", field=where)
    role = raw.get("role")
    if role not in ROLES:
        raise HistoryError(
            f"{where}.role {role!r} is not one of {', '.join(ROLES)}", field=f"{where}.role"
        )
    message_id = raw.get("id")
    if "id" in raw and (not isinstance(message_id, str) or not message_id):
        raise HistoryError(
            f"{where}.id {message_id!r} must be a non-empty string (or left out)",
            field=f"{where}.id",
        )
    _check_content(raw.get("content"), role, where)
    _check_openai_fields(raw, role, where)
    return raw


def _check_content(content: object, role: object, where: str) -> None:
    if content is None or isinstance(content, str):
        return
    if not isinstance(content, list):
        raise HistoryError(
            f"{where}.content must be a string or a list of blocks, got {content!r}",
            field=f"{where}.content",
        )
    for position, block in enumerate(content):
        field = f"{where}.content[{position}]"
        if not isinstance(block, Mapping) or not isinstance(block.get("type"), str):
            raise HistoryError(
                f"{field} must be an object with a 'type', got {block!r}", field=field
            )
        _check_block(block, role, field)


def _check_block(block: Mapping[str, Any], role: object, field: str) -> None:
    kind = block["type"]
    if kind == "tool_use":
        _require_str(block, "id", field)
        _require_str(block, "name", field)
        if role != "assistant":
            raise HistoryError(
                f"{field} is a tool_use block in a {role!r} message; only "
                "assistant messages call tools",
                field=field,
            )
        if not isinstance(block.get("input", {}), Mapping):
            raise HistoryError(
                f"{field}.input must be an object, got {block.get('input')!r}",
                field=f"{field}.input",
            )
    elif kind == "tool_result":
        _require_str(block, "tool_use_id", field)
        if role != "user":
            raise HistoryError(
                f"{field} is a tool_result block in a {role!r} message; tool "
                "results go in user messages",
                field=field,
            )
    elif kind == "text" and not isinstance(block.get("text"), str):
        raise HistoryError(
            f"{field}.text must be a string, got {block.get('text')!r}", field=f"{field}.text"
        )


def _check_openai_fields(raw: Mapping[str, Any], role: object, where: str) -> None:
    if role == "tool":
        _require_str(raw, "tool_call_id", where)
    calls = raw.get("tool_calls")
    if calls is None:
        return
    if role != "assistant" or not isinstance(calls, list):
        raise HistoryError(
            f"{where}.tool_calls must be a list on an assistant message, got {calls!r}",
            field=f"{where}.tool_calls",
        )
    for position, call in enumerate(calls):
        field = f"{where}.tool_calls[{position}]"
        if not isinstance(call, Mapping):
            raise HistoryError(f"{field} must be an object, got {call!r}", field=field)
        _require_str(call, "id", field)
        function = call.get("function")
        if not isinstance(function, Mapping):
            raise HistoryError(
                f"{field}.function must be an object with a 'name', got {function!r}",
                field=f"{field}.function",
            )
        _require_str(function, "name", f"{field}.function")


def _require_str(holder: Mapping[str, Any], key: str, where: str) -> None:
    value = holder.get(key)
    if not isinstance(value, str) or not value:
        raise HistoryError(
            f"{where}.{key} must be a non-empty string, got {value!r}", field=f"{where}.{key}"
        )


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
                arguments = block.get("input")
                yield ToolCall(
                    str(block["id"]),
                    str(block["name"]),
                    arguments if isinstance(arguments, Mapping) else {},
                )


def _anthropic_results(content: object) -> Iterator[ToolResult]:
    if isinstance(content, list):
        for block in content:
            if block.get("type") == "tool_result":
                yield ToolResult(
                    str(block["tool_use_id"]),
                    _text(block.get("content")),
                    bool(block.get("is_error")),
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
        return all(_block_is_empty(block) for block in content)
    return False


def _block_is_empty(block: object) -> bool:
    if not isinstance(block, Mapping):
        return False
    if block.get("type") == "text":
        text = block.get("text")
        return not (isinstance(text, str) and text.strip())
    return False
