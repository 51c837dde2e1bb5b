"""The ``store`` fixture: every session-store backend, one test run per backend.

``BACKENDS`` maps a backend's name to a factory ``(request, tmp_path) -> iterator of a
fresh, empty store``; a factory may ask ``request`` for other fixtures (a database server
started once per test session). Add a backend by adding an entry: every contract test then
runs against it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from contextcore.store import MemorySessionStore, SessionStore
from server.stores.sqlite import SqliteSessionStore

StoreFactory = Callable[[pytest.FixtureRequest, Path], Iterator[SessionStore]]


def _memory(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[SessionStore]:
    yield MemorySessionStore()


def _sqlite(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[SessionStore]:
    store = SqliteSessionStore(tmp_path / "sessions.sqlite3")
    yield store
    store.close()


BACKENDS: dict[str, StoreFactory] = {
    "memory": _memory,
    "sqlite": _sqlite,
}


@pytest.fixture(params=sorted(BACKENDS))
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[SessionStore]:
    """A fresh, empty store of each backend in turn."""
    yield from BACKENDS[request.param](request, tmp_path)
