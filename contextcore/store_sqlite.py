"""A session store in one SQLite file: durable on ``save``, safe to share between threads.

Each session is one row holding the JSON of ``Session.to_dict()``; a save replaces the row
whole, so a session is never half-written. The database runs in WAL mode with
``synchronous=FULL``: a commit is on disk when ``save`` returns, even across a power loss
(``NORMAL`` would only survive a process crash, and the broker promises more).
"""

from __future__ import annotations

import json
import sqlite3
import threading
from pathlib import Path

from .errors import ConfigError, SessionError
from .sessions import Session

__all__ = ["SqliteSessionStore"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS sessions (
    session_id TEXT PRIMARY KEY,
    data TEXT NOT NULL,
    updated_at REAL NOT NULL DEFAULT (julianday('now'))
)
"""


class SqliteSessionStore:
    """Sessions in a SQLite file; ``save`` commits before it returns."""

    def __init__(self, path: Path) -> None:
        self.path = path
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            # One connection guarded by a lock: sqlite3 objects may cross threads when
            # check_same_thread is off, as long as calls never overlap.
            self._db = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=FULL")
            self._db.execute("PRAGMA busy_timeout=5000")
            self._db.execute(_SCHEMA)
        except (OSError, sqlite3.Error) as exc:
            raise ConfigError(
                f"cannot open the session database {str(path)!r}: {exc}; check persistence.path",
                field="persistence.path",
            ) from exc
        self._lock = threading.Lock()

    def load(self, session_id: str) -> Session | None:
        """The stored session, or None."""
        with self._lock:
            row = self._db.execute(
                "SELECT data FROM sessions WHERE session_id = ?", (session_id,)
            ).fetchone()
        if row is None:
            return None
        try:
            return Session.from_dict(json.loads(row[0]))
        except (ValueError, KeyError, TypeError) as exc:
            raise SessionError(
                f"session {session_id!r} is stored but unreadable ({exc}); the database "
                f"{str(self.path)!r} may be damaged",
                field="session_id",
            ) from exc

    def save(self, session: Session) -> None:
        """Replace the session's row; committed (and synced) when this returns."""
        data = json.dumps(session.to_dict(), ensure_ascii=False, separators=(",", ":"))
        with self._lock:
            self._db.execute(
                "INSERT INTO sessions (session_id, data) VALUES (?, ?) "
                "ON CONFLICT(session_id) DO UPDATE SET data = excluded.data, "
                "updated_at = julianday('now')",
                (session.session_id, data),
            )

    def list_ids(self) -> list[str]:
        """Every stored session id, oldest change first."""
        with self._lock:
            rows = self._db.execute(
                "SELECT session_id FROM sessions ORDER BY updated_at, session_id"
            ).fetchall()
        return [r[0] for r in rows]

    def close(self) -> None:
        """Close the database; the store cannot be used afterwards."""
        with self._lock:
            self._db.close()
