"""Opening a SQLite session store: refusing bad files, creating and migrating the schema.

Version 1 (earlier releases) kept each session as one JSON document in a ``sessions`` table.
Version 2 keeps each part in its own table. Version 3 adds each message's estimated tokens
and, in the session's header, its message count and token sum, kept by every write. A
version-1 file is migrated on open, in one transaction: every row is validated (items,
turns, messages) and written into the new tables, and the old table is renamed
``sessions_v1``; a row that cannot be read stops the migration and leaves the file as it
was. A version-2 file gains the new columns, filled from the stored messages. Version 4
adds the profile a session was created under to its header (NULL for earlier sessions).
"""

from __future__ import annotations

import json
import logging
import os
import sqlite3
import stat
from pathlib import Path
from typing import Any

from contextcore.errors import ConfigError, ContextCoreError
from contextcore.history import ConversationHistory
from contextcore.sessions import Session

from ._records import stored_tokens

__all__ = ["SCHEMA_VERSION", "open_checked"]

log = logging.getLogger(__name__)

SCHEMA_VERSION = 4
_MAGIC = b"SQLite format 3\x00"

_TABLES = """
CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS session_headers (
    ord INTEGER PRIMARY KEY AUTOINCREMENT,
    session_id TEXT NOT NULL UNIQUE,
    agent TEXT,
    created_at TEXT NOT NULL,
    preset TEXT,
    profile TEXT,
    removed TEXT NOT NULL DEFAULT '[]',
    next_message INTEGER NOT NULL DEFAULT 0,
    next_turn INTEGER NOT NULL DEFAULT 0,
    next_call INTEGER NOT NULL DEFAULT 0,
    message_total INTEGER NOT NULL DEFAULT 0,
    message_tokens INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS session_items (
    session_id TEXT NOT NULL,
    pos INTEGER NOT NULL,
    type TEXT NOT NULL,
    name TEXT NOT NULL,
    server TEXT NOT NULL,
    include_mode TEXT NOT NULL,
    PRIMARY KEY (session_id, type, name, server)
);
CREATE TABLE IF NOT EXISTS turns (
    session_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    request_id TEXT NOT NULL,
    data TEXT NOT NULL,
    PRIMARY KEY (session_id, seq)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS turns_by_request ON turns (session_id, request_id);
CREATE TABLE IF NOT EXISTS messages (
    session_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    message_id TEXT NOT NULL,
    raw TEXT NOT NULL,
    tokens INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (session_id, seq),
    UNIQUE (session_id, message_id)
);
CREATE TABLE IF NOT EXISTS message_calls (
    session_id TEXT NOT NULL,
    call_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    PRIMARY KEY (session_id, call_id)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS message_calls_by_seq ON message_calls (session_id, seq);
CREATE TABLE IF NOT EXISTS session_parts (
    session_id TEXT NOT NULL,
    part TEXT NOT NULL,
    data TEXT NOT NULL,
    PRIMARY KEY (session_id, part)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS calls (
    session_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    data TEXT NOT NULL,
    PRIMARY KEY (session_id, seq)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS usage_events (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    session_id TEXT,
    data TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS usage_events_by_session ON usage_events (session_id, seq);
CREATE TABLE IF NOT EXISTS embeddings (
    model TEXT NOT NULL,
    hash TEXT NOT NULL,
    vector BLOB NOT NULL,
    PRIMARY KEY (model, hash)
) WITHOUT ROWID;
"""

_V3_COLUMNS = (
    "ALTER TABLE messages ADD COLUMN tokens INTEGER NOT NULL DEFAULT 0",
    "ALTER TABLE session_headers ADD COLUMN message_total INTEGER NOT NULL DEFAULT 0",
    "ALTER TABLE session_headers ADD COLUMN message_tokens INTEGER NOT NULL DEFAULT 0",
)


def _refused(path: Path, why: str) -> ConfigError:
    # Never advise moving the file away: its -wal file may hold acknowledged writes, and a
    # main file moved without it loses them.
    return ConfigError(
        f"the session database {str(path)!r} {why}; it was not opened and nothing was "
        "changed. Keep it together with its -wal and -shm files (one database), copy all "
        "three before any repair (sqlite3's .recover reads them), or set persistence.path "
        "to another file for a separate store",
        field="persistence.path",
    )


