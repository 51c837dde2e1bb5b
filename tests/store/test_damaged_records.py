"""One damaged stored record costs only itself, on every backend: the session's turns, history
and stats still read (the record skipped and named in the result and the log), appends go
on, ``check`` counts it and ``repair`` shows it, then removes it."""

from __future__ import annotations

import logging
import os
import sqlite3
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import psycopg
import pytest
import redis
from context_broker.server.host.mcp_server import build_server
from context_broker.server.parts import build_parts
from context_broker.server.settings import load_config
from context_broker.server.stores import build_store
from mcp import Client
from servers import PostgresServer, RedisServer

from contextcore.config import HistoryConfig
from contextcore.services.history import HistoryService
from tests.support.broker_procs import write_config
from tests.support.hash_embedder import HashEmbedder
from tests.support.mcp_calls import call

BROKER = str(Path(sys.executable).parent / "context-broker")
Damage = Callable[[str], None]


def _sqlite(folder: Path, request: pytest.FixtureRequest) -> tuple[Path, Damage]:
    config = write_config(folder, backend="sqlite")

    def damage(sid: str) -> None:
        with sqlite3.connect(folder / "sessions.sqlite3") as db:
            db.execute(
                'UPDATE messages SET raw = \'{"role": "us\' WHERE session_id = ? AND seq = 2',
                (sid,),
            )
            db.execute(
                "UPDATE turns SET data = 'not json' WHERE session_id = ? AND seq = 0", (sid,)
            )

    return config, damage


def _with_url(folder: Path, backend: str, url: str) -> Path:
    path = write_config(folder, backend=backend)
    line = f'backend = "{backend}"'
    text = path.read_text(encoding="utf-8")
    path.write_text(text.replace(line, f'{line}\nurl = "{url}"', 1), encoding="utf-8")
    return path


def _postgres(folder: Path, request: pytest.FixtureRequest) -> tuple[Path, Damage]:
    server: PostgresServer = request.getfixturevalue("postgres_server")
    url = server.create_schema("damaged_rows")

    def damage(sid: str) -> None:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(
                'UPDATE messages SET raw = \'{"role": "us\' WHERE session_id = %s AND seq = 2',
                (sid,),
            )
            conn.execute(
                "UPDATE turns SET data = 'not json' WHERE session_id = %s AND seq = 0", (sid,)
            )

    return _with_url(folder, "postgres", url), damage


def _redis(folder: Path, request: pytest.FixtureRequest) -> tuple[Path, Damage]:
    server: RedisServer = request.getfixturevalue("redis_server")
    server.flush()
    url = server.url()

    def damage(sid: str) -> None:
        with redis.Redis.from_url(url) as client:
            client.hset(f"cb:s:{{{sid}}}:msg", "2", '{"id": "m2", "raw": {"role": "us')
            client.lset(f"cb:s:{{{sid}}}:turns", 0, "not json")

    return _with_url(folder, "redis", url), damage


BACKENDS = {"sqlite": _sqlite, "postgres": _postgres, "redis": _redis}


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CONTEXT_BROKER_")}
    return subprocess.run(
        [BROKER, *args], capture_output=True, text=True, timeout=120, env=env, check=False
    )


@pytest.mark.parametrize("backend", sorted(BACKENDS))
async def test_a_damaged_message_and_turn_are_skipped_reported_counted_and_repaired(
    backend: str,
    tmp_path: Path,
    request: pytest.FixtureRequest,
    caplog: pytest.LogCaptureFixture,
) -> None:
    config_path, damage = BACKENDS[backend](tmp_path, request)
    config = load_config(config_path)
    store = build_store(config)
    try:
        parts = build_parts(config, embedder=HashEmbedder(), store=store)
        service = HistoryService(parts.broker, HistoryConfig())
        async with Client(build_server(parts.broker, history=service)) as client:
            sid = (await call(client, "create_session"))["session_id"]
            for i in range(3):
                await call(client, "build_request_context", session_id=sid, message=f"q {i}")
            messages = [{"role": "user", "content": f"message {i}"} for i in range(5)]
            await call(client, "append_messages", session_id=sid, messages=messages)
            damage(sid)
            with caplog.at_level(logging.WARNING):
                turns = await call(client, "list_turns", session_id=sid)
                window = await call(client, "get_history", session_id=sid, max_tokens=100_000)
            stats = await call(client, "get_context_stats", session_id=sid)
            assert len(turns["turns"]) == 2
            kept = [m["content"] for m in window["messages"]]
            assert kept == ["message 0", "message 1", "message 3", "message 4"]
            said = " | ".join(stats["skipped_records"])
            assert f"message 2 of session {sid}" in said and f"turn 0 of session {sid}" in said
            assert turns["skipped_records"] and window["skipped_records"]
            assert f"message 2 of session {sid}" in caplog.text
            more = [{"role": "user", "content": "after the damage"}]
            await call(client, "append_messages", session_id=sid, messages=more)
    finally:
        store.close()

    checked = _cli("check", "--config", str(config_path))
    assert "damaged records: 2" in checked.stdout, checked.stdout + checked.stderr
    shown = _cli("repair", "--config", str(config_path), "--dry-run")
    assert shown.returncode == 0, shown.stderr
    assert f"message 2 of session {sid}" in shown.stdout and "nothing was removed" in shown.stdout
    repaired = _cli("repair", "--config", str(config_path), "--yes")
    assert repaired.returncode == 0 and "removed 2 damaged record(s)" in repaired.stdout
    assert f"turn 0 of session {sid}" in repaired.stdout  # shown before removing
    again = _cli("check", "--config", str(config_path))
    assert "damaged records" not in again.stdout, again.stdout

    store = build_store(config)
    try:
        assert store.damaged_records() == []
        contents = [m.raw["content"] for m in store.messages(sid)]
        assert contents == ["message 0", "message 1", "message 3", "message 4", "after the damage"]
        assert store.message_totals(sid)[0] == 5
        assert len(store.turns(sid)) == 2
    finally:
        store.close()
