"""The session-store protocol: a session as separate records, and its in-memory backend.

A session is not one document but parts that change on their own, each kept as its own
records so that an operation reads and writes only what it touches:

    header      id, agent, created_at, preset, refs removed by hand     (create once)
    items       the session's context items, in the order they came    (add / remove)
    turns       request contexts, in the order they were recorded      (append only)
    messages    history messages with store-assigned sequence numbers  (append; rare rewrite)
    history     summary, collapsed groups, clear point, message shape  (small JSON, atomic update)
    snapshot    the task snapshot                                      (small JSON, atomic update)
    calls       recorded proxied calls                                 (append only)
    usage       usage events, optionally without a session             (append only)

Contract every backend keeps (``tests/store`` checks it on each one):

- A write is durable when it returns (committed, and synced where the backend syncs).
- Sequence numbers (messages, turns, calls, usage events) are assigned by the store inside
  the write's transaction: concurrent writers to one session, from several threads or
  processes, never lose a record and all readers see one order. No operation reads and
  rewrites a whole session.
- ``update_*`` operations run ``change`` on the current value inside the write
  transaction; ``change`` must be pure (a backend may call it again after a conflict).
- Operations on an unknown session raise :class:`UnknownSession`, except the plain readers
  of a session's parts, which return empty results.
- A backend that cannot write (file deleted, read-only, server gone) raises
  :class:`StoreUnavailable` with a message naming where it stores and what to do.
- A stored turn, message or call that no longer reads (broken JSON, missing fields) is a
  :class:`DamagedRecord`: readers skip it, log it once and remember it
  (:meth:`SessionStore.skipped_records`), so one damaged record never costs the rest of its
  session; :meth:`SessionStore.damaged_records` finds every one and
  :meth:`SessionStore.remove_damaged` deletes them.

Errors::

    ContextCoreError
     └── StoreError             a store operation failed
          ├── UnknownSession     no session with that id
          ├── DuplicateRecord    a message id or tool call id is already used in the session
          └── StoreUnavailable   the backend cannot read or write (names the path or URL)
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from itertools import islice
from typing import Any, Literal, Protocol, runtime_checkable

from .errors import ContextCoreError, SessionError
from .items import ItemRef
from .sessions import RequestContext, RequestItem, Session, SessionItem

__all__ = [
    "DamageLog",
    "DamagedRecord",
    "DuplicateRecord",
    "JsonChange",
    "MemorySessionStore",
    "MessageRecord",
    "RecordKind",
    "SessionHeader",
    "SessionStore",
    "StoreError",
    "StoreUnavailable",
    "UnknownSession",
    "load_session",
]

JsonChange = Callable[[dict[str, Any] | None], dict[str, Any] | None]

log = logging.getLogger(__name__)


class StoreError(ContextCoreError):
    """A session-store operation failed."""


class UnknownSession(StoreError, SessionError):
    """No session with that id is stored."""


class DuplicateRecord(StoreError):
    """A message id or tool call id is already used in the session; nothing was stored."""


class StoreUnavailable(StoreError):
    """The backend cannot read or write; the message names the path or URL."""


RecordKind = Literal["turn", "message", "call"]


@dataclass(frozen=True)
class DamagedRecord:
    """A stored record that no longer reads: which one, and why."""

    session_id: str
    kind: RecordKind
    seq: int
    reason: str

    def describe(self) -> str:
        """``message 3 of session s_... (invalid JSON ...)``, for results, logs and ``check``."""
        return f"{self.kind} {self.seq} of session {self.session_id} ({self.reason})"


class DamageLog:
    """The damaged records a store's readers skipped, per session; each is logged once."""

    def __init__(self, where: str) -> None:
        self._where = where
        self._found: dict[str, dict[tuple[str, int], DamagedRecord]] = {}
        self._lock = threading.Lock()

    def found(self, record: DamagedRecord) -> None:
        """Remember ``record`` (skipped by a reader) and log it the first time."""
        key = (record.kind, record.seq)
        with self._lock:
            known = self._found.setdefault(record.session_id, {})
            if key in known:
                return
            known[key] = record
        log.warning(
            "session store %s: skipped a damaged record, %s; `context-broker repair` shows "
            "and removes such records",
            self._where,
            record.describe(),
        )

    def of(self, session_id: str) -> tuple[DamagedRecord, ...]:
        """The damaged records skipped in ``session_id``, in the order found."""
        with self._lock:
            return tuple(self._found.get(session_id, {}).values())

    def forget(self, records: Iterable[DamagedRecord]) -> None:
        """Drop records that were removed."""
        with self._lock:
            for r in records:
                self._found.get(r.session_id, {}).pop((r.kind, r.seq), None)


