"""The PostgreSQL store's schema: one migration per version, applied in order.

A database records its version in ``schema_version``. Opening a store takes an advisory lock
for the transaction, so replicas starting together migrate once, then applies every missing
migration; a version newer than this code knows is refused. Add a version by appending a
migration to ``_MIGRATIONS``, never by editing one that shipped.
"""

from __future__ import annotations

import logging
from typing import Any

import psycopg

from contextcore.store import StoreError

from ._records import stored_tokens

__all__ = ["SCHEMA_VERSION", "migrate"]

log = logging.getLogger(__name__)

_MIGRATIONS: tuple[str, ...] = (
    """
    CREATE TABLE sessions (
        session_id text PRIMARY KEY,
        ord bigserial NOT NULL,
        agent text,
        created_at text NOT NULL,
        preset text,
        removed jsonb NOT NULL DEFAULT '[]',
        next_item integer NOT NULL DEFAULT 0,
        next_turn integer NOT NULL DEFAULT 0,
        next_message bigint NOT NULL DEFAULT 0,
        next_call integer NOT NULL DEFAULT 0
    );
    CREATE INDEX sessions_ord ON sessions (ord);
    CREATE TABLE session_items (
        session_id text NOT NULL, ref text NOT NULL, pos integer NOT NULL, item jsonb NOT NULL,
        PRIMARY KEY (session_id, ref)
    );
    CREATE TABLE turns (
        session_id text NOT NULL, seq integer NOT NULL, request_id text NOT NULL,
        data text NOT NULL, PRIMARY KEY (session_id, seq)
    );
    CREATE INDEX turns_request ON turns (session_id, request_id);
    CREATE TABLE messages (
        session_id text NOT NULL, seq bigint NOT NULL, message_id text NOT NULL,
        raw text NOT NULL, call_ids text[] NOT NULL, PRIMARY KEY (session_id, seq)
    );
    CREATE INDEX messages_id ON messages (session_id, message_id);
    CREATE TABLE message_calls (
        session_id text NOT NULL, call_id text NOT NULL, seq bigint NOT NULL
    );
    CREATE INDEX message_calls_id ON message_calls (session_id, call_id);
    CREATE INDEX message_calls_seq ON message_calls (session_id, seq);
    CREATE TABLE session_parts (
        session_id text NOT NULL, kind text NOT NULL, data text NOT NULL,
        PRIMARY KEY (session_id, kind)
    );
    CREATE TABLE calls (
        session_id text NOT NULL, seq integer NOT NULL, data text NOT NULL,
        PRIMARY KEY (session_id, seq)
    );
    CREATE TABLE usage_events (
        seq bigint PRIMARY KEY, session_id text, data text NOT NULL
    );
    CREATE INDEX usage_events_session ON usage_events (session_id, seq);
    CREATE TABLE counters (name text PRIMARY KEY, value bigint NOT NULL);
    INSERT INTO counters VALUES ('usage', 0);
    CREATE TABLE embeddings (
        model text NOT NULL, text_hash text NOT NULL, vector bytea NOT NULL,
        PRIMARY KEY (model, text_hash)
    );
    """,
    # 2: each message's estimated tokens, and per session the message count and token sum
    # (filled from the stored messages by _fill_totals), so stats cost the same at any length
    """
    ALTER TABLE messages ADD COLUMN tokens integer NOT NULL DEFAULT 0;
    ALTER TABLE sessions ADD COLUMN message_total bigint NOT NULL DEFAULT 0;
    ALTER TABLE sessions ADD COLUMN message_tokens bigint NOT NULL DEFAULT 0;
    """,
    # 3: the profile a session was created under (NULL for earlier sessions)
    """
    ALTER TABLE sessions ADD COLUMN IF NOT EXISTS profile text;
    """,
)
SCHEMA_VERSION = len(_MIGRATIONS)
_MIGRATION_LOCK = 0x6362_5F73_746F_7265  # any fixed key: "cb_store"


def migrate(cur: psycopg.Cursor[Any], where: str) -> None:
    """Bring the schema to ``SCHEMA_VERSION`` inside the caller's transaction; ``StoreError``
    if the database was written by a newer broker."""
    cur.execute("SELECT pg_advisory_xact_lock(%s)", (_MIGRATION_LOCK,))
    cur.execute("CREATE TABLE IF NOT EXISTS schema_version (version integer NOT NULL)")
    cur.execute("SELECT coalesce(max(version), 0) FROM schema_version")
    row = cur.fetchone()
    current = int(row[0]) if row else 0
    if current > SCHEMA_VERSION:
        raise StoreError(
            f"the PostgreSQL session store at {where!r} has schema version {current}, "
            f"newer than this broker's {SCHEMA_VERSION}; upgrade the broker or use another "
            "database"
        )
    for version in range(current + 1, SCHEMA_VERSION + 1):
        log.info("session store %s: migrating to schema version %d", where, version)
        cur.execute(_MIGRATIONS[version - 1])
        if version == 2:
            _fill_totals(cur)
        cur.execute("INSERT INTO schema_version VALUES (%s)", (version,))


def _fill_totals(cur: psycopg.Cursor[Any]) -> None:
    """Each stored message's tokens, then each session's message count and token sum."""
    cur.execute("SELECT session_id, seq, raw FROM messages")
    tokens = [(stored_tokens(raw), sid, seq) for sid, seq, raw in cur.fetchall()]
    cur.executemany("UPDATE messages SET tokens = %s WHERE session_id = %s AND seq = %s", tokens)
    cur.execute(
        "UPDATE sessions s SET message_total = t.n, message_tokens = t.tokens FROM "
        "(SELECT session_id, count(*) AS n, sum(tokens) AS tokens FROM messages "
        "GROUP BY session_id) t WHERE s.session_id = t.session_id"
    )
