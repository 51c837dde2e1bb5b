"""The operations the SQLite and PostgreSQL stores run with the same SQL, written once on one
primitive: :data:`Run`, a backend's way to run one statement inside its open transaction.

Both schemas keep turns, messages, calls and usage events in tables of the same names and
columns (``session_id``, ``seq`` and the record's JSON), so extending a turn, finding and
removing damaged records and reading and deleting usage events are the same statements; the
SQL here uses ``?`` for a value and each backend's :data:`Run` says it its own way.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from contextcore.sessions import RequestContext, RequestItem
from contextcore.store import DamagedRecord, RecordKind

from ._records import damaged_in
from ._shared import dumps

__all__ = [
    "RECORD_TABLES",
    "Rows",
    "Run",
    "damaged_rows",
    "delete_usage_rows",
    "extend_turn_row",
    "remove_damaged_rows",
    "usage_rows",
]

RECORD_TABLES: tuple[tuple[RecordKind, str, str], ...] = (
    ("turn", "turns", "data"),
    ("message", "messages", "raw"),
    ("call", "calls", "data"),
)
"""The tables of records that can be damaged: kind, table, JSON column."""


class Rows(Protocol):
    """What running a statement gives back (a DB-API cursor of either driver)."""

    @property
    def rowcount(self) -> int: ...

    def fetchall(self) -> list[Any]: ...

    def fetchone(self) -> Any: ...


Run = Callable[[str, Sequence[Any]], Rows]
"""Run one statement (``?`` for each value) inside the open transaction."""


def extend_turn_row(
    run: Run, session_id: str, request_id: str, items: Sequence[RequestItem], lock: str = ""
) -> RequestContext | None:
    """Add ``items`` to the first turn recorded for ``request_id`` (its row read with
    ``lock``, e.g. ``" FOR UPDATE"``); the turn as stored, or None when there is none."""
    row = run(
        "SELECT seq, data FROM turns WHERE session_id = ? AND request_id = ? "
        f"ORDER BY seq LIMIT 1{lock}",
        (session_id, request_id),
    ).fetchone()
    if row is None:
        return None
    turn = RequestContext.from_dict(json.loads(row[1])).with_items(tuple(items))
    run(
        "UPDATE turns SET data = ? WHERE session_id = ? AND seq = ?",
        (dumps(turn.to_dict()), session_id, row[0]),
    )
    return turn


def damaged_rows(run: Run, session_id: str | None) -> list[DamagedRecord]:
    """Every stored turn, message and call of the session (None: of every session) that no
    longer reads."""
    where, args = ("WHERE session_id = ?", (session_id,)) if session_id else ("", ())
    found: list[DamagedRecord] = []
    for kind, table, column in RECORD_TABLES:
        rows = run(
            f"SELECT session_id, seq, {column} FROM {table} {where} ORDER BY session_id, seq",
            args,
        )
        found += damaged_in(kind, rows.fetchall())
    return found


def remove_damaged_rows(
    run: Run, records: Sequence[DamagedRecord], delete_messages: Callable[[str, int, int], int]
) -> int:
    """Delete damaged records (a message through ``delete_messages``, which moves the
    session's counters); how many were there."""
    removed = 0
    for r in records:
        if r.kind == "message":
            removed += delete_messages(r.session_id, r.seq, r.seq + 1)
            continue
        table = "turns" if r.kind == "turn" else "calls"
        removed += run(
            f"DELETE FROM {table} WHERE session_id = ? AND seq = ?", (r.session_id, r.seq)
        ).rowcount
    return removed


def usage_rows(run: Run, session_id: str | None) -> list[dict[str, Any]]:
    """Usage events in order (one session's, or all), each with ``seq`` and ``session_id``."""
    where, args = ("WHERE session_id = ? ", (session_id,)) if session_id is not None else ("", ())
    rows = run(f"SELECT seq, session_id, data FROM usage_events {where}ORDER BY seq", args)
    return [
        {**json.loads(data), "seq": int(seq), "session_id": sid}
        for seq, sid, data in rows.fetchall()
    ]


def delete_usage_rows(run: Run, session_id: str | None) -> int:
    """Delete one session's usage events (None: all of them); how many went."""
    if session_id is None:
        return run("DELETE FROM usage_events", ()).rowcount
    return run("DELETE FROM usage_events WHERE session_id = ?", (session_id,)).rowcount
