"""Message counts and token sums kept with the records, on every backend: ``get_context_stats``
reads them instead of the history, and a store written before they were kept gets them when
it opens."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import psycopg
import pytest
import redis
from context_broker.server.parts import build_parts
from context_broker.server.settings import AppConfig
from servers import PostgresServer, RedisServer

from contextcore.config import HistoryConfig
from contextcore.history import ConversationHistory, history_stats
from contextcore.services.history import HistoryService
from contextcore.store import MessageRecord, SessionStore
from tests.support.hash_embedder import HashEmbedder


def _service(store: SessionStore) -> HistoryService:
    parts = build_parts(AppConfig(), embedder=HashEmbedder(), store=store)
    return HistoryService(parts.broker, HistoryConfig())


def _messages(n: int, first: int = 0) -> list[dict[str, Any]]:
    return [
        {"role": "user" if i % 2 else "assistant", "content": f"message {i} " + "é" * (i % 7)}
        for i in range(first, first + n)
    ]


def _full_stats(service: HistoryService, sid: str) -> Any:
    """The figures computed from every stored message, as stats were before the counters."""
    store = service.broker.store
    raws = [m.raw for m in store.messages(sid)]
    return history_stats(
        ConversationHistory.from_records(raws, store.history_state(sid), store.snapshot(sid))
    )


def test_stats_come_from_counters_that_follow_appends_rewrites_and_deletes(
    store: SessionStore,
) -> None:
    service = _service(store)
    sid = service.broker.create_session().session_id
    service.append_messages(sid, _messages(12))
    assert service.get_context_stats(sid) == _full_stats(service, sid)
    assert service.get_context_stats(sid).message_count == 12
    short = {"id": "compacted", "role": "user", "content": "[compacted]"}
    store.replace_messages(sid, [MessageRecord("compacted", short, (), 3, tokens=11)])
    assert store.delete_messages(sid, 0, 2) == 2
    count, tokens = store.message_totals(sid)
    kept = store.messages(sid)
    assert count == len(kept) == 10
    assert tokens == service.get_context_stats(sid).estimated_tokens
    service.clear_history(sid)
    assert service.get_context_stats(sid).cleared is False  # cleared at 12, 10 are left
    service.append_messages(sid, _messages(3, 100))
    assert store.message_totals(sid)[0] == 13
    assert store.message_totals("s_" + "0" * 32) == (0, 0)


def _legacy_sqlite(tmp_path: Path) -> tuple[SessionStore, Any]:
    from context_broker.server.stores.sqlite import SqliteSessionStore

    path = tmp_path / "sessions.sqlite3"

    def downgrade() -> None:  # the layout of schema version 2: no counters
        with sqlite3.connect(path) as db:
            db.execute("ALTER TABLE messages DROP COLUMN tokens")
            db.execute("ALTER TABLE session_headers DROP COLUMN message_total")
            db.execute("ALTER TABLE session_headers DROP COLUMN message_tokens")
            db.execute("UPDATE schema_version SET version = 2")

    return SqliteSessionStore(path), (downgrade, lambda: SqliteSessionStore(path))


def _legacy_postgres(request: pytest.FixtureRequest) -> tuple[SessionStore, Any]:
    from context_broker.server.stores.postgres import PostgresSessionStore

    server: PostgresServer = request.getfixturevalue("postgres_server")
    url = server.create_schema("legacy_totals")

    def downgrade() -> None:  # the layout of schema version 1
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("ALTER TABLE messages DROP COLUMN tokens")
            conn.execute("ALTER TABLE sessions DROP COLUMN message_total")
            conn.execute("ALTER TABLE sessions DROP COLUMN message_tokens")
            conn.execute("DELETE FROM schema_version WHERE version > 1")

    return PostgresSessionStore(url), (downgrade, lambda: PostgresSessionStore(url))


def _legacy_redis(request: pytest.FixtureRequest) -> tuple[SessionStore, Any]:
    from context_broker.server.stores.redis import RedisSessionStore

    server: RedisServer = request.getfixturevalue("redis_server")
    server.flush()
    url = server.url()

    def downgrade() -> None:  # layout 1: no counters, id records without tokens
        with redis.Redis.from_url(url) as client:
            for key in client.keys("cb:s:*:h"):
                client.hdel(key, "msg_total", "msg_tokens")
            for key in client.keys("cb:s:*:msgmeta"):
                for seq, meta in client.hgetall(key).items():
                    client.hset(key, seq, meta.decode().rsplit(",", 1)[0] + "]")
            client.set("cb:version", 1)

    return RedisSessionStore(url), (downgrade, lambda: RedisSessionStore(url))


@pytest.mark.parametrize("backend", ["sqlite", "postgres", "redis"])
def test_a_store_written_before_the_counters_gets_them_when_it_opens(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    if backend == "sqlite":
        store, (downgrade, reopen) = _legacy_sqlite(tmp_path)
    elif backend == "postgres":
        store, (downgrade, reopen) = _legacy_postgres(request)
    else:
        store, (downgrade, reopen) = _legacy_redis(request)
    service = _service(store)
    sid = service.broker.create_session().session_id
    service.append_messages(sid, _messages(25))
    expected = service.get_context_stats(sid)
    store.close()
    downgrade()
    store = reopen()
    try:
        service = _service(store)
        assert service.get_context_stats(sid) == expected == _full_stats(service, sid)
        service.append_messages(sid, _messages(2, 50))
        assert service.get_context_stats(sid) == _full_stats(service, sid)
        store.delete_messages(sid, 0, 5)
        assert service.get_context_stats(sid) == _full_stats(service, sid)
    finally:
        store.close()