@dataclass(frozen=True)
class SessionHeader:
    """What a session is: written at creation; ``removed`` changes with remove/add item."""

    session_id: str
    agent: str | None
    created_at: str
    preset: str | None = None
    removed: tuple[ItemRef, ...] = ()


@dataclass(frozen=True)
class MessageRecord:
    """One stored history message: its validated wire dict (with ``id``) and what the store
    indexes. ``seq`` is assigned by the store (``-1`` on a record not yet stored); ``tokens``
    is the message's estimated size, given when it enters, which the store sums per session
    (see :meth:`SessionStore.message_totals`)."""

    id: str
    raw: Mapping[str, Any]
    call_ids: tuple[str, ...] = ()
    seq: int = -1
    tokens: int = 0


@runtime_checkable
class SessionStore(Protocol):
    """Keeps sessions as separate records; every write is durable when it returns."""

    # -- header and items -----------------------------------------------------------------

    def create_session(self, header: SessionHeader, items: Sequence[SessionItem]) -> None:
        """Store a new session with its first items; ``StoreError`` if the id exists."""
        ...

    def header(self, session_id: str) -> SessionHeader | None:
        """The session's header, or None if no such session is stored."""
        ...

    def list_session_ids(self) -> list[str]:
        """Every stored session id, oldest first."""
        ...

    def session_ids_page(self, offset: int, limit: int) -> list[str]:
        """One page of stored session ids, newest first: at most ``limit`` after skipping
        ``offset`` (reads only that page)."""
        ...

    def items(self, session_id: str) -> tuple[SessionItem, ...]:
        """The session's items in the order they were added."""
        ...

    def add_items(self, session_id: str, items: Sequence[SessionItem]) -> tuple[SessionItem, ...]:
        """Add the items not yet in the session (in order) and take their refs out of the
        header's ``removed``; returns the items actually added."""
        ...

    def remove_item(self, session_id: str, ref: ItemRef) -> bool:
        """Remove ``ref`` from the session's items and remember it in ``removed``; returns
        whether it was there."""
        ...

    # -- turns ------------------------------------------------------------------------------

    def append_turn(self, session_id: str, turn: RequestContext) -> int:
        """Record a request context; returns its sequence number (0, 1, 2, ...)."""
        ...

    def turn(self, session_id: str, request_id: str) -> RequestContext | None:
        """One recorded request context, or None."""
        ...

    def extend_turn(
        self, session_id: str, request_id: str, items: Sequence[RequestItem]
    ) -> RequestContext | None:
        """Add ``items`` to a recorded request context, atomically, except items it already
        holds; returns the turn as stored (None: no such turn)."""
        ...

    def turns(
        self, session_id: str, offset: int = 0, limit: int | None = None
    ) -> list[RequestContext]:
        """Recorded request contexts in order, from ``offset``, at most ``limit``."""
        ...

    def turn_count(self, session_id: str) -> int:
        """How many request contexts the session recorded."""
        ...

    def last_turn(self, session_id: str) -> RequestContext | None:
        """The latest recorded request context, or None."""
        ...

    # -- history messages -------------------------------------------------------------------

    def append_messages(
        self, session_id: str, messages: Sequence[MessageRecord]
    ) -> tuple[int, ...]:
        """Append validated messages in one transaction; returns their sequence numbers
        (consecutive, after every earlier one). ``DuplicateRecord`` if a message id or a
        tool call id is already used in the session (then nothing is stored)."""
        ...

    def messages(
        self, session_id: str, start: int = 0, end: int | None = None
    ) -> list[MessageRecord]:
        """Stored messages with ``start <= seq < end`` (``end`` None: to the last), in order;
        returned as stored, not validated again."""
        ...

    def message_count(self, session_id: str) -> int:
        """One past the highest message sequence number (0 for no messages)."""
        ...

    def message_totals(self, session_id: str) -> tuple[int, int]:
        """How many messages the session holds and the sum of their ``tokens``, from
        counters kept with the records (appends, rewrites and deletes keep them), so the
        cost does not grow with the history; ``(0, 0)`` for an unknown session."""
        ...

    def used_ids(
        self, session_id: str, message_ids: Iterable[str], call_ids: Iterable[str]
    ) -> tuple[frozenset[str], frozenset[str]]:
        """Which of ``message_ids`` and of tool ``call_ids`` the session already uses."""
        ...

    def replace_messages(self, session_id: str, messages: Sequence[MessageRecord]) -> None:
        """Rewrite stored messages in place, matched by ``seq`` (a history filter that
        compacts stored payloads); an unknown ``seq`` is a ``StoreError``."""
        ...

    def delete_messages(self, session_id: str, start: int, end: int | None = None) -> int:
        """Delete messages with ``start <= seq < end``; returns how many. Sequence numbers
        of the others do not change (later appends continue after the highest ever)."""
        ...

    # -- small JSON parts: history state and task snapshot ----------------------------------

    def history_state(self, session_id: str) -> dict[str, Any] | None:
        """The history state (summary, collapsed groups, clear point, shape) or None."""
        ...

    def update_history_state(self, session_id: str, change: JsonChange) -> dict[str, Any] | None:
        """Replace the history state by ``change(current)`` atomically; returns the result."""
        ...

    def snapshot(self, session_id: str) -> dict[str, Any] | None:
        """The task snapshot as JSON, or None."""
        ...

    def update_snapshot(self, session_id: str, change: JsonChange) -> dict[str, Any] | None:
        """Replace the task snapshot by ``change(current)`` atomically; returns the result."""
        ...

    # -- recorded calls and usage events ----------------------------------------------------

    def append_call(self, session_id: str, call: Mapping[str, Any]) -> int:
        """Record one proxied call (JSON); returns its sequence number in the session."""
        ...

    def calls(self, session_id: str) -> list[dict[str, Any]]:
        """Recorded calls in order, each with its ``seq``."""
        ...

    def append_usage_event(self, session_id: str | None, event: Mapping[str, Any]) -> int:
        """Record one usage event (JSON); returns its store-wide sequence number."""
        ...

    def usage_events(self, session_id: str | None = None) -> list[dict[str, Any]]:
        """Usage events in order (one session's, or all), each a copy of the event with
        ``seq`` (store-wide order) and ``session_id`` added."""
        ...

    def delete_usage_events(self, session_id: str | None = None) -> int:
        """Delete one session's usage events (None: every event, of every session and of
        none); returns how many were deleted. Durable when it returns, like a write; the
        other events keep their ``seq`` and later events still get higher ones."""
        ...

    # -- shared embedding cache -------------------------------------------------------------

    def get_embeddings(self, model: str, hashes: Iterable[str]) -> dict[str, bytes]:
        """Cached vectors (float32 bytes) by text hash, for the hashes found."""
        ...

    def put_embeddings(self, model: str, vectors: Mapping[str, bytes]) -> None:
        """Cache vectors (float32 bytes) by text hash; an existing key keeps its value."""
        ...

    # -- damaged records --------------------------------------------------------------------

    def skipped_records(self, session_id: str) -> tuple[DamagedRecord, ...]:
        """The session's damaged records this store's readers have skipped (since it opened,
        until they are removed); costs nothing, reads nothing."""
        ...

    def damaged_records(self, session_id: str | None = None) -> list[DamagedRecord]:
        """Every stored turn, message and call of the session (None: of every session) that
        no longer reads; reads them all, for ``check`` and ``repair``."""
        ...

    def remove_damaged(self, records: Sequence[DamagedRecord]) -> int:
        """Delete these damaged records (the others keep their sequence numbers; a message's
        removal moves the session's counters); returns how many were there."""
        ...

    def close(self) -> None:
        """Release connections; the store cannot be used afterwards."""
        ...


