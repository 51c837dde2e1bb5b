"""The SQLite store on a real file: durability settings, several writer processes, a writer
killed mid-load, migration of the one-table format, and files it must refuse."""

from __future__ import annotations

import json
import multiprocessing
import os
import signal
import sqlite3
import subprocess
import sys
import threading
from dataclasses import replace
from pathlib import Path

import pytest
from _writer import append_many
from context_broker.server.parts import build_parts
from context_broker.server.settings import AppConfig
from context_broker.server.stores.sqlite import SqliteSessionStore

from contextcore.config import HistoryConfig
from contextcore.errors import ConfigError
from contextcore.history import (
    CollapseGroup,
    ConversationHistory,
    Summary,
    collapse_messages,
    update_snapshot,
)
from contextcore.history import append_messages as history_append
from contextcore.items import ItemRef
from contextcore.services.history import HistoryService
from contextcore.sessions import RequestContext, RequestItem, Session, SessionItem, new_session_id
from contextcore.store import SessionHeader
from tests.support.hash_embedder import HashEmbedder

WRITER = Path(__file__).with_name("_writer.py")
REPO = Path(__file__).resolve().parents[2]


def _new(store: SqliteSessionStore) -> str:
    sid = new_session_id()
    store.create_session(SessionHeader(sid, None, "2026-01-01T00:00:00.000Z"), ())
    return sid


def test_the_database_is_in_wal_mode_with_full_sync(tmp_path: Path) -> None:
    store = SqliteSessionStore(tmp_path / "s.sqlite3")
    assert store._db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert store._db.execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL
    assert store._db.execute("SELECT version FROM schema_version").fetchall() == [(4,)]


def test_records_survive_a_new_store_on_the_same_file(tmp_path: Path) -> None:
    path = tmp_path / "s.sqlite3"
    store = SqliteSessionStore(path)
    sid = _new(store)
    store.add_items(sid, [SessionItem(ItemRef("rule", "r"), "manual")])
    store.append_turn(sid, RequestContext("r_1", sid, "2026", "hi", ()))
    store.close()
    again = SqliteSessionStore(path)
    assert again.items(sid) == (SessionItem(ItemRef("rule", "r"), "manual"),)
    assert [t.request_id for t in again.turns(sid)] == ["r_1"]


def test_concurrent_appends_from_several_processes_all_land_in_one_order(
    tmp_path: Path,
) -> None:
    path = tmp_path / "s.sqlite3"
    store = SqliteSessionStore(path)
    sid = _new(store)
    procs, per_proc = 4, 60
    ctx = multiprocessing.get_context("spawn")
    workers = [
        ctx.Process(target=append_many, args=(str(path), sid, f"p{p}", per_proc))
        for p in range(procs)
    ]
    for w in workers:
        w.start()
    for w in workers:
        w.join(timeout=120)
    assert [w.exitcode for w in workers] == [0] * procs
    read = store.messages(sid)
    assert [m.seq for m in read] == list(range(procs * per_proc))
    for p in range(procs):
        mine = [m.id for m in read if m.id.startswith(f"p{p}-")]
        assert mine == [f"p{p}-{i}" for i in range(per_proc)]
    assert store.turn_count(sid) == procs * per_proc