def _has_wal(path: Path) -> bool:
    """Whether a write-ahead log with content sits beside ``path``: then the main file may
    be shorter than its header says (pages not yet copied back are in the log)."""
    try:
        return os.stat(f"{path}-wal").st_size > 0
    except OSError:
        return False


def _check_file(path: Path) -> None:
    """Refuse an existing file that is a directory, empty, not SQLite, or (with no
    write-ahead log beside it) shorter than its header says."""
    if path.is_dir():
        raise ConfigError(
            f"persistence.path {str(path)!r} is a directory; name a file in it, for example "
            f"{str(path / 'sessions.sqlite3')!r}",
            field="persistence.path",
        )
    if not path.exists():
        return
    size = path.stat().st_size
    if size == 0:
        raise _refused(path, "is empty (0 bytes), not a session store")
    with path.open("rb") as f:
        head = f.read(100)
    if not head.startswith(_MAGIC[: len(head)]) or len(head) < 100:
        why = "is truncated" if head.startswith(_MAGIC[: len(head)]) else "is not a database"
        raise _refused(path, why)
    page_size = int.from_bytes(head[16:18], "big")
    page_size = 65536 if page_size == 1 else page_size
    pages = int.from_bytes(head[28:32], "big")
    valid = head[24:28] == head[92:96] and not _has_wal(path)
    if page_size and (size % page_size or (valid and pages * page_size > size)):
        raise _refused(path, f"is truncated ({size} bytes, its header promises {pages} pages)")


def _keep_private(path: Path) -> None:
    """Create the store file readable by its owner only (SQLite gives its -wal and -shm
    files the main file's mode), or take group and other access off an existing one: it
    holds conversations and recorded tool arguments and results."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        pass
    except OSError as exc:
        raise _refused(path, f"cannot be created ({exc})") from exc
    else:
        os.close(fd)
        return
    for name in (str(path), f"{path}-wal", f"{path}-shm"):
        try:
            mode = stat.S_IMODE(os.stat(name).st_mode)
            if mode & 0o077:
                os.chmod(name, mode & 0o700)
                log.warning(
                    "took group and other access off %s (was %o, now %o): it holds "
                    "conversations and tool results",
                    name,
                    mode,
                    mode & 0o700,
                )
        except FileNotFoundError:
            continue
        except OSError as exc:  # not the owner: the file stays as it is, and says so
            log.warning("could not make %s private (%s)", name, exc)


def open_checked(path: Path) -> sqlite3.Connection:
    """Open (creating or migrating) the store at ``path``; ``ConfigError`` names the path
    when the file cannot be used."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise _refused(path, f"cannot be created ({exc})") from exc
    _check_file(path)
    _keep_private(path)
    try:
        db = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
    except sqlite3.Error as exc:
        raise _refused(path, f"cannot be opened ({exc})") from exc
    try:
        _prepare(db, path)
    except BaseException:
        db.close()
        raise
    return db


def _prepare(db: sqlite3.Connection, path: Path) -> None:
    try:
        db.execute("PRAGMA busy_timeout=30000")
        check = db.execute("PRAGMA quick_check").fetchall()
        if check != [("ok",)]:
            detail = "; ".join(str(r[0]) for r in check[:3])
            raise _refused(path, f"is damaged ({detail})")
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=FULL")
        _migrate(db, path)
    except sqlite3.DatabaseError as exc:
        raise _refused(path, f"is not a usable database ({exc})") from exc


def _tables(db: sqlite3.Connection) -> set[str]:
    rows = db.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall()
    return {r[0] for r in rows}


def _migrate(db: sqlite3.Connection, path: Path) -> None:
    db.execute("BEGIN IMMEDIATE")
    try:
        tables = _tables(db)
        version = None
        if "schema_version" in tables:
            row = db.execute("SELECT MAX(version) FROM schema_version").fetchone()
            version = row[0] if row else None
            if version is not None and version > SCHEMA_VERSION:
                raise _refused(
                    path,
                    f"has schema version {version}, newer than this broker's "
                    f"{SCHEMA_VERSION}; upgrade the broker",
                )
            if version == SCHEMA_VERSION:
                db.execute("COMMIT")
                return
        if version == 2:
            for statement in _V3_COLUMNS:
                db.execute(statement)
        if version in (2, 3) and not _has_column(db, "session_headers", "profile"):
            db.execute("ALTER TABLE session_headers ADD COLUMN profile TEXT")
        for statement in _TABLES.split(";"):
            if statement.strip():
                db.execute(statement)
        if "sessions" in tables:
            _copy_v1(db, path)
            db.execute("ALTER TABLE sessions RENAME TO sessions_v1")
        _fill_totals(db)
        db.execute("DELETE FROM schema_version")
        db.execute("INSERT INTO schema_version (version) VALUES (?)", (SCHEMA_VERSION,))
        db.execute("COMMIT")
    except BaseException:
        if db.in_transaction:
            db.execute("ROLLBACK")
        raise


