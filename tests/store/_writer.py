"""A writer process for the SQLite store tests: appends messages and turns to one session
and prints ``ack <message id>`` after each append has returned (so it is durable)."""

from __future__ import annotations

import sys
from pathlib import Path

from context_broker.server.stores.sqlite import SqliteSessionStore

from contextcore.sessions import RequestContext
from contextcore.store import MessageRecord


def append_many(
    path: str, session_id: str, prefix: str, count: int, announce: bool = False
) -> None:
    """Append ``count`` messages ``<prefix>-<i>`` (and as many turns) to ``session_id``."""
    store = SqliteSessionStore(Path(path))
    for i in range(count):
        mid = f"{prefix}-{i}"
        store.append_messages(
            session_id, [MessageRecord(mid, {"id": mid, "role": "user", "content": mid})]
        )
        store.append_turn(
            session_id,
            RequestContext(f"r_{prefix}_{i}", session_id, "2026-01-01T00:00:00.000Z", mid, ()),
        )
        if announce:
            print(f"ack {mid}", flush=True)
    store.close()


if __name__ == "__main__":
    append_many(sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), announce=True)
