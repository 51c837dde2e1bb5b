"""The session store: a session as separate records, kept by one object per role (the roles'
protocols are in :mod:`contextcore.store_roles`, the records in :mod:`contextcore.store_records`;
the in-memory backend is :mod:`contextcore.memory_store`, the others are in ``server.stores``).

A session is not one document but parts that change on their own, each kept as its own
records so that an operation reads and writes only what it touches:

    header      id, agent, created_at, preset, profile, refs removed    (create once)
    items       the session's context items, in the order they came    (add / remove)
    turns       request contexts, in the order they were recorded      (append only)
    messages    history messages with store-assigned sequence numbers  (append; rare rewrite)
    history     summary, collapsed groups, clear point, message shape  (small JSON, atomic update)
    snapshot    the task snapshot                                      (small JSON, atomic update)
    code        code-mode state: variables runs keep, latest runs      (small JSON, atomic update)
    calls       recorded proxied calls                                 (append only)
    usage       usage events, optionally without a session             (append only)

A backend gives :class:`SessionStore` an object for each role, in the constructor's order;
one object may play every role (``SessionStore(*[records] * ROLES)``, which mypy checks
against each role). A caller holds the :class:`SessionStore` or, where it uses one kind of
record, only that role's object (``store.embeddings``).

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
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from .errors import ContextCoreError, SessionError
from .items import ItemRef
from .sessions import RequestContext, RequestItem, Session, SessionItem
from .store_records import (
    CallToRecord,
    DamagedRecord,
    JsonChange,
    MessageRecord,
    PartKind,
    RecordedCall,
    RecordKind,
    SessionHeader,
)
from .store_roles import (
    CallLog,
    DamageRecords,
    EmbeddingRecords,
    MessageLog,
    SessionParts,
    SessionRecords,
    StoreHealth,
    TurnLog,
)

__all__ = [
    "ROLES",
    "CallToRecord",
    "DamageLog",
    "DamagedRecord",
    "DuplicateRecord",
    "JsonChange",
    "JsonParts",
    "MessageRecord",
    "PartKind",
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

log = logging.getLogger(__name__)

ROLES = 8
"""How many role objects make a :class:`SessionStore` (the order of its constructor)."""


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


class JsonParts:
    """The :class:`~contextcore.store_roles.SessionParts` role, written once for every
    backend on two operations of its own: ``_part`` (read one small JSON part of a session)
    and ``_update_part`` (change one inside a write transaction)."""

    def _part(self, session_id: str, kind: PartKind) -> dict[str, Any] | None:
        raise NotImplementedError

    def _update_part(
        self, session_id: str, kind: PartKind, change: JsonChange
    ) -> dict[str, Any] | None:
        raise NotImplementedError

    def history_state(self, session_id: str) -> dict[str, Any] | None:
        """The history state (summary, collapsed groups, clear point, shape) or None."""
        return self._part(session_id, "history")

    def update_history_state(self, session_id: str, change: JsonChange) -> dict[str, Any] | None:
        """Replace the history state by ``change(current)`` atomically; returns the result."""
        return self._update_part(session_id, "history", change)

    def snapshot(self, session_id: str) -> dict[str, Any] | None:
        """The task snapshot as JSON, or None."""
        return self._part(session_id, "snapshot")

    def update_snapshot(self, session_id: str, change: JsonChange) -> dict[str, Any] | None:
        """Replace the task snapshot by ``change(current)`` atomically; returns the result."""
        return self._update_part(session_id, "snapshot", change)

    def code_state(self, session_id: str) -> dict[str, Any] | None:
        """The code-mode state (the variables runs keep, the latest runs) or None."""
        return self._part(session_id, "code")

    def update_code_state(self, session_id: str, change: JsonChange) -> dict[str, Any] | None:
        """Replace the code-mode state by ``change(current)`` atomically; returns the result."""
        return self._update_part(session_id, "code", change)


class SessionStore:
    """A whole session store: one backend's object for each role, and the roles' operations
    for a caller that uses several (each is documented on its role in
    :mod:`contextcore.store_roles`). A caller that uses one role takes that object
    (``store.embeddings``) instead."""

    def __init__(
        self,
        sessions: SessionRecords,
        parts: SessionParts,
        turns: TurnLog,
        messages: MessageLog,
        calls: CallLog,
        embeddings: EmbeddingRecords,
        damage: DamageRecords,
        health: StoreHealth,
    ) -> None:
        self.session_records = sessions
        self.parts = parts
        self.turn_log = turns
        self.message_log = messages
        self.call_log = calls
        self.embeddings = embeddings
        self.damage = damage
        self.health = health

    # -- header and items (SessionRecords) ---------------------------------------------------

    def create_session(self, header: SessionHeader, items: Sequence[SessionItem]) -> None:
        self.session_records.create_session(header, items)

    def header(self, session_id: str) -> SessionHeader | None:
        return self.session_records.header(session_id)

    def list_session_ids(self) -> list[str]:
        return self.session_records.list_session_ids()

    def session_ids_page(self, offset: int, limit: int) -> list[str]:
        return self.session_records.session_ids_page(offset, limit)

    def items(self, session_id: str) -> tuple[SessionItem, ...]:
        return self.session_records.items(session_id)

    def add_items(self, session_id: str, items: Sequence[SessionItem]) -> tuple[SessionItem, ...]:
        return self.session_records.add_items(session_id, items)

    def remove_item(self, session_id: str, ref: ItemRef) -> bool:
        return self.session_records.remove_item(session_id, ref)

    # -- history state and task snapshot (SessionParts) ------------------------------------

    def history_state(self, session_id: str) -> dict[str, Any] | None:
        return self.parts.history_state(session_id)

    def update_history_state(self, session_id: str, change: JsonChange) -> dict[str, Any] | None:
        return self.parts.update_history_state(session_id, change)

    def snapshot(self, session_id: str) -> dict[str, Any] | None:
        return self.parts.snapshot(session_id)

    def update_snapshot(self, session_id: str, change: JsonChange) -> dict[str, Any] | None:
        return self.parts.update_snapshot(session_id, change)

    def code_state(self, session_id: str) -> dict[str, Any] | None:
        return self.parts.code_state(session_id)

    def update_code_state(self, session_id: str, change: JsonChange) -> dict[str, Any] | None:
        return self.parts.update_code_state(session_id, change)

    # -- turns (TurnLog) --------------------------------------------------------------------

    def append_turn(self, session_id: str, turn: RequestContext) -> int:
        return self.turn_log.append_turn(session_id, turn)

    def turn(self, session_id: str, request_id: str) -> RequestContext | None:
        return self.turn_log.turn(session_id, request_id)

    def extend_turn(
        self, session_id: str, request_id: str, items: Sequence[RequestItem]
    ) -> RequestContext | None:
        return self.turn_log.extend_turn(session_id, request_id, items)

    def turns(
        self, session_id: str, offset: int = 0, limit: int | None = None
    ) -> list[RequestContext]:
        return self.turn_log.turns(session_id, offset, limit)

    def turn_count(self, session_id: str) -> int:
        return self.turn_log.turn_count(session_id)

    def last_turn(self, session_id: str) -> RequestContext | None:
        return self.turn_log.last_turn(session_id)

    # -- history messages (MessageLog) ------------------------------------------------------

    def append_messages(
        self, session_id: str, messages: Sequence[MessageRecord]
    ) -> tuple[int, ...]:
        return self.message_log.append_messages(session_id, messages)

    def messages(
        self, session_id: str, start: int = 0, end: int | None = None
    ) -> list[MessageRecord]:
        return self.message_log.messages(session_id, start, end)

    def message_count(self, session_id: str) -> int:
        return self.message_log.message_count(session_id)

    def message_totals(self, session_id: str) -> tuple[int, int]:
        return self.message_log.message_totals(session_id)

    def used_ids(
        self, session_id: str, message_ids: Iterable[str], call_ids: Iterable[str]
    ) -> tuple[frozenset[str], frozenset[str]]:
        return self.message_log.used_ids(session_id, message_ids, call_ids)

    def replace_messages(self, session_id: str, messages: Sequence[MessageRecord]) -> None:
        self.message_log.replace_messages(session_id, messages)

    def delete_messages(self, session_id: str, start: int, end: int | None = None) -> int:
        return self.message_log.delete_messages(session_id, start, end)

    # -- recorded calls and usage events (CallLog) -------------------------------------------

    def append_call(self, session_id: str, call: Mapping[str, Any]) -> int:
        return self.call_log.append_call(session_id, call)

    def calls(self, session_id: str) -> list[dict[str, Any]]:
        return self.call_log.calls(session_id)

    def append_usage_event(self, session_id: str | None, event: Mapping[str, Any]) -> int:
        return self.call_log.append_usage_event(session_id, event)

    def record_call(
        self,
        session_id: str,
        call: Mapping[str, Any] | None,
        messages: Sequence[MessageRecord] = (),
        usage: Mapping[str, Any] | None = None,
        history: JsonChange | None = None,
    ) -> RecordedCall:
        """Record one proxied call in one transaction, all or nothing; each part is
        optional (see :meth:`~contextcore.store_roles.CallLog.record_call`)."""
        record = CallToRecord(call, messages, usage, history)
        return self.call_log.record_call(session_id, record)

    def usage_events(self, session_id: str | None = None) -> list[dict[str, Any]]:
        return self.call_log.usage_events(session_id)

    def delete_usage_events(self, session_id: str | None = None) -> int:
        return self.call_log.delete_usage_events(session_id)

    # -- shared embedding cache (EmbeddingRecords) ------------------------------------------

    def get_embeddings(self, model: str, hashes: Iterable[str]) -> dict[str, bytes]:
        return self.embeddings.get_embeddings(model, hashes)

    def put_embeddings(self, model: str, vectors: Mapping[str, bytes]) -> None:
        self.embeddings.put_embeddings(model, vectors)

    # -- damaged records (DamageRecords) ----------------------------------------------------

    def skipped_records(self, session_id: str) -> tuple[DamagedRecord, ...]:
        return self.damage.skipped_records(session_id)

    def damaged_records(self, session_id: str | None = None) -> list[DamagedRecord]:
        return self.damage.damaged_records(session_id)

    def remove_damaged(self, records: Sequence[DamagedRecord]) -> int:
        return self.damage.remove_damaged(records)

    # -- health (StoreHealth) ---------------------------------------------------------------

    def check_writable(self) -> None:
        self.health.check_writable()

    def close(self) -> None:
        self.health.close()


def load_session(
    store: SessionStore, session_id: str, *, with_turns: bool = True
) -> Session | None:
    """A whole session (header, items and, ``with_turns``, turns) for reports and exports;
    reads the turn log, so never call it on a request's path with turns."""
    header = store.header(session_id)
    if header is None:
        return None
    return Session(
        session_id=header.session_id,
        agent=header.agent,
        created_at=header.created_at,
        items=store.items(session_id),
        turns=tuple(store.turns(session_id)) if with_turns else (),
        removed=header.removed,
        preset=header.preset,
        profile=header.profile,
    )
