"""The SQLite session store: durable, whole-session saves, safe across threads."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

import pytest

from contextcore.errors import ConfigError, SessionError
from contextcore.items import ItemRef
from contextcore.sessions import RequestContext, RequestItem, Session, SessionItem, new_session_id
from contextcore.store_sqlite import SqliteSessionStore


def _session(agent: str | None = "a") -> Session:
    turn = RequestContext(
        "r_" + "0" * 32,
        "",
        "2026-01-01T00:00:00.000Z",
        "héllo",
        (RequestItem(ItemRef("rule", "x"), "agent", 0.5),),
        "hybrid",
        ("a warning",),
    )
    sid = new_session_id()
    return Session(
        sid,
        agent,
        "2026-01-01T00:00:00.000Z",
        (SessionItem(ItemRef("tool", "t", "srv"), "manual"),),
        (turn,),
        {"history": [1, 2]},
    )


def test_a_saved_session_loads_back_equal_from_a_new_store(tmp_path: Path) -> None:
    path = tmp_path / "s.sqlite3"
    session = _session()
    SqliteSessionStore(path).save(session)
    assert SqliteSessionStore(path).load(session.session_id) == session


def test_unknown_ids_load_as_none_and_list_ids_shows_saved_ones(tmp_path: Path) -> None:
    store = SqliteSessionStore(tmp_path / "s.sqlite3")
    assert store.load("s_nope") is None
    a, b = _session(), _session()
    store.save(a)
    store.save(b)
    store.save(a)
    assert sorted(store.list_ids()) == sorted([a.session_id, b.session_id])


def test_saving_replaces_the_whole_session(tmp_path: Path) -> None:
    store = SqliteSessionStore(tmp_path / "s.sqlite3")
    session = _session()
    store.save(session)
    smaller = Session(session.session_id, None, session.created_at)
    store.save(smaller)
    assert store.load(session.session_id) == smaller


def test_the_database_is_in_wal_mode_with_full_sync(tmp_path: Path) -> None:
    store = SqliteSessionStore(tmp_path / "s.sqlite3")
    assert store._db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert store._db.execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL


def test_a_save_is_visible_to_another_connection_at_once(tmp_path: Path) -> None:
    path = tmp_path / "s.sqlite3"
    session = _session()
    SqliteSessionStore(path).save(session)
    with sqlite3.connect(path) as other:
        (count,) = other.execute("SELECT count(*) FROM sessions").fetchone()
    assert count == 1


def test_concurrent_saves_from_many_threads_all_land(tmp_path: Path) -> None:
    store = SqliteSessionStore(tmp_path / "s.sqlite3")
    sessions = [_session(str(i)) for i in range(200)]

    def save(chunk: list[Session]) -> None:
        for s in chunk:
            store.save(s)
            assert store.load(s.session_id) == s

    threads = [threading.Thread(target=save, args=(sessions[i::8],)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert sorted(store.list_ids()) == sorted(s.session_id for s in sessions)


def test_an_unreadable_row_is_a_clear_session_error(tmp_path: Path) -> None:
    path = tmp_path / "s.sqlite3"
    store = SqliteSessionStore(path)
    store._db.execute("INSERT INTO sessions (session_id, data) VALUES ('s_bad', '{oops')")
    with pytest.raises(SessionError, match="unreadable"):
        store.load("s_bad")


def test_a_path_that_cannot_be_opened_is_a_config_error(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(ConfigError) as info:
        SqliteSessionStore(blocker / "s.sqlite3")
    assert info.value.field == "persistence.path"
