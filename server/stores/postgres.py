"""Sessions in PostgreSQL, shared by every broker replica that points at the same database.

Each operation is one transaction on a pooled connection. A write to a session first locks the
session's header row (``UPDATE sessions ... RETURNING`` or ``SELECT ... FOR UPDATE``), so writers
to one session from any number of processes take turns: sequence numbers come from counters in
that row, and a reader never sees record n+1 committed without record n. Store-wide usage events
take their numbers from a row of ``counters`` the same way. A method returns after ``COMMIT``,
which with PostgreSQL's default ``synchronous_commit = on`` means the WAL record is on disk.

The schema is versioned in ``schema_version``. Opening the store applies the missing migrations
under an advisory lock (replicas starting together migrate once) and refuses a schema newer than
this code knows.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from functools import partial
from typing import Any

import psycopg
from psycopg_pool import ConnectionPool, PoolTimeout

from contextcore import store
from contextcore.items import ItemRef, parse_item_type
from contextcore.sessions import RequestContext, RequestItem, SessionItem

from ._postgres_schema import SCHEMA_VERSION, migrate
from ._records import call_of, decoded, message_of, readable, turn_of
from ._shared import dumps, no_repeats, ref_key
from ._sql import (
    Run,
    damaged_rows,
    delete_usage_rows,
    extend_turn_row,
    remove_damaged_rows,
    usage_rows,
)
from ._urls import describe_url, scrub

__all__ = ["SCHEMA_VERSION", "PostgresSessionStore"]

log = logging.getLogger(__name__)


def _ref(row: Mapping[str, Any]) -> ItemRef:
    return ItemRef(parse_item_type(row["type"]), row["name"], row.get("server"))


def _one_line(message: str) -> str:
    """A driver's message on one line (libpq's run over several, indented with tabs)."""
    return " ".join(message.split())


class PostgresSessionStore(store.SessionStore):
    """A session store in a PostgreSQL database (safe across threads and processes)."""

    def __init__(self, url: str, *, max_connections: int = 16, timeout: float = 10.0) -> None:
        self._records = records = _PostgresRecords(
            url, max_connections=max_connections, timeout=timeout
        )
        super().__init__(*[records] * store.ROLES)  # one object plays every role
        self.where = records.where


class _PostgresRecords(store.JsonParts):
    """Every role's records of one PostgreSQL database, on a pool of connections."""

    def __init__(self, url: str, *, max_connections: int = 16, timeout: float = 10.0) -> None:
        self._url = url
        self.where = describe_url(url)
        self._damage = store.DamageLog(self.where)
        # One direct connection first: an unreachable server fails at once, with libpq's
        # reason, instead of after the pool's retries.
        connect_timeout = max(1, int(timeout))
        with (
            self._errors(),
            psycopg.connect(url, connect_timeout=connect_timeout) as conn,
            conn.cursor() as cur,
        ):
            migrate(cur, self.where)
        self._pool = ConnectionPool(
            url,
            min_size=1,
            max_size=max_connections,
            timeout=timeout,
            open=False,
            check=ConnectionPool.check_connection,
            # Plan each query for its own values: a generic plan of a prepared statement does
            # not know the session's size, and for a long session it walks the session's
            # messages instead of the id index (appends then grow with the history).
            kwargs={"prepare_threshold": None},
            name="context-broker-store",
        )
        try:
            with self._errors():
                self._pool.open(wait=True, timeout=timeout)
        except BaseException:
            self._pool.close()
            raise

    # -- plumbing ---------------------------------------------------------------------------

    @contextmanager
    def _tx(self) -> Iterator[psycopg.Cursor[Any]]:
        """One transaction: committed when the block ends, rolled back if it raises."""
        with self._errors(), self._pool.connection() as conn, conn.cursor() as cur:
            yield cur

    @contextmanager
    def _errors(self) -> Iterator[None]:
        """Turn the driver's errors into store errors that name the server, never the URL."""
        try:
            yield
        except (PoolTimeout, psycopg.OperationalError, psycopg.InterfaceError) as exc:
            raise store.StoreUnavailable(
                f"the PostgreSQL session store at {self.where!r} cannot be used "
                f"({_one_line(scrub(str(exc), self._url))}); check that the server runs and "
                "accepts connections, and [persistence] url"
            ) from None
        except psycopg.errors.ReadOnlySqlTransaction:
            raise store.StoreUnavailable(
                f"the PostgreSQL session store at {self.where!r} is read-only; point "
                "[persistence] url at the primary server"
            ) from None
        except psycopg.Error as exc:
            raise store.StoreError(
                f"the PostgreSQL session store at {self.where!r} failed: "
                f"{_one_line(scrub(str(exc), self._url))}"
            ) from None

    def _bump(self, cur: psycopg.Cursor[Any], session_id: str, counter: str, by: int) -> int:
        """Lock the session's header row and advance one of its counters; the first number."""
        cur.execute(
            f"UPDATE sessions SET {counter} = {counter} + %s WHERE session_id = %s "
            f"RETURNING {counter}",
            (by, session_id),
        )
        row = cur.fetchone()
        if row is None:
            raise store.unknown_session(session_id)
        return int(row[0]) - by

    def _lock(self, cur: psycopg.Cursor[Any], session_id: str) -> list[dict[str, Any]]:
        """Lock the session's header row; its ``removed`` refs."""
        cur.execute("SELECT removed FROM sessions WHERE session_id = %s FOR UPDATE", (session_id,))
        row = cur.fetchone()
        if row is None:
            raise store.unknown_session(session_id)
        return list(row[0])

    # -- header and items -------------------------------------------------------------------

    def create_session(self, header: store.SessionHeader, items: Sequence[SessionItem]) -> None:
        h = header
        removed = dumps([r.to_dict() for r in h.removed])
        with self._tx() as cur:
            cur.execute(
                "INSERT INTO sessions (session_id, agent, created_at, preset, removed, next_item, "
                "profile) VALUES (%s, %s, %s, %s, %s::jsonb, %s, %s) "
                "ON CONFLICT DO NOTHING RETURNING 1",
                (h.session_id, h.agent, h.created_at, h.preset, removed, len(items), h.profile),
            )
            if cur.fetchone() is None:
                raise store.StoreError(f"session {header.session_id!r} already exists")
            self._insert_items(cur, header.session_id, 0, items)

    def _insert_items(
        self, cur: psycopg.Cursor[Any], session_id: str, first: int, items: Sequence[SessionItem]
    ) -> list[SessionItem]:
        added = []
        for pos, item in enumerate(items, start=first):
            cur.execute(
                "INSERT INTO session_items VALUES (%s, %s, %s, %s::jsonb) "
                "ON CONFLICT DO NOTHING RETURNING 1",
                (session_id, ref_key(item.ref), pos, dumps(item.to_dict())),
            )
            if cur.fetchone() is not None:
                added.append(item)
        return added

    def header(self, session_id: str) -> store.SessionHeader | None:
        with self._tx() as cur:
            cur.execute(
                "SELECT agent, created_at, preset, removed, profile FROM sessions "
                "WHERE session_id = %s",
                (session_id,),
            )
            row = cur.fetchone()
        if row is None:
            return None
        agent, created_at, preset, removed, profile = row
        refs = tuple(map(_ref, removed))
        return store.SessionHeader(session_id, agent, created_at, preset, refs, profile)

    def list_session_ids(self) -> list[str]:
        with self._tx() as cur:
            cur.execute("SELECT session_id FROM sessions ORDER BY ord")
            return [r[0] for r in cur.fetchall()]

    def session_ids_page(self, offset: int, limit: int) -> list[str]:
        with self._tx() as cur:
            cur.execute(
                "SELECT session_id FROM sessions ORDER BY ord DESC LIMIT %s OFFSET %s",
                (limit, offset),
            )
            return [r[0] for r in cur.fetchall()]

    def items(self, session_id: str) -> tuple[SessionItem, ...]:
        with self._tx() as cur:
            cur.execute(
                "SELECT item FROM session_items WHERE session_id = %s ORDER BY pos", (session_id,)
            )
            return tuple(SessionItem.from_dict(r[0]) for r in cur.fetchall())

    def add_items(self, session_id: str, items: Sequence[SessionItem]) -> tuple[SessionItem, ...]:
        unique: dict[ItemRef, SessionItem] = {}
        for item in items:
            unique.setdefault(item.ref, item)
        with self._tx() as cur:
            removed = self._lock(cur, session_id)
            first = self._bump(cur, session_id, "next_item", len(unique))
            added = self._insert_items(cur, session_id, first, list(unique.values()))
            refs = {i.ref for i in added}
            kept = [r for r in removed if _ref(r) not in refs]
            if len(kept) != len(removed):
                cur.execute(
                    "UPDATE sessions SET removed = %s::jsonb WHERE session_id = %s",
                    (dumps(kept), session_id),
                )
            return tuple(added)

    def remove_item(self, session_id: str, ref: ItemRef) -> bool:
        with self._tx() as cur:
            removed = self._lock(cur, session_id)
            cur.execute(
                "DELETE FROM session_items WHERE session_id = %s AND ref = %s",
                (session_id, ref_key(ref)),
            )
            was_there = cur.rowcount > 0
            if ref not in map(_ref, removed):
                cur.execute(
                    "UPDATE sessions SET removed = removed || %s::jsonb WHERE session_id = %s",
                    (dumps([ref.to_dict()]), session_id),
                )
            return was_there

    # -- turns ------------------------------------------------------------------------------

    def append_turn(self, session_id: str, turn: RequestContext) -> int:
        with self._tx() as cur:
            seq = self._bump(cur, session_id, "next_turn", 1)
            cur.execute(
                "INSERT INTO turns VALUES (%s, %s, %s, %s)",
                (session_id, seq, turn.request_id, dumps(turn.to_dict())),
            )
            return seq

    def extend_turn(
        self, session_id: str, request_id: str, items: Sequence[RequestItem]
    ) -> RequestContext | None:
        with self._tx() as cur:
            return extend_turn_row(_run(cur), session_id, request_id, items, " FOR UPDATE")

    def _turns(self, sql: str, args: tuple[Any, ...]) -> list[RequestContext]:
        """The turns a ``SELECT seq, data`` query finds in session ``args[0]``."""
        with self._tx() as cur:
            cur.execute(sql, args)
            rows = cur.fetchall()
        return [t for _, t in readable(self._damage, args[0], "turn", rows, turn_of)]

    def turn(self, session_id: str, request_id: str) -> RequestContext | None:
        found = self._turns(
            "SELECT seq, data FROM turns WHERE session_id = %s AND request_id = %s "
            "ORDER BY seq LIMIT 1",
            (session_id, request_id),
        )
        return found[0] if found else None

    def turns(
        self, session_id: str, offset: int = 0, limit: int | None = None
    ) -> list[RequestContext]:
        # Turns are never deleted, so a turn's seq is its position in the log.
        end = 2**31 - 1 if limit is None else offset + limit
        return self._turns(
            "SELECT seq, data FROM turns WHERE session_id = %s AND seq >= %s AND seq < %s "
            "ORDER BY seq",
            (session_id, max(offset, 0), end),
        )

    def turn_count(self, session_id: str) -> int:
        return self._counter(session_id, "next_turn")

    def _counter(self, session_id: str, counter: str) -> int:
        with self._tx() as cur:
            cur.execute(f"SELECT {counter} FROM sessions WHERE session_id = %s", (session_id,))
            row = cur.fetchone()
        return int(row[0]) if row else 0

    def last_turn(self, session_id: str) -> RequestContext | None:
        found = self._turns(
            "SELECT seq, data FROM turns WHERE session_id = %s ORDER BY seq DESC LIMIT 1",
            (session_id,),
        )
        return found[0] if found else None

    # -- history messages -------------------------------------------------------------------

    def append_messages(
        self, session_id: str, messages: Sequence[store.MessageRecord]
    ) -> tuple[int, ...]:
        with self._tx() as cur:
            return self._append_messages(cur, session_id, messages)

    def _append_messages(
        self, cur: psycopg.Cursor[Any], session_id: str, messages: Sequence[store.MessageRecord]
    ) -> tuple[int, ...]:
        """Append messages inside the open transaction; their sequence numbers."""
        ids = [m.id for m in messages]
        calls = [c for m in messages for c in m.call_ids]
        no_repeats(ids, "message id")
        no_repeats(calls, "tool call id")
        first = self._bump(cur, session_id, "next_message", len(messages))
        used_ids, used_calls = _used(cur, session_id, ids, calls)
        if used_ids:
            raise store.DuplicateRecord(f"message id {min(used_ids)!r} is already used")
        if used_calls:
            raise store.DuplicateRecord(f"tool call id {min(used_calls)!r} is already used")
        seqs = tuple(range(first, first + len(messages)))
        self._insert_messages(cur, session_id, seqs, messages)
        _count(cur, session_id, len(messages), sum(m.tokens for m in messages))
        return seqs

    def _insert_messages(
        self,
        cur: psycopg.Cursor[Any],
        session_id: str,
        seqs: Sequence[int],
        messages: Sequence[store.MessageRecord],
    ) -> None:
        pairs = list(zip(seqs, messages, strict=True))
        cur.executemany(
            "INSERT INTO messages (session_id, seq, message_id, raw, call_ids, tokens) "
            "VALUES (%s, %s, %s, %s, %s, %s)",
            [
                (session_id, s, m.id, dumps(dict(m.raw)), list(m.call_ids), m.tokens)
                for s, m in pairs
            ],
        )
        cur.executemany(
            "INSERT INTO message_calls VALUES (%s, %s, %s)",
            [(session_id, c, s) for s, m in pairs for c in m.call_ids],
        )

    def messages(
        self, session_id: str, start: int = 0, end: int | None = None
    ) -> list[store.MessageRecord]:
        with self._tx() as cur:
            cur.execute(
                "SELECT seq, message_id, raw, call_ids, tokens FROM messages "
                "WHERE session_id = %s AND seq >= %s AND seq < %s ORDER BY seq",
                (session_id, start, 2**62 if end is None else end),
            )
            rows = cur.fetchall()
        out = []
        for s, i, raw, c, t in rows:
            data = decoded(self._damage, session_id, "message", int(s), raw, message_of)
            if data is not None:
                out.append(store.MessageRecord(i, data, tuple(c), int(s), int(t)))
        return out

    def message_count(self, session_id: str) -> int:
        return self._counter(session_id, "next_message")

    def message_totals(self, session_id: str) -> tuple[int, int]:
        with self._tx() as cur:
            cur.execute(
                "SELECT message_total, message_tokens FROM sessions WHERE session_id = %s",
                (session_id,),
            )
            row = cur.fetchone()
        return (int(row[0]), int(row[1])) if row else (0, 0)

    def used_ids(
        self, session_id: str, message_ids: Iterable[str], call_ids: Iterable[str]
    ) -> tuple[frozenset[str], frozenset[str]]:
        with self._tx() as cur:
            return _used(cur, session_id, list(message_ids), list(call_ids))

    def replace_messages(self, session_id: str, messages: Sequence[store.MessageRecord]) -> None:
        with self._tx() as cur:
            self._lock(cur, session_id)
            seqs = [m.seq for m in messages]
            cur.execute(
                "SELECT seq, tokens FROM messages WHERE session_id = %s AND seq = ANY(%s)",
                (session_id, seqs),
            )
            old = {int(r[0]): int(r[1]) for r in cur.fetchall()}
            missing = set(seqs) - set(old)
            if missing:
                raise store.StoreError(f"no stored message with seq {min(missing)!r} to replace")
            _count(cur, session_id, 0, sum(m.tokens for m in messages) - sum(old.values()))
            cur.execute(
                "DELETE FROM messages WHERE session_id = %s AND seq = ANY(%s)", (session_id, seqs)
            )
            cur.execute(
                "DELETE FROM message_calls WHERE session_id = %s AND seq = ANY(%s)",
                (session_id, seqs),
            )
            self._insert_messages(cur, session_id, seqs, messages)

    def delete_messages(self, session_id: str, start: int, end: int | None = None) -> int:
        stop = 2**62 if end is None else end
        with self._tx() as cur:
            self._lock(cur, session_id)
            return _delete_messages(cur, session_id, start, stop)

    # -- small JSON parts (history_state, snapshot and their updates: JsonParts) -----------

    def _part(self, session_id: str, kind: store.PartKind) -> dict[str, Any] | None:
        with self._tx() as cur:
            cur.execute(
                "SELECT data FROM session_parts WHERE session_id = %s AND kind = %s",
                (session_id, kind),
            )
            row = cur.fetchone()
        return json.loads(row[0]) if row else None

    def _update_part(
        self, session_id: str, kind: store.PartKind, change: store.JsonChange
    ) -> dict[str, Any] | None:
        with self._tx() as cur:
            self._lock(cur, session_id)
            return _change_part(cur, session_id, kind, change)

    # -- recorded calls and usage events ----------------------------------------------------

    def append_call(self, session_id: str, call: Mapping[str, Any]) -> int:
        with self._tx() as cur:
            return self._insert_call(cur, session_id, call)

    def _insert_call(
        self, cur: psycopg.Cursor[Any], session_id: str, call: Mapping[str, Any]
    ) -> int:
        seq = self._bump(cur, session_id, "next_call", 1)
        cur.execute("INSERT INTO calls VALUES (%s, %s, %s)", (session_id, seq, dumps(dict(call))))
        return seq

    def calls(self, session_id: str) -> list[dict[str, Any]]:
        with self._tx() as cur:
            cur.execute(
                "SELECT seq, data FROM calls WHERE session_id = %s ORDER BY seq", (session_id,)
            )
            rows = cur.fetchall()
        found = readable(self._damage, session_id, "call", rows, call_of)
        return [{**c, "seq": int(seq)} for seq, c in found]

    def append_usage_event(self, session_id: str | None, event: Mapping[str, Any]) -> int:
        with self._tx() as cur:
            if session_id is not None:
                cur.execute(
                    "SELECT 1 FROM sessions WHERE session_id = %s FOR KEY SHARE", (session_id,)
                )
                if cur.fetchone() is None:
                    raise store.unknown_session(session_id)
            return _insert_usage(cur, session_id, event)

    def record_call(self, session_id: str, record: store.CallToRecord) -> store.RecordedCall:
        with self._tx() as cur:  # one transaction: a failure anywhere stores nothing
            # The session's row first, then the usage counter: the order every write keeps.
            self._lock(cur, session_id)
            return record.write(
                partial(_change_part, cur, session_id, "history"),
                partial(self._insert_call, cur, session_id),
                partial(self._append_messages, cur, session_id),
                partial(_insert_usage, cur, session_id),
            )

    def usage_events(self, session_id: str | None = None) -> list[dict[str, Any]]:
        with self._tx() as cur:
            return usage_rows(_run(cur), session_id)

    def delete_usage_events(self, session_id: str | None = None) -> int:
        with self._tx() as cur:
            return delete_usage_rows(_run(cur), session_id)

    # -- shared embedding cache -------------------------------------------------------------

    def get_embeddings(self, model: str, hashes: Iterable[str]) -> dict[str, bytes]:
        wanted = list(hashes)
        if not wanted:
            return {}
        with self._tx() as cur:
            cur.execute(
                "SELECT text_hash, vector FROM embeddings WHERE model = %s AND text_hash = ANY(%s)",
                (model, wanted),
            )
            return {h: bytes(v) for h, v in cur.fetchall()}

    def put_embeddings(self, model: str, vectors: Mapping[str, bytes]) -> None:
        if not vectors:
            return
        # Sorted keys: two replicas caching overlapping batches lock rows in one order.
        rows = [(model, h, bytes(vectors[h])) for h in sorted(vectors)]
        with self._tx() as cur:
            cur.executemany(
                "INSERT INTO embeddings VALUES (%s, %s, %s) ON CONFLICT DO NOTHING", rows
            )

    def check_writable(self) -> None:
        """``StoreUnavailable`` if the server cannot be reached or takes no writes (a standby,
        or ``default_transaction_read_only``)."""
        with self._tx() as cur:
            cur.execute("SELECT pg_is_in_recovery(), current_setting('transaction_read_only')")
            row = cur.fetchone()
        if row is None or row[0] or row[1] == "on":
            raise store.StoreUnavailable(
                f"the PostgreSQL session store at {self.where!r} is read-only; point "
                "[persistence] url at the primary server"
            )

    # -- damaged records --------------------------------------------------------------------

    def skipped_records(self, session_id: str) -> tuple[store.DamagedRecord, ...]:
        return self._damage.of(session_id)

    def damaged_records(self, session_id: str | None = None) -> list[store.DamagedRecord]:
        with self._tx() as cur:
            return damaged_rows(_run(cur), session_id)

    def remove_damaged(self, records: Sequence[store.DamagedRecord]) -> int:
        with self._tx() as cur:
            removed = remove_damaged_rows(_run(cur), records, partial(_delete_messages, cur))
        self._damage.forget(records)
        return removed

    def close(self) -> None:
        """Close every pooled connection."""
        self._pool.close()


