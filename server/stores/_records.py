"""Reading stored records back, shared by the SQLite, PostgreSQL and Redis stores.

A record that no longer reads (broken JSON, a turn missing its fields, a message that is no
chat message) is skipped by the readers and reported (:class:`~contextcore.store.DamageLog`),
so one damaged record never costs the rest of its session.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator
from typing import Any, TypeVar

from contextcore.errors import ContextCoreError
from contextcore.history import message_tokens
from contextcore.history.messages import ROLES, make_message
from contextcore.sessions import RequestContext
from contextcore.store import DamagedRecord, DamageLog, RecordKind

__all__ = [
    "DECODERS",
    "Unreadable",
    "call_of",
    "damaged_in",
    "decoded",
    "message_of",
    "message_value",
    "readable",
    "stored_tokens",
    "turn_of",
]

T = TypeVar("T")
Text = str | bytes


class Unreadable(Exception):
    """A stored record that no longer reads; ``reason`` says what is wrong."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def _json(text: Text) -> Any:
    try:
        return json.loads(text)
    except ValueError as exc:
        where = f" at character {exc.pos}" if isinstance(exc, json.JSONDecodeError) else ""
        raise Unreadable(f"not JSON{where}") from None


def turn_of(text: Text) -> RequestContext:
    """A stored request context."""
    data = _json(text)
    try:
        return RequestContext.from_dict(data)
    except (ContextCoreError, KeyError, TypeError, ValueError, AttributeError) as exc:
        raise Unreadable(f"not a request context ({type(exc).__name__}: {exc})"[:200]) from None


def message_of(text: Text) -> dict[str, Any]:
    """A stored history message (its wire dict)."""
    return message_value(_json(text))


def message_value(data: object) -> dict[str, Any]:
    """``data`` if it is a chat message's wire dict, else ``Unreadable``."""
    if not isinstance(data, dict) or data.get("role") not in ROLES:
        raise Unreadable("not a chat message (no known role)")
    try:
        make_message(data)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise Unreadable(f"not a chat message ({type(exc).__name__}: {exc})"[:200]) from None
    return data


def call_of(text: Text) -> dict[str, Any]:
    """A stored call record."""
    data = _json(text)
    if not isinstance(data, dict):
        raise Unreadable("not a call record (not a JSON object)")
    return data


DECODERS: dict[RecordKind, Callable[[Text], Any]] = {
    "turn": turn_of,
    "message": message_of,
    "call": call_of,
}


def decoded(
    damage: DamageLog,
    session_id: str,
    kind: RecordKind,
    seq: int,
    text: Text,
    decode: Callable[[Text], T],
) -> T | None:
    """``decode(text)``, or None after reporting the record as damaged."""
    try:
        return decode(text)
    except Unreadable as exc:
        damage.found(DamagedRecord(session_id, kind, seq, exc.reason))
        return None


def readable(
    damage: DamageLog,
    session_id: str,
    kind: RecordKind,
    rows: Iterable[tuple[int, Text]],
    decode: Callable[[Text], T],
) -> Iterator[tuple[int, T]]:
    """``(seq, value)`` of each row that reads; the others are reported and skipped."""
    for seq, text in rows:
        value = decoded(damage, session_id, kind, seq, text, decode)
        if value is not None:
            yield seq, value


def damaged_in(kind: RecordKind, rows: Iterable[tuple[str, int, Text]]) -> Iterator[DamagedRecord]:
    """The records among ``(session_id, seq, text)`` rows that no longer read."""
    decode = DECODERS[kind]
    for session_id, seq, text in rows:
        try:
            decode(text)
        except Unreadable as exc:
            yield DamagedRecord(session_id, kind, int(seq), exc.reason)


def stored_tokens(text: Text, field: str | None = None) -> int:
    """The estimated tokens of a stored message's JSON (of its ``field`` when the message is
    wrapped), as the history service gives them to new messages; 0 for one that no longer
    reads. Fills the counters of a store written before it kept them."""
    try:
        value = json.loads(text)
        return message_tokens(value[field] if field else value)
    except (ValueError, KeyError, TypeError):
        return 0
