"""Validating wire dicts of either shape and parsing them into messages with ids.

Ids: a message without an ``id`` gets ``msg_<hash>`` where the hash covers the message's
canonical JSON and its position in the list (or the session), so the same input always gets
the same ids.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import Any

from ...errors import HistoryError
from ._read import ROLES, Message, detect_shape, make_message

__all__ = ["check_ids", "parse_messages"]


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
    messages = [make_message(_with_id(raw, start + offset)) for offset, raw in enumerate(checked)]
    check_ids(messages, start=start, taken_ids=taken_ids, taken_call_ids=taken_call_ids)
    return messages


def check_ids(
    messages: Sequence[Message],
    *,
    start: int = 0,
    taken_ids: frozenset[str] = frozenset(),
    taken_call_ids: frozenset[str] = frozenset(),
) -> None:
    """Raise ``HistoryError`` naming the first message whose id, or one of whose tool call
    ids, is used earlier in ``messages`` or is among the ids already taken."""
    ids = set(taken_ids)
    call_ids = set(taken_call_ids)
    for offset, message in enumerate(messages):
        index = start + offset
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
