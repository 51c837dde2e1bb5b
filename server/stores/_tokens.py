"""OAuth tokens of downstream servers in the shared session store, so broker replicas share them.

Each server's entry (its tokens, client registration and discovered metadata: see
``server.gateway.oauth.store``) is one JSON value, written in one statement so a reader never
sees half of one:

    postgres   table ``gateway_tokens (server text PRIMARY KEY, entry text)``, one upsert
    redis      hash ``cb:oauth``: server name -> entry, one ``HSET``
    sqlite     table ``gateway_tokens`` in the session file, one upsert; the file (and so its
               -wal and -shm) is made private (0600) first, whoever creates it

The table is created on first use (``IF NOT EXISTS``, under PostgreSQL's advisory lock), apart
from the session schema's versions, so a store that never keeps a token has none. Tokens are
read when a downstream connection starts and when its token has expired, so each operation
opens its own short connection instead of holding a pool. Values travel as statement
parameters, never in the statement's text, and errors name the store by its safe address.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from contextlib import closing, contextmanager
from pathlib import Path
from typing import Any

from context_broker.server.settings import AppConfig

from contextcore.store import StoreError, StoreUnavailable

from ._shared import dumps
from ._sqlite_schema import _keep_private
from ._urls import describe_url, scrub

__all__ = ["PostgresTokenRows", "RedisTokenRows", "SqliteTokenRows", "shared_token_rows"]

_TABLE = "CREATE TABLE IF NOT EXISTS gateway_tokens (server text PRIMARY KEY, entry text NOT NULL)"
_UPSERT = (
    "INSERT INTO gateway_tokens (server, entry) VALUES ({p}, {p}) "
    "ON CONFLICT (server) DO UPDATE SET entry = excluded.entry"
)
_LOCK = 0x6362_5F74_6F6B_656E  # any fixed key: "cb_token"
_REDIS_KEY = "cb:oauth"
_TIMEOUT = 10.0


def shared_token_rows(config: AppConfig) -> PostgresTokenRows | RedisTokenRows | SqliteTokenRows:
    """The token rows of the ``[persistence]`` store (SQLite, PostgreSQL or Redis)."""
    from . import _url

    backend = config.persistence.backend
    if backend == "sqlite":
        path = config.persistence.path
        if path is None:
            raise StoreError('persistence.backend = "sqlite" needs persistence.path')
        return SqliteTokenRows(config.resolve(path))
    if backend == "postgres":
        return PostgresTokenRows(_url(config))
    return RedisTokenRows(_url(config))


def _entry(text: Any) -> dict[str, Any] | None:
    """A stored entry as a dict; None when absent or not an object."""
    if text is None:
        return None
    value = json.loads(text)
    return value if isinstance(value, dict) else None


class PostgresTokenRows:
    """Token entries in PostgreSQL's ``gateway_tokens`` table."""

    def __init__(self, url: str) -> None:
        self._url = url
        self.where = describe_url(url)
        self._ready = False

    @contextmanager
    def _cursor(self) -> Iterator[Any]:
        """One transaction on a connection of its own, the table made sure of once."""
        import psycopg

        try:
            with (
                psycopg.connect(self._url, connect_timeout=int(_TIMEOUT)) as conn,
                conn.cursor() as cur,
            ):
                if not self._ready:  # replicas starting together create it once
                    cur.execute("SELECT pg_advisory_xact_lock(%s)", (_LOCK,))
                    cur.execute(_TABLE)
                yield cur
            self._ready = True
        except psycopg.Error as exc:
            raise StoreUnavailable(
                f"the PostgreSQL store at {self.where!r} failed "
                f"({scrub(str(exc).strip(), self._url)}); check [persistence] url"
            ) from None

    def read(self, server: str) -> dict[str, Any] | None:
        with self._cursor() as cur:
            cur.execute("SELECT entry FROM gateway_tokens WHERE server = %s", (server,))
            row = cur.fetchone()
        return None if row is None else _entry(row[0])

    def write(self, server: str, row: dict[str, Any]) -> None:
        with self._cursor() as cur:
            cur.execute(_UPSERT.format(p="%s"), (server, dumps(row)))

    def delete(self, server: str) -> bool:
        with self._cursor() as cur:
            cur.execute("DELETE FROM gateway_tokens WHERE server = %s", (server,))
            return bool(cur.rowcount)

    def read_all(self) -> dict[str, dict[str, Any]]:
        with self._cursor() as cur:
            cur.execute("SELECT server, entry FROM gateway_tokens")
            rows = cur.fetchall()
        return {name: e for name, text in rows if (e := _entry(text)) is not None}


class RedisTokenRows:
    """Token entries in Redis' ``cb:oauth`` hash."""

    def __init__(self, url: str) -> None:
        self._url = url
        self.where = describe_url(url)

    @contextmanager
    def _client(self) -> Iterator[Any]:
        import redis

        try:
            with redis.Redis.from_url(
                self._url, socket_timeout=_TIMEOUT, socket_connect_timeout=_TIMEOUT
            ) as client:
                yield client
        except redis.RedisError as exc:
            raise StoreUnavailable(
                f"the Redis store at {self.where!r} failed "
                f"({scrub(str(exc).strip(), self._url)}); check [persistence] url"
            ) from None

    def read(self, server: str) -> dict[str, Any] | None:
        with self._client() as client:
            return _entry(client.hget(_REDIS_KEY, server))

    def write(self, server: str, row: dict[str, Any]) -> None:
        with self._client() as client:
            client.hset(_REDIS_KEY, server, dumps(row))

    def delete(self, server: str) -> bool:
        with self._client() as client:
            return bool(client.hdel(_REDIS_KEY, server))

    def read_all(self) -> dict[str, dict[str, Any]]:
        with self._client() as client:
            raw = client.hgetall(_REDIS_KEY)
        return {k.decode(): e for k, v in raw.items() if (e := _entry(v)) is not None}


class SqliteTokenRows:
    """Token entries in the ``gateway_tokens`` table of the SQLite session file."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.where = str(path)
        self._private = False

    @contextmanager
    def _cursor(self) -> Iterator[sqlite3.Cursor]:
        if not self._private:  # tokens go in: created 0600, or group and other access taken off
            _keep_private(self.path)
            self._private = True
        try:
            with closing(sqlite3.connect(self.path, timeout=_TIMEOUT)) as conn, conn:
                conn.execute(_TABLE)
                yield conn.cursor()
        except sqlite3.Error as exc:
            raise StoreUnavailable(
                f"the SQLite store {self.where!r} failed ({exc}); check [persistence] path"
            ) from None

    def read(self, server: str) -> dict[str, Any] | None:
        with self._cursor() as cur:
            row = cur.execute("SELECT entry FROM gateway_tokens WHERE server = ?", (server,))
            found = row.fetchone()
        return None if found is None else _entry(found[0])

    def write(self, server: str, row: dict[str, Any]) -> None:
        with self._cursor() as cur:
            cur.execute(_UPSERT.format(p="?"), (server, dumps(row)))

    def delete(self, server: str) -> bool:
        with self._cursor() as cur:
            return bool(
                cur.execute("DELETE FROM gateway_tokens WHERE server = ?", (server,)).rowcount
            )

    def read_all(self) -> dict[str, dict[str, Any]]:
        with self._cursor() as cur:
            rows = cur.execute("SELECT server, entry FROM gateway_tokens").fetchall()
        return {name: e for name, text in rows if (e := _entry(text)) is not None}