def _run(cur: psycopg.Cursor[Any]) -> Run:
    """Run statements written with ``?`` placeholders on ``cur``."""

    def run(sql: str, args: Sequence[Any]) -> psycopg.Cursor[Any]:
        return cur.execute(sql.replace("?", "%s"), args)

    return run


def _delete_messages(cur: psycopg.Cursor[Any], session_id: str, start: int, stop: int) -> int:
    """Delete the session's messages with ``start <= seq < stop`` and move its counters
    (inside the open transaction); returns how many went."""
    cur.execute(
        "DELETE FROM messages WHERE session_id = %s AND seq >= %s AND seq < %s RETURNING tokens",
        (session_id, start, stop),
    )
    gone = [int(r[0]) for r in cur.fetchall()]
    _count(cur, session_id, -len(gone), -sum(gone))
    cur.execute(
        "DELETE FROM message_calls WHERE session_id = %s AND seq >= %s AND seq < %s",
        (session_id, start, stop),
    )
    return len(gone)


def _count(cur: psycopg.Cursor[Any], session_id: str, messages: int, tokens: int) -> None:
    """Move the session's message count and token sum (inside the open transaction)."""
    cur.execute(
        "UPDATE sessions SET message_total = message_total + %s, "
        "message_tokens = message_tokens + %s WHERE session_id = %s",
        (messages, tokens, session_id),
    )