def load_session(store: SessionStore, session_id: str) -> Session | None:
    """A whole session (header, items and turns) for reports and exports; reads the turn
    log, so never call it on a request's path."""
    header = store.header(session_id)
    if header is None:
        return None
    return Session(
        session_id=header.session_id,
        agent=header.agent,
        created_at=header.created_at,
        items=store.items(session_id),
        turns=tuple(store.turns(session_id)),
        removed=header.removed,
        preset=header.preset,
    )


@dataclass
class _Records:
    header: SessionHeader
    items: list[SessionItem]
    turns: list[RequestContext] = field(default_factory=list)
    turn_index: dict[str, int] = field(default_factory=dict)
    messages: dict[int, MessageRecord] = field(default_factory=dict)
    next_seq: int = 0
    tokens: int = 0
    message_ids: set[str] = field(default_factory=set)
    call_ids: set[str] = field(default_factory=set)
    history: dict[str, Any] | None = None
    snapshot: dict[str, Any] | None = None
    calls: list[dict[str, Any]] = field(default_factory=list)


class MemorySessionStore:
    """Sessions in process memory, one lock for all; gone when the process ends."""

    def __init__(self) -> None:
        self._sessions: dict[str, _Records] = {}
        self._usage: list[dict[str, Any]] = []
        self._usage_next = 0  # sequence numbers are never reused, even after a delete
        self._embeddings: dict[tuple[str, str], bytes] = {}
        self._lock = threading.Lock()

    def _get(self, session_id: str) -> _Records:
        found = self._sessions.get(session_id)
        if found is None:
            raise UnknownSession(
                f"unknown session_id {session_id!r}; create one with create_session",
                field="session_id",
            )
        return found

    def create_session(self, header: SessionHeader, items: Sequence[SessionItem]) -> None:
        with self._lock:
            if header.session_id in self._sessions:
                raise StoreError(f"session {header.session_id!r} already exists")
            self._sessions[header.session_id] = _Records(header, list(items))

    def header(self, session_id: str) -> SessionHeader | None:
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
        self, session_id: str, messages: Sequence[MessageRecord]
    ) -> tuple[int, ...]:
        with self._lock:
            rec = self._get(session_id)
            ids = [m.id for m in messages]
            calls = [c for m in messages for c in m.call_ids]
            clash = (set(ids) & rec.message_ids) or _repeated(ids)
            if clash:
                raise DuplicateRecord(f"message id {sorted(clash)[0]!r} is already used")
            clash = (set(calls) & rec.call_ids) or _repeated(calls)
            if clash:
                raise DuplicateRecord(f"tool call id {sorted(clash)[0]!r} is already used")
            seqs = tuple(range(rec.next_seq, rec.next_seq + len(messages)))
            for seq, message in zip(seqs, messages, strict=True):
                rec.messages[seq] = replace(message, raw=dict(message.raw), seq=seq)
            rec.next_seq += len(messages)
            rec.tokens += sum(m.tokens for m in messages)
            rec.message_ids.update(ids)
            rec.call_ids.update(calls)
            return seqs

    def messages(
        self, session_id: str, start: int = 0, end: int | None = None
    ) -> list[MessageRecord]:
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

    def replace_messages(self, session_id: str, messages: Sequence[MessageRecord]) -> None:
        with self._lock:
            rec = self._get(session_id)
            missing = [m.seq for m in messages if m.seq not in rec.messages]
            if missing:
                raise StoreError(f"no stored message with seq {missing[0]!r} to replace")
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

    def history_state(self, session_id: str) -> dict[str, Any] | None:
        with self._lock:
            found = self._sessions.get(session_id)
            return found.history if found else None

    def update_history_state(self, session_id: str, change: JsonChange) -> dict[str, Any] | None:
        with self._lock:
            rec = self._get(session_id)
            rec.history = change(rec.history)
            return rec.history

    def snapshot(self, session_id: str) -> dict[str, Any] | None:
        with self._lock:
            found = self._sessions.get(session_id)
            return found.snapshot if found else None

    def update_snapshot(self, session_id: str, change: JsonChange) -> dict[str, Any] | None:
        with self._lock:
            rec = self._get(session_id)
            rec.snapshot = change(rec.snapshot)
            return rec.snapshot

    def append_call(self, session_id: str, call: Mapping[str, Any]) -> int:
        with self._lock:
            rec = self._get(session_id)
            seq = len(rec.calls)
            rec.calls.append({**call, "seq": seq})
            return seq

    def calls(self, session_id: str) -> list[dict[str, Any]]:
        with self._lock:
            found = self._sessions.get(session_id)
            return [dict(c) for c in found.calls] if found else []

    def append_usage_event(self, session_id: str | None, event: Mapping[str, Any]) -> int:
        with self._lock:
            if session_id is not None:
                self._get(session_id)
            seq = self._usage_next
            self._usage_next += 1
            self._usage.append({**event, "seq": seq, "session_id": session_id})
            return seq

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

    def skipped_records(self, session_id: str) -> tuple[DamagedRecord, ...]:
        return ()  # records in memory are never written out, so never damaged

    def damaged_records(self, session_id: str | None = None) -> list[DamagedRecord]:
        return []

    def remove_damaged(self, records: Sequence[DamagedRecord]) -> int:
        return 0

    def close(self) -> None:
        """Nothing to release."""


def _repeated(values: Sequence[str]) -> set[str]:
    seen: set[str] = set()
    twice: set[str] = set()
    for value in values:
        (twice if value in seen else seen).add(value)
    return twice
