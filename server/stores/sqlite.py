"""The session store in one SQLite file: a table per session part, durable on every write.

Each part of a session (header, items, turns, messages, small JSON parts, calls) is its own
table, so an operation touches only the rows it needs and its cost does not grow with the
session's age. The database runs in WAL mode with ``synchronous=FULL``: a commit is on disk
when the call returns, even across a power loss. Writes run in ``BEGIN IMMEDIATE``
transactions, which SQLite serialises across threads and processes, and sequence numbers
are assigned inside them: concurrent writers to one file never lose a record and keep one
order.

A file that exists but is empty, truncated or not a database is refused when the store
opens, naming the path; it is never treated as a new store. A file deleted, replaced or made
read-only while the store is open makes every write fail with :class:`StoreUnavailable`
(SQLite would otherwise keep writing to the deleted inode, or through the open descriptor).

A file of the previous format (one ``sessions`` table of JSON documents) is migrated on
open, in one transaction, into the new tables; the old table is kept as ``sessions_v1``.
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from functools import partial
from pathlib import Path
from typing import Any

from contextcore import store
from contextcore.items import ItemRef, parse_item_type
from contextcore.sessions import RequestContext, RequestItem, SessionItem

from ._records import call_of, decoded, message_of, readable, turn_of
from ._shared import dumps
from ._sql import (
    damaged_rows,
    delete_usage_rows,
    extend_turn_row,
    remove_damaged_rows,
    usage_rows,
)
from ._sqlite_schema import SCHEMA_VERSION, open_checked

__all__ = ["SqliteSessionStore"]


def _ref_row(ref: ItemRef) -> tuple[str, str, str]:
    return ref.type, ref.name, ref.server or ""


def _ref(kind: str, name: str, server: str) -> ItemRef:
    return ItemRef(parse_item_type(kind), name, server or None)


def _refs_json(refs: Iterable[ItemRef]) -> str:
    return dumps([r.to_dict() for r in refs])


def _refs(text: str) -> tuple[ItemRef, ...]:
    return tuple(_ref(r["type"], r["name"], r.get("server") or "") for r in json.loads(text))


class SqliteSessionStore(store.SessionStore):
    """Sessions in a SQLite file, one table per part; every write commits before it returns."""

    def __init__(self, path: Path) -> None:
        self._records = records = _SqliteRecords(path)
        super().__init__(*[records] * store.ROLES)  # one object plays every role
        self.path = path
        self._db = records._db

    def describe(self) -> str:
        """Where the store keeps its data, for messages and ``check``."""
        return self._records.describe()


class _SqliteRecords(store.JsonParts):
    """Every role's records of one SQLite file, on one connection guarded by a lock."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._db = open_checked(path)
        self._identity = _identity(path)
        self._damage = store.DamageLog(str(path))
        # One connection guarded by a lock: sqlite3 objects may cross threads when
        # check_same_thread is off, as long as calls never overlap.
        self._lock = threading.Lock()

    # -- transactions -------------------------------------------------------------------

    def _unavailable(self, why: str) -> store.StoreUnavailable:
        return store.StoreUnavailable(
            f"the session database {str(self.path)!r} {why}; nothing was stored. Restore the "
            "file (or its permissions) and restart the broker, or point persistence.path at "
            "a new file"
        )

    def _write_failed(self, exc: sqlite3.Error) -> store.StoreUnavailable:
        if getattr(exc, "sqlite_errorcode", None) == sqlite3.SQLITE_FULL:
            # Nothing to restore and no restart needed: the next write after room is made
            # goes through.
            return store.StoreUnavailable(
                f"the disk holding the session database {str(self.path)!r} is full ({exc}); "
                "nothing was stored and everything stored before is kept. Free space on that "
                "disk: writes go through again as soon as there is room, without a restart"
            )
        return self._unavailable(f"cannot be written ({exc})")

    def check_writable(self) -> None:
        """``StoreUnavailable`` if the file was deleted, replaced or made read-only."""
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            raise self._unavailable("was deleted while the broker was running") from None
        except OSError as exc:
            raise self._unavailable(f"cannot be checked ({exc})") from exc
        if (st.st_dev, st.st_ino) != self._identity:
            raise self._unavailable("was replaced by another file while the broker was running")
        if not st.st_mode & 0o222:
            raise self._unavailable("was made read-only")

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            self.check_writable()
            try:
                self._db.execute("BEGIN IMMEDIATE")
            except sqlite3.Error as exc:
                raise self._write_failed(exc) from exc
            try:
                yield self._db
                self._db.execute("COMMIT")
            except BaseException as exc:
                with suppress(sqlite3.Error):
                    self._db.execute("ROLLBACK")
                if isinstance(exc, sqlite3.IntegrityError):
                    raise store.DuplicateRecord(
                        f"a message id or tool call id is already used in the session ({exc})"
                    ) from exc
                if isinstance(exc, sqlite3.Error):
                    raise self._write_failed(exc) from exc
                raise

    @contextmanager
    def _read(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            try:
                yield self._db
            except sqlite3.Error as exc:
                raise store.StoreUnavailable(
                    f"the session database {str(self.path)!r} cannot be read ({exc}); check the "
                    "file, or restore it from a backup"
                ) from exc

    # -- header and items ---------------------------------------------------------------

    def create_session(self, header: store.SessionHeader, items: Sequence[SessionItem]) -> None:
        with self._write() as db:
            exists = db.execute(
                "SELECT 1 FROM session_headers WHERE session_id = ?", (header.session_id,)
            ).fetchone()
            if exists:
                raise store.StoreError(f"session {header.session_id!r} already exists")
            _insert_header(db, header)
            _insert_items(db, header.session_id, items, 0)

    def header(self, session_id: str) -> store.SessionHeader | None:
        with self._read() as db:
            row = db.execute(
                "SELECT agent, created_at, preset, removed, profile FROM session_headers "
                "WHERE session_id = ?",
                (session_id,),
            ).fetchone()
        if row is None:
            return None
        return store.SessionHeader(session_id, row[0], row[1], row[2], _refs(row[3]), row[4])

    def list_session_ids(self) -> list[str]:
        with self._read() as db:
            rows = db.execute("SELECT session_id FROM session_headers ORDER BY ord").fetchall()
        return [r[0] for r in rows]

    def session_ids_page(self, offset: int, limit: int) -> list[str]:
        with self._read() as db:
            rows = db.execute(
                "SELECT session_id FROM session_headers ORDER BY ord DESC LIMIT ? OFFSET ?",
                (limit, offset),
            ).fetchall()
        return [r[0] for r in rows]

    def items(self, session_id: str) -> tuple[SessionItem, ...]:
        with self._read() as db:
            rows = db.execute(
                "SELECT type, name, server, include_mode FROM session_items "
                "WHERE session_id = ? ORDER BY pos",
                (session_id,),
            ).fetchall()
        return tuple(SessionItem(_ref(t, n, s), m) for t, n, s, m in rows)

    def add_items(self, session_id: str, items: Sequence[SessionItem]) -> tuple[SessionItem, ...]:
        with self._write() as db:
            _require(db, session_id)
            known = {
                _ref(t, n, s)
                for t, n, s in db.execute(
                    "SELECT type, name, server FROM session_items WHERE session_id = ?",
                    (session_id,),
                )
            }
            added: list[SessionItem] = []
            for item in items:
                if item.ref not in known:
                    known.add(item.ref)
                    added.append(item)
            if not added:
                return ()
            pos = db.execute(
                "SELECT COALESCE(MAX(pos) + 1, 0) FROM session_items WHERE session_id = ?",
                (session_id,),
            ).fetchone()[0]
            _insert_items(db, session_id, added, pos)
            refs = {i.ref for i in added}
            removed = _removed(db, session_id)
            if refs & set(removed):
                _set_removed(db, session_id, [r for r in removed if r not in refs])
            return tuple(added)

    def remove_item(self, session_id: str, ref: ItemRef) -> bool:
        with self._write() as db:
            _require(db, session_id)
            gone = db.execute(
                "DELETE FROM session_items WHERE session_id = ? AND type = ? AND name = ? "
                "AND server = ?",
                (session_id, *_ref_row(ref)),
            ).rowcount
            removed = _removed(db, session_id)
            if ref not in removed:
                _set_removed(db, session_id, [*removed, ref])
            return gone > 0

    # -- turns --------------------------------------------------------------------------

    def append_turn(self, session_id: str, turn: RequestContext) -> int:
        data = dumps(turn.to_dict())
        with self._write() as db:
            seq = _next(db, session_id, "next_turn", 1)
            db.execute(
                "INSERT INTO turns (session_id, seq, request_id, data) VALUES (?, ?, ?, ?)",
                (session_id, seq, turn.request_id, data),
            )
        return seq

    def turn(self, session_id: str, request_id: str) -> RequestContext | None:
        with self._read() as db:
            row = db.execute(
                "SELECT seq, data FROM turns WHERE session_id = ? AND request_id = ? "
                "ORDER BY seq LIMIT 1",
                (session_id, request_id),
            ).fetchone()
        return self._turn(session_id, row)

    def _turn(self, session_id: str, row: tuple[int, str] | None) -> RequestContext | None:
        return decoded(self._damage, session_id, "turn", *row, turn_of) if row else None

    def extend_turn(
        self, session_id: str, request_id: str, items: Sequence[RequestItem]
    ) -> RequestContext | None:
        with self._write() as db:
            return extend_turn_row(db.execute, session_id, request_id, items)

    def turns(
        self, session_id: str, offset: int = 0, limit: int | None = None
    ) -> list[RequestContext]:
        with self._read() as db:
            rows = db.execute(
                "SELECT seq, data FROM turns WHERE session_id = ? ORDER BY seq LIMIT ? OFFSET ?",
                (session_id, -1 if limit is None else limit, offset),
            ).fetchall()
        return [t for _, t in readable(self._damage, session_id, "turn", rows, turn_of)]

    def turn_count(self, session_id: str) -> int:
        with self._read() as db:
            row = db.execute(
                "SELECT COUNT(*) FROM turns WHERE session_id = ?", (session_id,)
            ).fetchone()
        return int(row[0])

    def last_turn(self, session_id: str) -> RequestContext | None:
        with self._read() as db:
            row = db.execute(
                "SELECT seq, data FROM turns WHERE session_id = ? ORDER BY seq DESC LIMIT 1",
                (session_id,),
            ).fetchone()
        return self._turn(session_id, row)

    # -- history messages ---------------------------------------------------------------

    def append_messages(
        self, session_id: str, messages: Sequence[store.MessageRecord]
    ) -> tuple[int, ...]:
        with self._write() as db:
            return _insert_messages(db, session_id, messages)

    def messages(
        self, session_id: str, start: int = 0, end: int | None = None
    ) -> list[store.MessageRecord]:
        with self._read() as db:
            rows = db.execute(
                "SELECT seq, message_id, raw, tokens FROM messages WHERE session_id = ? "
                "AND seq >= ? AND seq < ? ORDER BY seq",
                (session_id, start, 2**62 if end is None else end),
            ).fetchall()
            calls: dict[int, list[str]] = {}
            if rows:
                for seq, call_id in db.execute(
                    "SELECT seq, call_id FROM message_calls WHERE session_id = ? AND seq >= ? "
                    "AND seq <= ?",
                    (session_id, rows[0][0], rows[-1][0]),
                ):
                    calls.setdefault(seq, []).append(call_id)
        out = []
        for seq, mid, raw, tokens in rows:
            data = decoded(self._damage, session_id, "message", seq, raw, message_of)
            if data is not None:
                out.append(store.MessageRecord(mid, data, tuple(calls.get(seq, ())), seq, tokens))
        return out

    def message_count(self, session_id: str) -> int:
        with self._read() as db:
            row = db.execute(
                "SELECT next_message FROM session_headers WHERE session_id = ?", (session_id,)
            ).fetchone()
        return int(row[0]) if row else 0

    def message_totals(self, session_id: str) -> tuple[int, int]:
        with self._read() as db:
            row = db.execute(
                "SELECT message_total, message_tokens FROM session_headers WHERE session_id = ?",
                (session_id,),
            ).fetchone()
        return (int(row[0]), int(row[1])) if row else (0, 0)

    def used_ids(
        self, session_id: str, message_ids: Iterable[str], call_ids: Iterable[str]
    ) -> tuple[frozenset[str], frozenset[str]]:
        ids, calls = list(dict.fromkeys(message_ids)), list(dict.fromkeys(call_ids))
        with self._read() as db:
            found = _in_chunks(
                db,
                "SELECT message_id FROM messages WHERE session_id = ? AND message_id",
                session_id,
                ids,
            )
            found_calls = _in_chunks(
                db,
                "SELECT call_id FROM message_calls WHERE session_id = ? AND call_id",
                session_id,
                calls,
            )
        return frozenset(r[0] for r in found), frozenset(r[0] for r in found_calls)

    def replace_messages(self, session_id: str, messages: Sequence[store.MessageRecord]) -> None:
        with self._write() as db:
            _require(db, session_id)
            for m in messages:
                old = db.execute(
                    "SELECT tokens FROM messages WHERE session_id = ? AND seq = ?",
                    (session_id, m.seq),
                ).fetchone()
                if old is None:
                    raise store.StoreError(f"no stored message with seq {m.seq!r} to replace")
                db.execute(
                    "UPDATE messages SET message_id = ?, raw = ?, tokens = ? "
                    "WHERE session_id = ? AND seq = ?",
                    (m.id, dumps(dict(m.raw)), m.tokens, session_id, m.seq),
                )
                _count(db, session_id, 0, m.tokens - old[0])
                db.execute(
                    "DELETE FROM message_calls WHERE session_id = ? AND seq = ?",
                    (session_id, m.seq),
                )
                db.executemany(
                    "INSERT INTO message_calls (session_id, call_id, seq) VALUES (?, ?, ?)",
                    [(session_id, c, m.seq) for c in m.call_ids],
                )

    def delete_messages(self, session_id: str, start: int, end: int | None = None) -> int:
        stop = 2**62 if end is None else end
        with self._write() as db:
            _require(db, session_id)
            return _delete_messages(db, session_id, start, stop)

    # -- small JSON parts (history_state, snapshot and their updates: JsonParts) -----------

    def _part(self, session_id: str, part: store.PartKind) -> dict[str, Any] | None:
        with self._read() as db:
            row = db.execute(
                "SELECT data FROM session_parts WHERE session_id = ? AND part = ?",
                (session_id, part),
            ).fetchone()
        return json.loads(row[0]) if row else None

    def _update_part(
        self, session_id: str, part: store.PartKind, change: store.JsonChange
    ) -> dict[str, Any] | None:
        with self._write() as db:
            _require(db, session_id)
            return _change_part(db, session_id, part, change)

    # -- calls and usage events ---------------------------------------------------------

    def append_call(self, session_id: str, call: Mapping[str, Any]) -> int:
        with self._write() as db:
            return _insert_call(db, session_id, call)

    def calls(self, session_id: str) -> list[dict[str, Any]]:
        with self._read() as db:
            rows = db.execute(
                "SELECT seq, data FROM calls WHERE session_id = ? ORDER BY seq", (session_id,)
            ).fetchall()
        return [
            {**c, "seq": seq}
            for seq, c in readable(self._damage, session_id, "call", rows, call_of)
        ]

    def append_usage_event(self, session_id: str | None, event: Mapping[str, Any]) -> int:
        with self._write() as db:
            if session_id is not None:
                _require(db, session_id)
            return _insert_usage(db, session_id, event)

    def record_call(self, session_id: str, record: store.CallToRecord) -> store.RecordedCall:
        with self._write() as db:  # one transaction: a failure anywhere stores nothing
            _require(db, session_id)
            return record.write(
                partial(_change_part, db, session_id, "history"),
                partial(_insert_call, db, session_id),
                partial(_insert_messages, db, session_id),
                partial(_insert_usage, db, session_id),
            )

    def usage_events(self, session_id: str | None = None) -> list[dict[str, Any]]:
        with self._read() as db:
            return usage_rows(db.execute, session_id)

    def delete_usage_events(self, session_id: str | None = None) -> int:
        with self._write() as db:
            return delete_usage_rows(db.execute, session_id)

    # -- shared embedding cache ---------------------------------------------------------

    def get_embeddings(self, model: str, hashes: Iterable[str]) -> dict[str, bytes]:
        keys = list(dict.fromkeys(hashes))
        with self._read() as db:
            found = _in_chunks(
                db, "SELECT hash, vector FROM embeddings WHERE model = ? AND hash", model, keys
            )
        return {h: bytes(v) for h, v in found}

    def put_embeddings(self, model: str, vectors: Mapping[str, bytes]) -> None:
        with self._write() as db:
            db.executemany(
                "INSERT OR IGNORE INTO embeddings (model, hash, vector) VALUES (?, ?, ?)",
                [(model, h, bytes(v)) for h, v in vectors.items()],
            )

    # -- damaged records -------------------------------------------------------------------

    def skipped_records(self, session_id: str) -> tuple[store.DamagedRecord, ...]:
        return self._damage.of(session_id)

    def damaged_records(self, session_id: str | None = None) -> list[store.DamagedRecord]:
        with self._read() as db:
            return damaged_rows(db.execute, session_id)

    def remove_damaged(self, records: Sequence[store.DamagedRecord]) -> int:
        with self._write() as db:
            removed = remove_damaged_rows(db.execute, records, partial(_delete_messages, db))
        self._damage.forget(records)
        return removed

    def close(self) -> None:
        """Close the database; the store cannot be used afterwards."""
        with self._lock:
            self._db.close()

    def describe(self) -> str:
        """Where the store keeps its data, for messages and ``check``."""
        return f"sqlite at {self.path} (schema version {SCHEMA_VERSION})"


def _identity(path: Path) -> tuple[int, int]:
    st = os.stat(path)
    return st.st_dev, st.st_ino


def _require(db: sqlite3.Connection, session_id: str) -> None:
    row = db.execute("SELECT 1 FROM session_headers WHERE session_id = ?", (session_id,))
    if row.fetchone() is None:
        raise store.unknown_session(session_id)


def _next(db: sqlite3.Connection, session_id: str, counter: str, n: int) -> int:
    """Reserve ``n`` sequence numbers of ``counter`` inside the open transaction."""
    row = db.execute(
        f"SELECT {counter} FROM session_headers WHERE session_id = ?", (session_id,)
    ).fetchone()
    if row is None:
        raise store.unknown_session(session_id)
    db.execute(
        f"UPDATE session_headers SET {counter} = {counter} + ? WHERE session_id = ?",
        (n, session_id),
    )
    return int(row[0])


def _insert_messages(
    db: sqlite3.Connection, session_id: str, messages: Sequence[store.MessageRecord]
) -> tuple[int, ...]:
    """Append messages (inside the open transaction); their sequence numbers. A taken id
    fails the transaction's commit as an ``IntegrityError``."""
    first = _next(db, session_id, "next_message", len(messages))
    seqs = tuple(range(first, first + len(messages)))
    for seq, m in zip(seqs, messages, strict=True):
        db.execute(
            "INSERT INTO messages (session_id, seq, message_id, raw, tokens) "
            "VALUES (?, ?, ?, ?, ?)",
            (session_id, seq, m.id, dumps(dict(m.raw)), m.tokens),
        )
        db.executemany(
            "INSERT INTO message_calls (session_id, call_id, seq) VALUES (?, ?, ?)",
            [(session_id, c, seq) for c in m.call_ids],
        )
    _count(db, session_id, len(messages), sum(m.tokens for m in messages))
    return seqs


def _insert_call(db: sqlite3.Connection, session_id: str, call: Mapping[str, Any]) -> int:
    seq = _next(db, session_id, "next_call", 1)
    db.execute(
        "INSERT INTO calls (session_id, seq, data) VALUES (?, ?, ?)",
        (session_id, seq, dumps(dict(call))),
    )
    return seq


def _insert_usage(db: sqlite3.Connection, session_id: str | None, event: Mapping[str, Any]) -> int:
    cur = db.execute(
        "INSERT INTO usage_events (session_id, data) VALUES (?, ?)",
        (session_id, dumps(dict(event))),
    )
    assert cur.lastrowid is not None
    return cur.lastrowid


def _change_part(
    db: sqlite3.Connection, session_id: str, part: store.PartKind, change: store.JsonChange
) -> dict[str, Any] | None:
    """Replace a small JSON part by ``change(current)`` inside the open transaction."""
    row = db.execute(
        "SELECT data FROM session_parts WHERE session_id = ? AND part = ?",
        (session_id, part),
    ).fetchone()
    updated = change(json.loads(row[0]) if row else None)
    db.execute(
        "INSERT INTO session_parts (session_id, part, data) VALUES (?, ?, ?) "
        "ON CONFLICT (session_id, part) DO UPDATE SET data = excluded.data",
        (session_id, part, dumps(updated)),
    )
    return updated


def _delete_messages(db: sqlite3.Connection, session_id: str, start: int, stop: int) -> int:
    """Delete the session's messages with ``start <= seq < stop`` and move its counters
    (inside the open transaction); returns how many went."""
    where = "WHERE session_id = ? AND seq >= ? AND seq < ?"
    count, tokens = db.execute(
        f"SELECT COUNT(*), COALESCE(SUM(tokens), 0) FROM messages {where}",
        (session_id, start, stop),
    ).fetchone()
    db.execute(f"DELETE FROM message_calls {where}", (session_id, start, stop))
    db.execute(f"DELETE FROM messages {where}", (session_id, start, stop))
    _count(db, session_id, -count, -tokens)
    return int(count)


def _count(db: sqlite3.Connection, session_id: str, messages: int, tokens: int) -> None:
    """Move the session's message count and token sum (inside the open transaction)."""
    db.execute(
        "UPDATE session_headers SET message_total = message_total + ?, "
        "message_tokens = message_tokens + ? WHERE session_id = ?",
        (messages, tokens, session_id),
    )


def _in_chunks(
    db: sqlite3.Connection, select: str, key: str, values: list[str], size: int = 500
) -> list[tuple[Any, ...]]:
    """The rows of ``select ... IN (values)`` for ``key``, asked ``size`` values at a time
    (SQLite limits a statement's parameters)."""
    rows: list[tuple[Any, ...]] = []
    for i in range(0, len(values), size):
        chunk = values[i : i + size]
        rows += db.execute(f"{select} IN ({','.join('?' * len(chunk))})", (key, *chunk))
    return rows


def _insert_header(db: sqlite3.Connection, header: store.SessionHeader) -> None:
    db.execute(
        "INSERT INTO session_headers (session_id, agent, created_at, preset, removed, profile) "
        "VALUES (?, ?, ?, ?, ?, ?)",
        (
            header.session_id,
            header.agent,
            header.created_at,
            header.preset,
            _refs_json(header.removed),
            header.profile,
        ),
    )


def _insert_items(
    db: sqlite3.Connection, session_id: str, items: Sequence[SessionItem], first: int
) -> None:
    db.executemany(
        "INSERT INTO session_items (session_id, pos, type, name, server, include_mode) "
        "VALUES (?, ?, ?, ?, ?, ?)",
        [
            (session_id, first + i, *_ref_row(item.ref), item.include_mode)
            for i, item in enumerate(items)
        ],
    )


def _removed(db: sqlite3.Connection, session_id: str) -> tuple[ItemRef, ...]:
    row = db.execute(
        "SELECT removed FROM session_headers WHERE session_id = ?", (session_id,)
    ).fetchone()
    return _refs(row[0])


def _set_removed(db: sqlite3.Connection, session_id: str, refs: Sequence[ItemRef]) -> None:
    db.execute(
        "UPDATE session_headers SET removed = ? WHERE session_id = ?",
        (_refs_json(refs), session_id),
    )