def _insert_usage(
    cur: psycopg.Cursor[Any], session_id: str | None, event: Mapping[str, Any]
) -> int:
    """Number and insert a usage event inside the open transaction; its sequence number."""
    # The counter row is locked until commit: events are numbered in commit order.
    cur.execute("UPDATE counters SET value = value + 1 WHERE name = 'usage' RETURNING value - 1")
    row = cur.fetchone()
    assert row is not None
    seq = int(row[0])
    cur.execute(
        "INSERT INTO usage_events VALUES (%s, %s, %s)", (seq, session_id, dumps(dict(event)))
    )
    return seq


def _change_part(
    cur: psycopg.Cursor[Any], session_id: str, kind: store.PartKind, change: store.JsonChange
) -> dict[str, Any] | None:
    """Replace a small JSON part by ``change(current)`` inside the open transaction, which
    holds the session's row."""
    cur.execute(
        "SELECT data FROM session_parts WHERE session_id = %s AND kind = %s",
        (session_id, kind),
    )
    row = cur.fetchone()
    new = change(json.loads(row[0]) if row else None)
    if new is None:
        cur.execute(
            "DELETE FROM session_parts WHERE session_id = %s AND kind = %s", (session_id, kind)
        )
    else:
        cur.execute(
            "INSERT INTO session_parts VALUES (%s, %s, %s) "
            "ON CONFLICT (session_id, kind) DO UPDATE SET data = excluded.data",
            (session_id, kind, dumps(new)),
        )
    return new


def _used(
    cur: psycopg.Cursor[Any], session_id: str, message_ids: list[str], call_ids: list[str]
) -> tuple[frozenset[str], frozenset[str]]:
    """Which of the ids the session already uses (one query for both kinds)."""
    if not message_ids and not call_ids:
        return frozenset(), frozenset()
    cur.execute(
        "SELECT 'm', message_id FROM messages WHERE session_id = %s AND message_id = ANY(%s) "
        "UNION ALL SELECT 'c', call_id FROM message_calls WHERE session_id = %s "
        "AND call_id = ANY(%s)",
        (session_id, message_ids, session_id, call_ids),
    )
    rows = cur.fetchall()
    return frozenset(v for k, v in rows if k == "m"), frozenset(v for k, v in rows if k == "c")