def _has_column(db: sqlite3.Connection, table: str, column: str) -> bool:
    return any(row[1] == column for row in db.execute(f"PRAGMA table_info({table})"))


def _fill_totals(db: sqlite3.Connection) -> None:
    """Each message's tokens and each session's message count and token sum, from the
    stored messages (inside the caller's transaction)."""
    db.create_function("stored_tokens", 1, stored_tokens, deterministic=True)
    db.execute("UPDATE messages SET tokens = stored_tokens(raw)")
    db.execute(
        "UPDATE session_headers SET "
        "message_total = (SELECT COUNT(*) FROM messages m "
        "WHERE m.session_id = session_headers.session_id), "
        "message_tokens = (SELECT COALESCE(SUM(tokens), 0) FROM messages m "
        "WHERE m.session_id = session_headers.session_id)"
    )


def _copy_v1(db: sqlite3.Connection, path: Path) -> None:
    """Write every version-1 session into the version-2 tables (inside the caller's
    transaction)."""
    rows = db.execute("SELECT session_id, data FROM sessions ORDER BY updated_at, session_id")
    for session_id, data in rows.fetchall():
        try:
            doc = json.loads(data)
            session = Session.from_dict(doc)
            history = _history_of(doc)
        except (ContextCoreError, ValueError, KeyError, TypeError) as exc:
            reason = exc.message if isinstance(exc, ContextCoreError) else repr(exc)
            raise _refused(
                path, f"holds session {session_id!r} that cannot be migrated ({reason})"
            ) from exc
        _write_v1_session(db, session, history)


def _history_of(doc: dict[str, Any]) -> ConversationHistory | None:
    data = (doc.get("extras") or {}).get("history")
    return ConversationHistory.from_dict(data) if data else None


def _write_v1_session(
    db: sqlite3.Connection, session: Session, history: ConversationHistory | None
) -> None:
    sid = session.session_id
    removed = json.dumps([r.to_dict() for r in session.removed])
    messages = history.messages if history else ()
    db.execute(
        "INSERT INTO session_headers (session_id, agent, created_at, preset, removed, "
        "next_message, next_turn) VALUES (?, ?, ?, ?, ?, ?, ?)",
        (
            sid,
            session.agent,
            session.created_at,
            session.preset,
            removed,
            len(messages),
            len(session.turns),
        ),
    )
    db.executemany(
        "INSERT INTO session_items (session_id, pos, type, name, server, include_mode) "
        "VALUES (?, ?, ?, ?, ?, ?)",
        [
            (sid, pos, i.ref.type, i.ref.name, i.ref.server or "", i.include_mode)
            for pos, i in enumerate(session.items)
        ],
    )
    db.executemany(
        "INSERT INTO turns (session_id, seq, request_id, data) VALUES (?, ?, ?, ?)",
        [
            (sid, seq, t.request_id, json.dumps(t.to_dict(), ensure_ascii=False))
            for seq, t in enumerate(session.turns)
        ],
    )
    if history is None:
        return
    db.executemany(
        "INSERT INTO messages (session_id, seq, message_id, raw) VALUES (?, ?, ?, ?)",
        [
            (sid, seq, m.id, json.dumps(dict(m.raw), ensure_ascii=False))
            for seq, m in enumerate(messages)
        ],
    )
    db.executemany(
        "INSERT INTO message_calls (session_id, call_id, seq) VALUES (?, ?, ?)",
        [(sid, c, seq) for seq, m in enumerate(messages) for c in m.call_ids],
    )
    parts = [("history", history.state_dict())]
    if history.snapshot is not None:
        parts.append(("snapshot", history.snapshot.to_dict()))
    db.executemany(
        "INSERT INTO session_parts (session_id, part, data) VALUES (?, ?, ?)",
        [(sid, name, json.dumps(value, ensure_ascii=False)) for name, value in parts],
    )
