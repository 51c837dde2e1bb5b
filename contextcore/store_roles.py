"""The session store's roles: one small protocol for each kind of record a store keeps.

A backend gives one object for each role (:class:`~contextcore.store.SessionStore` holds
them); a caller that needs one kind of record depends on that role only (the shared
embedding cache takes an :class:`EmbeddingRecords`). The contract every role keeps is in
:mod:`contextcore.store`.

    SessionRecords     header and items                      (create once; add / remove)
    SessionParts       history state, task snapshot, code    (small JSON, atomic update)
    TurnLog            request contexts                      (append only)
    MessageLog         history messages and their counters   (append; rare rewrite)
    CallLog            recorded calls and usage events       (append only)
    EmbeddingRecords   the shared embedding cache            (insert once)
    DamageRecords      records that no longer read           (found by readers; removed)
    StoreHealth        taking writes, closing
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

from .items import ItemRef
from .sessions import RequestContext, RequestItem, SessionItem
from .store_records import (
    CallToRecord,
    DamagedRecord,
    JsonChange,
    MessageRecord,
    RecordedCall,
    SessionHeader,
)

__all__ = [
    "CallLog",
    "DamageRecords",
    "EmbeddingRecords",
    "MessageLog",
    "SessionParts",
    "SessionRecords",
    "StoreHealth",
    "TurnLog",
]


@runtime_checkable
class SessionRecords(Protocol):
    """A session's header and items: what a session is and what it holds."""

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


@runtime_checkable
class TurnLog(Protocol):
    """A session's recorded request contexts, in the order they were recorded."""

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


@runtime_checkable
class MessageLog(Protocol):
    """A session's history messages, with store-assigned sequence numbers and counters."""

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


@runtime_checkable
class SessionParts(Protocol):
    """A session's small JSON parts: the history state, the task snapshot and the code-mode
    state."""

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

    def code_state(self, session_id: str) -> dict[str, Any] | None:
        """The code-mode state (the variables runs keep, the latest runs) or None."""
        ...

    def update_code_state(self, session_id: str, change: JsonChange) -> dict[str, Any] | None:
        """Replace the code-mode state by ``change(current)`` atomically; returns the result."""
        ...


@runtime_checkable
class CallLog(Protocol):
    """Recorded proxied calls and usage events (a usage event may have no session)."""

    def append_call(self, session_id: str, call: Mapping[str, Any]) -> int:
        """Record one proxied call (JSON); returns its sequence number in the session."""
        ...

    def calls(self, session_id: str) -> list[dict[str, Any]]:
        """Recorded calls in order, each with its ``seq``."""
        ...

    def append_usage_event(self, session_id: str | None, event: Mapping[str, Any]) -> int:
        """Record one usage event (JSON); returns its store-wide sequence number."""
        ...

    def record_call(self, session_id: str, record: CallToRecord) -> RecordedCall:
        """Record one proxied call in one transaction, all or nothing: ``record.call`` as a
        call record, its ``messages`` appended to the history (as
        :meth:`MessageLog.append_messages`, which raises ``DuplicateRecord`` the same way),
        its ``usage`` as a usage event of the session, and its ``history`` applied to the
        history state (as :meth:`SessionParts.update_history_state`)."""
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


@runtime_checkable
class EmbeddingRecords(Protocol):
    """The shared embedding cache: float32 vectors by model and text hash."""

    def get_embeddings(self, model: str, hashes: Iterable[str]) -> dict[str, bytes]:
        """Cached vectors (float32 bytes) by text hash, for the hashes found."""
        ...

    def put_embeddings(self, model: str, vectors: Mapping[str, bytes]) -> None:
        """Cache vectors (float32 bytes) by text hash; an existing key keeps its value."""
        ...


@runtime_checkable
class DamageRecords(Protocol):
    """Stored turns, messages and calls that no longer read, and their removal."""

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


@runtime_checkable
class StoreHealth(Protocol):
    """Whether the store takes writes, and releasing it."""

    def check_writable(self) -> None:
        """``StoreUnavailable`` (naming the path or server and what to do) if the store
        cannot take writes right now; for ``check`` and before serving."""
        ...

    def close(self) -> None:
        """Release connections; the store cannot be used afterwards."""
        ...
