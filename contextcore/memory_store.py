"""The in-memory session store: every session in process memory, gone when the process ends.

It keeps the :class:`~contextcore.store.SessionStore` contract under one lock: the broker's
default, and the reference the other backends are tested against.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from itertools import islice
from typing import Any

from . import store
from .items import ItemRef
from .sessions import RequestContext, RequestItem, SessionItem

__all__ = ["MemorySessionStore"]


@dataclass
class _Records:
    header: store.SessionHeader
    items: list[SessionItem]
    turns: list[RequestContext] = field(default_factory=list)
    turn_index: dict[str, int] = field(default_factory=dict)
    messages: dict[int, store.MessageRecord] = field(default_factory=dict)
    next_seq: int = 0
    tokens: int = 0
    message_ids: set[str] = field(default_factory=set)
    call_ids: set[str] = field(default_factory=set)
    history: dict[str, Any] | None = None
    snapshot: dict[str, Any] | None = None
    code: dict[str, Any] | None = None
    calls: list[dict[str, Any]] = field(default_factory=list)


class MemorySessionStore(store.SessionStore):
    """Sessions in process memory, one lock for all; gone when the process ends."""

    def __init__(self) -> None:
        records = _MemoryRecords()
        super().__init__(*[records] * store.ROLES)  # one object plays every role


class _MemoryRecords(store.JsonParts):
    """Every role's records of one in-memory store, under one lock."""

    def __init__(self) -> None:
        self._sessions: dict[str, _Records] = {}
        self._usage: list[dict[str, Any]] = []
        self._usage_next = 0  # sequence numbers are never reused, even after a delete
        self._embeddings: dict[tuple[str, str], bytes] = {}
        self._lock = threading.Lock()

    def _get(self, session_id: str) -> _Records:
        found = self._sessions.get(session_id)
        if found is None:
            raise store.unknown_session(session_id)
        return found

    def create_session(self, header: store.SessionHeader, items: Sequence[SessionItem]) -> None:
        with self._lock:
            if header.session_id in self._sessions:
                raise store.StoreError(f"session {header.session_id!r} already exists")
            self._sessions[header.session_id] = _Records(header, list(items))

    def header(self, session_id: str) -> store.SessionHeader | None:
        with self._lock:
            found = self._sessions.get(session_id)
            return found.header if found else None

    def list_session_ids(self) -> list[str]:
        with self._lock:
            return list(self._sessions)

    def session_ids_page(self, offset: int, limit: int) -> list[str]:
        with self._lock:
            return list(islice(reversed(self._sessions), offset, offset + limit))

    def items(self, session_id: str) -> tuple[SessionItem, ...]:
        with self._lock:
            found = self._sessions.get(session_id)
            return tuple(found.items) if found else ()

    def add_items(self, session_id: str, items: Sequence[SessionItem]) -> tuple[SessionItem, ...]:
        with self._lock:
            rec = self._get(session_id)
            known = {i.ref for i in rec.items}
            added = []
            for item in items:
                if item.ref not in known:
                    known.add(item.ref)
                    added.append(item)
            rec.items.extend(added)
            refs = {i.ref for i in added}
            removed = tuple(r for r in rec.header.removed if r not in refs)
            rec.header = replace(rec.header, removed=removed)
            return tuple(added)

    def remove_item(self, session_id: str, ref: ItemRef) -> bool:
        with self._lock:
            rec = self._get(session_id)
            before = len(rec.items)
            rec.items = [i for i in rec.items if i.ref != ref]
            if ref not in rec.header.removed:
                rec.header = replace(rec.header, removed=(*rec.header.removed, ref))
            return len(rec.items) != before

    def append_turn(self, session_id: str, turn: RequestContext) -> int:
        with self._lock:
            rec = self._get(session_id)
            rec.turns.append(turn)
            rec.turn_index.setdefault(turn.request_id, len(rec.turns) - 1)
            return len(rec.turns) - 1

    def turn(self, session_id: str, request_id: str) -> RequestContext | None:
        with self._lock:
            found = self._sessions.get(session_id)
            if found is None or request_id not in found.turn_index:
                return None
            return found.turns[found.turn_index[request_id]]

    def extend_turn(
        self, session_id: str, request_id: str, items: Sequence[RequestItem]
    ) -> RequestContext | None:
        with self._lock:
            found = self._sessions.get(session_id)
            if found is None or request_id not in found.turn_index:
                return None
            at = found.turn_index[request_id]
            found.turns[at] = found.turns[at].with_items(tuple(items))
            return found.turns[at]

    def turns(
        self, session_id: str, offset: int = 0, limit: int | None = None
    ) -> list[RequestContext]:
        with self._lock:
            found = self._sessions.get(session_id)
            if found is None:
                return []
            end = None if limit is None else offset + limit
            return found.turns[offset:end]

    def turn_count(self, session_id: str) -> int:
        with self._lock:
            found = self._sessions.get(session_id)
            return len(found.turns) if found else 0

    def last_turn(self, session_id: str) -> RequestContext | None:
        with self._lock:
            found = self._sessions.get(session_id)
            return found.turns[-1] if found and found.turns else None

    def append_messages(
        self, session_id: str, messages: Sequence[store.MessageRecord]
    ) -> tuple[int, ...]:
        with self._lock:
            rec = self._get(session_id)
            _check_unused(rec, messages)
            return _append(rec, messages)

    def messages(
        self, session_id: str, start: int = 0, end: int | None = None
    ) -> list[store.MessageRecord]:
        with self._lock:
            found = self._sessions.get(session_id)
            if found is None:
                return []
            stop = found.next_seq if end is None else min(end, found.next_seq)
            return [found.messages[s] for s in range(max(start, 0), stop) if s in found.messages]

    def message_count(self, session_id: str) -> int:
        with self._lock:
            found = self._sessions.get(session_id)
            return found.next_seq if found else 0

    def message_totals(self, session_id: str) -> tuple[int, int]:
        with self._lock:
            found = self._sessions.get(session_id)
            return (len(found.messages), found.tokens) if found else (0, 0)

    def used_ids(
        self, session_id: str, message_ids: Iterable[str], call_ids: Iterable[str]
    ) -> tuple[frozenset[str], frozenset[str]]:
        with self._lock:
            found = self._sessions.get(session_id)
            if found is None:
                return frozenset(), frozenset()
            return (
                frozenset(i for i in message_ids if i in found.message_ids),
                frozenset(c for c in call_ids if c in found.call_ids),
            )

    def replace_messages(self, session_id: str, messages: Sequence[store.MessageRecord]) -> None:
        with self._lock:
            rec = self._get(session_id)
            missing = [m.seq for m in messages if m.seq not in rec.messages]
            if missing:
                raise store.StoreError(f"no stored message with seq {missing[0]!r} to replace")
            for message in messages:
                old = rec.messages[message.seq]
                rec.message_ids.discard(old.id)
                rec.call_ids.difference_update(old.call_ids)
                rec.tokens += message.tokens - old.tokens
                rec.messages[message.seq] = replace(message, raw=dict(message.raw))
                rec.message_ids.add(message.id)
                rec.call_ids.update(message.call_ids)

    def delete_messages(self, session_id: str, start: int, end: int | None = None) -> int:
        with self._lock:
            rec = self._get(session_id)
            stop = rec.next_seq if end is None else end
            gone = [s for s in list(rec.messages) if start <= s < stop]
            for seq in gone:
                old = rec.messages.pop(seq)
                rec.tokens -= old.tokens
                rec.message_ids.discard(old.id)
                rec.call_ids.difference_update(old.call_ids)
            return len(gone)

    # -- small JSON parts (history_state, snapshot and their updates: JsonParts) -----------

    def _part(self, session_id: str, kind: store.PartKind) -> dict[str, Any] | None:
        with self._lock:
            found = self._sessions.get(session_id)
            return getattr(found, kind) if found else None

    def _update_part(
        self, session_id: str, kind: store.PartKind, change: store.JsonChange
    ) -> dict[str, Any] | None:
        with self._lock:
            rec = self._get(session_id)
            updated = change(getattr(rec, kind))
            setattr(rec, kind, updated)
            return updated

    def append_call(self, session_id: str, call: Mapping[str, Any]) -> int:
        with self._lock:
            return _append_call(self._get(session_id), call)

    def calls(self, session_id: str) -> list[dict[str, Any]]:
        with self._lock:
            found = self._sessions.get(session_id)
            return [dict(c) for c in found.calls] if found else []

    def append_usage_event(self, session_id: str | None, event: Mapping[str, Any]) -> int:
        with self._lock:
            if session_id is not None:
                self._get(session_id)
            return self._append_usage(session_id, event)

    def _append_usage(self, session_id: str | None, event: Mapping[str, Any]) -> int:
        seq = self._usage_next
        self._usage_next += 1
        self._usage.append({**event, "seq": seq, "session_id": session_id})
        return seq

    def record_call(self, session_id: str, record: store.CallToRecord) -> store.RecordedCall:
        with self._lock:
            rec = self._get(session_id)
            # Everything that can fail runs before anything changes.
            _check_unused(rec, record.messages)

            def change_history(change: store.JsonChange) -> None:
                rec.history = change(rec.history)

            return record.write(
                change_history,
                lambda call: _append_call(rec, call),
                lambda messages: _append(rec, messages),
                lambda event: self._append_usage(session_id, event),
            )

    def usage_events(self, session_id: str | None = None) -> list[dict[str, Any]]:
        with self._lock:
            return [
                dict(e) for e in self._usage if session_id is None or e["session_id"] == session_id
            ]

    def delete_usage_events(self, session_id: str | None = None) -> int:
        with self._lock:
            kept = [
                e for e in self._usage if session_id is not None and e["session_id"] != session_id
            ]
            removed = len(self._usage) - len(kept)
            self._usage = kept
            return removed

    def get_embeddings(self, model: str, hashes: Iterable[str]) -> dict[str, bytes]:
        with self._lock:
            return {h: v for h in hashes if (v := self._embeddings.get((model, h))) is not None}

    def put_embeddings(self, model: str, vectors: Mapping[str, bytes]) -> None:
        with self._lock:
            for h, vec in vectors.items():
                self._embeddings.setdefault((model, h), bytes(vec))

    def skipped_records(self, session_id: str) -> tuple[store.DamagedRecord, ...]:
        return ()  # records in memory are never written out, so never damaged

    def damaged_records(self, session_id: str | None = None) -> list[store.DamagedRecord]:
        return []

    def remove_damaged(self, records: Sequence[store.DamagedRecord]) -> int:
        return 0

    def check_writable(self) -> None:
        """Memory always takes writes."""

    def close(self) -> None:
        """Nothing to release."""


