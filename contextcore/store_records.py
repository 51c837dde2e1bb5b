"""The records a session store keeps and returns: a session's header, a history message, the
sequence numbers of a recorded call, a damaged record, and a JSON part's change.

They are plain frozen dataclasses shared by the store's role protocols
(:mod:`contextcore.store_roles`), the backends and their callers; :mod:`contextcore.store`
exports them all.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from .items import ItemRef

__all__ = [
    "CallToRecord",
    "DamagedRecord",
    "JsonChange",
    "MessageRecord",
    "PartKind",
    "RecordKind",
    "RecordedCall",
    "SessionHeader",
]

JsonChange = Callable[[dict[str, Any] | None], dict[str, Any] | None]

RecordKind = Literal["turn", "message", "call"]

PartKind = Literal["history", "snapshot", "code"]
"""A session's small JSON parts: the history state, the task snapshot and the code-mode
state (the variables its runs keep, and its runs)."""


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
    (see :meth:`~contextcore.store_roles.MessageLog.message_totals`)."""

    id: str
    raw: Mapping[str, Any]
    call_ids: tuple[str, ...] = ()
    seq: int = -1
    tokens: int = 0


@dataclass(frozen=True)
class RecordedCall:
    """The sequence numbers a recorded call's parts were given: the call record's (None: no
    call record was written), the history messages' and the usage event's (None: none)."""

    call: int | None
    messages: tuple[int, ...]
    usage: int | None


@dataclass(frozen=True)
class CallToRecord:
    """What recording one proxied call writes, all in one transaction, each part optional:
    the call record, history messages, a usage event of the session, and a change of the
    history state."""

    call: Mapping[str, Any] | None
    messages: Sequence[MessageRecord] = ()
    usage: Mapping[str, Any] | None = None
    history: JsonChange | None = None

    def write(
        self,
        history: Callable[[JsonChange], object],
        call: Callable[[Mapping[str, Any]], int],
        messages: Callable[[Sequence[MessageRecord]], tuple[int, ...]],
        usage: Callable[[Mapping[str, Any]], int],
    ) -> RecordedCall:
        """Write each part given with a backend's writer for it, inside the backend's open
        transaction: the history state's change first, then the call record, the messages
        and the usage event; their sequence numbers."""
        if self.history is not None:
            history(self.history)
        return RecordedCall(
            None if self.call is None else call(self.call),
            messages(self.messages) if self.messages else (),
            None if self.usage is None else usage(self.usage),
        )
