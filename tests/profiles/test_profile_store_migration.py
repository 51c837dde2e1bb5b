"""A SQLite session store written before profiles opens with its sessions intact, none of
them under a profile, and records the profile of sessions created afterwards."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from context_broker.server.stores.sqlite import SqliteSessionStore

from contextcore.sessions import new_session_id
from contextcore.store import SessionHeader

CREATED = "2026-01-01T00:00:00.000Z"


def test_a_schema_3_store_gains_the_profile_column_and_keeps_its_sessions(tmp_path: Path) -> None:
    path = tmp_path / "sessions.sqlite3"
    store = SqliteSessionStore(path)
    old = new_session_id()
    store.create_session(SessionHeader(old, "agent", CREATED, "normal"), ())
    store.close()
    with sqlite3.connect(path) as db:  # the layout of schema version 3: no profile
        db.execute("ALTER TABLE session_headers DROP COLUMN profile")
        db.execute("UPDATE schema_version SET version = 3")
    db.close()

    store = SqliteSessionStore(path)
    new = new_session_id()
    store.create_session(SessionHeader(new, None, CREATED, None, profile="cursor"), ())
    assert store.header(old) == SessionHeader(old, "agent", CREATED, "normal")
    assert store.header(new).profile == "cursor"  # type: ignore[union-attr]
    assert store._db.execute("SELECT version FROM schema_version").fetchall() == [(4,)]
    store.close()
