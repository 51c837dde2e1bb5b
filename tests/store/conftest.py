"""The ``store`` fixture: every session-store backend, one test run per backend.

``BACKENDS`` maps a backend's name to a factory ``(request, tmp_path) -> iterator of a
fresh, empty store``; a factory may ask ``request`` for other fixtures (a database server
started once per test session). Add a backend by adding an entry: every contract test then
runs against it.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from context_broker.server.stores.postgres import PostgresSessionStore
from context_broker.server.stores.redis import RedisSessionStore
from context_broker.server.stores.sqlite import SqliteSessionStore
from servers import PostgresServer, RedisServer, postgres_server, redis_server

from contextcore.memory_store import MemorySessionStore
from contextcore.store import SessionStore

__all__ = ["postgres_server", "redis_server"]  # session-wide servers, started on first use

StoreFactory = Callable[[pytest.FixtureRequest, Path], Iterator[SessionStore]]


def _memory(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[SessionStore]:
    yield MemorySessionStore()


def _sqlite(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[SessionStore]:
    store = SqliteSessionStore(tmp_path / "sessions.sqlite3")
    yield store
    store.close()


_schemas = itertools.count()


def _postgres(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[SessionStore]:
    server: PostgresServer = request.getfixturevalue("postgres_server")
    store = PostgresSessionStore(server.create_schema(f"contract_{next(_schemas)}"))
    yield store
    store.close()


def _redis(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[SessionStore]:
    server: RedisServer = request.getfixturevalue("redis_server")
    server.flush()
    store = RedisSessionStore(server.url())
    yield store
    store.close()


BACKENDS: dict[str, StoreFactory] = {
    "memory": _memory,
    "sqlite": _sqlite,
    "postgres": _postgres,
    "redis": _redis,
}


@pytest.fixture(params=sorted(BACKENDS))
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[SessionStore]:
    """A fresh, empty store of each backend in turn."""
    yield from BACKENDS[request.param](request, tmp_path)
