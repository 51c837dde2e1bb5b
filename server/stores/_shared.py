"""What the SQLite, PostgreSQL and Redis stores write the same way: records as compact JSON,
item refs as keys, a batch's repeated ids, and the two small JSON parts of a session.

Each backend keeps its own transactions in its own file; the parts come from
:class:`JsonParts`, which needs only a backend's ``_part`` (read one) and ``_update_part``
(change one inside a write transaction).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, Literal

from contextcore.items import ItemRef
from contextcore.store import DuplicateRecord, JsonChange

__all__ = ["JsonParts", "PartKind", "dumps", "no_repeats", "ref_key"]

PartKind = Literal["history", "snapshot"]


def dumps(value: Any) -> str:
    """``value`` as the compact JSON every backend stores (UTF-8 kept, no spaces)."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def ref_key(ref: ItemRef) -> str:
    """An item ref as one text key (type, name and server), unique per item."""
    return dumps([ref.type, ref.name, ref.server])


def no_repeats(values: Sequence[str], what: str) -> None:
    """``DuplicateRecord`` naming the first of ``values`` given twice in one batch."""
    seen: set[str] = set()
    for value in values:
        if value in seen:
            raise DuplicateRecord(f"{what} {value!r} is already used")
        seen.add(value)


class JsonParts:
    """The history state and the task snapshot, for a backend that reads and changes one
    small JSON part of a session (``_part`` / ``_update_part``)."""

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