def test_every_acknowledged_write_survives_sigkill_of_the_writer(tmp_path: Path) -> None:
    path = tmp_path / "s.sqlite3"
    store = SqliteSessionStore(path)
    sid = _new(store)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen(
        [sys.executable, str(WRITER), str(path), sid, "k", "100000"],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    acked: list[str] = []
    enough = threading.Event()

    def read() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            acked.append(line.split()[1])
            if len(acked) >= 300:
                enough.set()
        enough.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    assert enough.wait(timeout=120), "the writer acknowledged too few writes"
    proc.send_signal(signal.SIGKILL)
    assert proc.wait(timeout=30) == -signal.SIGKILL
    reader.join(timeout=30)
    assert proc.stdout is not None
    proc.stdout.close()
    assert len(acked) >= 300
    store.close()
    stored = [m.id for m in SqliteSessionStore(path).messages(sid)]
    assert stored[: len(acked)] == acked  # every acknowledged write, in order
    assert stored == [f"k-{i}" for i in range(len(stored))]


# -- migration -------------------------------------------------------------------------


def _v1_file(path: Path) -> tuple[Session, ConversationHistory]:
    """A file in the previous format: one ``sessions`` table of JSON documents."""
    sid = new_session_id()
    raws: list[object] = [
        {"role": "user", "content": "find the failing test"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "grep", "arguments": "{}"}}
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "tests/x.py:3"},
        {"role": "assistant", "content": "it is tests/x.py"},
    ]
    history = history_append(ConversationHistory(), raws)
    ids = [m.id for m in history.messages]
    history = collapse_messages(history, CollapseGroup("search", tuple(ids[1:3]), "grep"))
    history = update_snapshot(history, {"goal": "green tests", "completedActions": ["grep"]})
    history = replace(history, summary=Summary("looked for the test", 2, "extractive"))
    turn = RequestContext(
        "r_" + "1" * 32,
        sid,
        "2026-01-01T00:00:01.000Z",
        "héllo",
        (RequestItem(ItemRef("tool", "grep", "fs"), "agent", 0.61),),
        "hybrid",
        ("a warning",),
        include_score=0.7,
        parameters={"preset": "balanced"},
    )
    session = Session(
        sid,
        "coder",
        "2026-01-01T00:00:00.000Z",
        (SessionItem(ItemRef("rule", "style"), "always"),),
        (turn,),
        removed=(ItemRef("reference", "old"),),
        preset="precise",
    )
    doc = {**session.to_dict(), "extras": {"history": history.to_dict()}}
    empty = Session(new_session_id(), None, "2026-01-02T00:00:00.000Z")
    with sqlite3.connect(path) as db:
        db.execute(
            "CREATE TABLE sessions (session_id TEXT PRIMARY KEY, data TEXT NOT NULL, "
            "updated_at REAL NOT NULL DEFAULT (julianday('now')))"
        )
        for s, d in ((session, doc), (empty, empty.to_dict() | {"extras": {}})):
            db.execute(
                "INSERT INTO sessions (session_id, data) VALUES (?, ?)",
                (s.session_id, json.dumps(d)),
            )
    db.close()
    return session, history


def test_a_file_of_the_previous_format_is_migrated_without_loss(tmp_path: Path) -> None:
    path = tmp_path / "old.sqlite3"
    session, history = _v1_file(path)
    store = SqliteSessionStore(path)
    parts = build_parts(AppConfig(), embedder=HashEmbedder(), store=store)
    broker, service = parts.broker, HistoryService(parts.broker, HistoryConfig())
    sid = session.session_id
    assert len(store.list_session_ids()) == 2
    loaded = broker.full_session(sid)
    assert (loaded.agent, loaded.created_at, loaded.preset) == (
        "coder",
        session.created_at,
        "precise",
    )
    assert loaded.items == session.items and loaded.removed == session.removed
    assert loaded.turns == session.turns
    migrated = service.history(sid)
    assert [dict(m.raw) for m in migrated.messages] == [dict(m.raw) for m in history.messages]
    assert migrated.groups == history.groups and migrated.summary == history.summary
    assert migrated.snapshot == history.snapshot and migrated.shape == "openai"
    # Appends continue after the migrated messages; a migrated call id stays taken.
    added = service.append_messages(sid, [{"role": "user", "content": "thanks"}])
    assert added.message_count == 5
    with pytest.raises(Exception, match="c1"):
        service.append_messages(
            sid,
            [
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": "c1",
                            "type": "function",
                            "function": {"name": "g", "arguments": "{}"},
                        }
                    ],
                }
            ],
        )
    store.close()
    with sqlite3.connect(path) as db:
        tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        (kept,) = db.execute("SELECT count(*) FROM sessions_v1").fetchone()
    db.close()
    assert "sessions" not in tables and kept == 2
    # Opening again does not migrate twice.
    assert len(SqliteSessionStore(path).messages(sid)) == 5


