"""The session-store protocol: a session as separate records (the in-memory backend is
:mod:`contextcore.memory_store`, the others are in ``server.stores``).

A session is not one document but parts that change on their own, each kept as its own
records so that an operation reads and writes only what it touches:

    header      id, agent, created_at, preset, profile, refs removed    (create once)
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
- Operations on an unknown session raise :class:`UnknownSession` (made by
  :func:`unknown_session`), except the plain readers of a session's parts, which return empty
  results.
- A proxied call is recorded by one write (:meth:`SessionStore.record_call`): its call record,
  its history messages and its usage event land together or not at all.
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
from dataclasses import dataclass
from typing import Any, Literal, Protocol, runtime_checkable

from .errors import ContextCoreError, SessionError
from .items import ItemRef
from .sessions import RequestContext, RequestItem, Session, SessionItem

__all__ = [
    "DamageLog",
    "DamagedRecord",
    "DuplicateRecord",
    "JsonChange",
    "MessageRecord",
    "RecordKind",
    "RecordedCall",
    "SessionHeader",
    "SessionStore",
    "StoreError",
    "StoreUnavailable",
    "UnknownSession",
    "load_session",
    "unknown_session",
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


def unknown_session(session_id: str) -> UnknownSession:
    """The error every backend raises for an operation on a session it does not store."""
    return UnknownSession(
        f"unknown session_id {session_id!r}; create one with create_session", field="session_id"
    )


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
    profile: str | None = None
    """The profile the session was created under (None: none, everything visible)."""


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


@dataclass(frozen=True)
class RecordedCall:
    """The sequence numbers :meth:`SessionStore.record_call` gave: the call record's (None:
    no call record was written), the history messages' and the usage event's (None: none)."""

    call: int | None
    messages: tuple[int, ...]
    usage: int | None


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

    def record_call(
        self,
        session_id: str,
        call: Mapping[str, Any] | None,
        messages: Sequence[MessageRecord] = (),
        usage: Mapping[str, Any] | None = None,
        history: JsonChange | None = None,
    ) -> RecordedCall:
        """Record one proxied call in one transaction, all or nothing: ``call`` as a call
        record, ``messages`` appended to the history (as :meth:`append_messages`, which
        raises ``DuplicateRecord`` the same way), ``usage`` as a usage event of the session,
        and ``history`` applied to the history state (as :meth:`update_history_state`); each
        part is optional."""
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

    # -- health ---------------------------------------------------------------------------

    def check_writable(self) -> None:
        """``StoreUnavailable`` (naming the path or server and what to do) if the store
        cannot take writes right now; for ``check`` and before serving."""
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
        profile=header.profile,
    )