def _repeated(values: Sequence[str]) -> set[str]:
    seen: set[str] = set()
    twice: set[str] = set()
    for value in values:
        (twice if value in seen else seen).add(value)
    return twice


def _check_unused(rec: _Records, messages: Sequence[store.MessageRecord]) -> None:
    """``DuplicateRecord`` if a message id or tool call id of ``messages`` is taken."""
    ids = [m.id for m in messages]
    calls = [c for m in messages for c in m.call_ids]
    clash = (set(ids) & rec.message_ids) or _repeated(ids)
    if clash:
        raise store.DuplicateRecord(f"message id {sorted(clash)[0]!r} is already used")
    clash = (set(calls) & rec.call_ids) or _repeated(calls)
    if clash:
        raise store.DuplicateRecord(f"tool call id {sorted(clash)[0]!r} is already used")


def _append(rec: _Records, messages: Sequence[store.MessageRecord]) -> tuple[int, ...]:
    """Append checked messages; their sequence numbers."""
    seqs = tuple(range(rec.next_seq, rec.next_seq + len(messages)))
    for seq, message in zip(seqs, messages, strict=True):
        rec.messages[seq] = replace(message, raw=dict(message.raw), seq=seq)
        rec.message_ids.add(message.id)
        rec.call_ids.update(message.call_ids)
    rec.next_seq += len(messages)
    rec.tokens += sum(m.tokens for m in messages)
    return seqs


def _append_call(rec: _Records, call: Mapping[str, Any]) -> int:
    seq = len(rec.calls)
    rec.calls.append({**call, "seq": seq})
    return seq