def test_a_file_with_an_unreadable_old_row_is_refused_and_left_as_it_was(
    tmp_path: Path,
) -> None:
    path = tmp_path / "old.sqlite3"
    _v1_file(path)
    with sqlite3.connect(path) as db:
        db.execute("INSERT INTO sessions (session_id, data) VALUES ('s_bad', '{oops')")
    db.close()
    before = path.read_bytes()
    with pytest.raises(ConfigError) as info:
        SqliteSessionStore(path)
    assert str(path) in info.value.message and "'s_bad'" in info.value.message
    with sqlite3.connect(path) as db:
        tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    db.close()
    assert tables == {"sessions"} and len(path.read_bytes()) == len(before)


# -- bad files ---------------------------------------------------------------------------


def _real_db(path: Path, messages: int = 400) -> None:
    store = SqliteSessionStore(path)
    sid = _new(store)
    append_many(str(path), sid, "m", messages)
    store._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    store.close()


@pytest.mark.parametrize("kind", ["empty", "truncated", "not a database"])
def test_a_bad_file_is_refused_at_startup_naming_the_path(tmp_path: Path, kind: str) -> None:
    path = tmp_path / "sessions.sqlite3"
    if kind == "empty":
        path.write_bytes(b"")
    elif kind == "truncated":
        _real_db(path)
        data = path.read_bytes()
        path.write_bytes(data[: len(data) // 2])
    else:
        path.write_text("these are my notes, not a database\n" * 50)
    before = path.read_bytes()
    with pytest.raises(ConfigError) as info:
        SqliteSessionStore(path)
    assert repr(str(path)) in info.value.message and info.value.field == "persistence.path"
    assert path.read_bytes() == before  # never treated as a new store


def _write_config(folder: Path) -> Path:
    config = folder / "broker.toml"
    config.write_text(
        '[search]\nsemantic = false\n\n[persistence]\nbackend = "sqlite"\n'
        'path = "sessions.sqlite3"\n',
        encoding="utf-8",
    )
    return config


def _check(config: Path) -> subprocess.CompletedProcess[str]:
    broker = str(Path(sys.executable).parent / "context-broker")
    env = {k: v for k, v in os.environ.items() if not k.startswith("CONTEXT_BROKER_")}
    return subprocess.run(
        [broker, "check", "--config", str(config)],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )


def test_serve_and_check_refuse_an_empty_store_file(tmp_path: Path) -> None:
    config = _write_config(tmp_path)
    path = tmp_path / "sessions.sqlite3"
    path.write_bytes(b"")
    out = _check(config)
    assert out.returncode == 1, out.stdout + out.stderr
    assert str(path) in out.stdout and "empty (0 bytes)" in out.stdout
    assert path.stat().st_size == 0
    broker = str(Path(sys.executable).parent / "context-broker")
    served = subprocess.run(
        [broker, "serve", "--config", str(config)],
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    assert served.returncode != 0 and str(path) in served.stderr
    assert path.stat().st_size == 0


@pytest.mark.parametrize("how", ["deleted", "read-only"])
async def test_a_store_file_lost_while_serving_makes_writes_fail_as_tool_errors(
    tmp_path: Path, how: str
) -> None:
    from context_broker.server.host.mcp_server import build_server
    from mcp import Client

    from tests.support.mcp_calls import call, error

    path = tmp_path / "sessions.sqlite3"
    store = SqliteSessionStore(path)
    parts = build_parts(AppConfig(), embedder=HashEmbedder(), store=store)
    service = HistoryService(parts.broker, HistoryConfig())
    server = build_server(parts.broker, history=service)
    async with Client(server) as client:
        sid = (await call(client, "create_session"))["session_id"]
        await call(
            client, "append_messages", session_id=sid, messages=[{"role": "user", "content": "hi"}]
        )
        if how == "deleted":
            path.unlink()
        else:
            path.chmod(0o444)
        for name, args in (
            ("append_messages", {"messages": [{"role": "user", "content": "lost?"}]}),
            ("build_request_context", {"message": "which rules apply"}),
            ("create_session", {}),
        ):
            text = await error(
                client, name, **({"session_id": sid} | args if name != "create_session" else args)
            )
            assert repr(str(path)) in text and ("deleted" in text or "read-only" in text), text
    config = _write_config(tmp_path)
    if how == "read-only":
        out = _check(config)
        assert out.returncode == 1 and "read-only" in out.stdout and str(path) in out.stdout
    store.close()
