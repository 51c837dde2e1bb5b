"""Used against selected per item and suggested include modes, through get_usage_stats on an
in-memory broker and `context-broker stats` on a SQLite store (hash embedder: fast and
deterministic)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
from context_broker.server.host.mcp_server import build_server
from context_broker.server.parts import build_parts
from context_broker.server.settings import load_config
from context_broker.server.stores.sqlite import SqliteSessionStore
from mcp import Client

from tests.support.hash_embedder import HashEmbedder

BROKER = str(Path(sys.executable).parent / "context-broker")
CONFIG = """
[search]
top_n = 1
{persistence}

[[rules]]
name = "house-style"
description = "How to write answers"
text = "Answer in British English."
include = "always"

[[rules]]
name = "sql-safety"
description = "Database queries"
text = "Always use parameterized SQL queries; never build SQL with string formatting."
include = "agent"

[[rules]]
name = "helm-charts"
description = "Kubernetes deployment manifests"
text = "Pin chart versions and keep values files per environment."
include = "agent"
"""
SQL = [
    "parameterized SQL queries for the orders table",
    "write SQL queries safely",
    "SQL queries with user input",
    "database queries in SQL",
    "review these SQL queries",
]


def write_config(tmp_path: Path, *, sqlite: bool = False) -> Path:
    persistence = '[persistence]\nbackend = "sqlite"\npath = "sessions.db"' if sqlite else ""
    path = tmp_path / "broker.toml"
    path.write_text(CONFIG.format(persistence=persistence), encoding="utf-8")
    return path


async def call(client: Client, name: str, /, **arguments: Any) -> tuple[str, dict[str, Any]]:
    with anyio.fail_after(20):
        result = await client.call_tool(name, arguments)
    text = result.content[0].text  # type: ignore[union-attr]
    assert not result.is_error, text
    assert isinstance(result.structured_content, dict)
    return text, result.structured_content


def rows(stats: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {row["key"]: row for row in stats["items"]}


def suggested(stats: dict[str, Any]) -> dict[str, str]:
    return {s["key"]: s["suggested"] for s in stats["suggestions"]}


async def test_stats_count_used_against_selected_and_suggest_include_modes(
    tmp_path: Path,
) -> None:
    parts = build_parts(load_config(write_config(tmp_path), environ={}), embedder=HashEmbedder())
    async with Client(build_server(parts.broker)) as client:
        _, created = await call(client, "create_session")
        sid = created["session_id"]
        _, cold = await call(client, "get_usage_stats")
        assert cold["turns_with_usage"] == 0 and cold["suggestions"] == []
        for message in SQL:
            _, turn = await call(client, "build_request_context", session_id=sid, message=message)
            await call(
                client,
                "record_usage",
                session_id=sid,
                request_id=turn["request_id"],
                used=["rule:sql-safety"],
                unused=["rule:house-style"],
            )
        text, stats = await call(client, "get_usage_stats", session_id=sid)
        assert stats["turns"] == 5 and stats["turns_with_usage"] == 5
        sql, house = rows(stats)["rule:sql-safety"], rows(stats)["rule:house-style"]
        assert (sql["selected"], sql["used"], sql["missed"], sql["precision"]) == (5, 5, 0, 1.0)
        assert (house["selected"], house["used"], house["precision"]) == (5, 0, 0.0)
        assert stats["selected_never_used"] == ["rule:house-style"]
        assert suggested(stats) == {
            "rule:house-style": "agent",
            "rule:sql-safety": "always",
            "rule:helm-charts": "review",
        }
        assert "rule:house-style: always -> agent" in text
        assert "rule:sql-safety: 5 / 5 (100%), missed 0" in text

        # A turn that used an item search did not select: a miss, and sql-safety is no
        # longer used in every turn.
        _, turn = await call(
            client, "build_request_context", session_id=sid, message="how do I roll out the release"
        )
        await call(
            client,
            "record_usage",
            session_id=sid,
            request_id=turn["request_id"],
            used=["rule:helm-charts"],
        )
        _, stats = await call(client, "get_usage_stats")
        helm = rows(stats)["rule:helm-charts"]
        assert (helm["used"], helm["missed"], helm["selected"], helm["precision"]) == (
            1,
            1,
            0,
            None,
        )
        assert rows(stats)["rule:sql-safety"]["used"] == 5
        assert suggested(stats) == {"rule:house-style": "agent", "rule:helm-charts": "review"}

        # Forgetting the session's usage removes it from the counts.
        await call(client, "forget_usage", session_id=sid)
        _, stats = await call(client, "get_usage_stats")
        assert stats["turns_with_usage"] == 0 and rows(stats)["rule:sql-safety"]["used"] == 0
        assert suggested(stats) == {"rule:helm-charts": "review"}


def test_the_stats_command_shows_usage_and_suggestions_from_the_store(tmp_path: Path) -> None:
    path = write_config(tmp_path, sqlite=True)
    config = load_config(path, environ={})
    store = SqliteSessionStore(config.resolve(Path("sessions.db")))
    parts = build_parts(config, embedder=HashEmbedder(), store=store)
    sid = parts.broker.create_session().session_id
    for message in SQL:
        turn = parts.broker.build_request_context(sid, message)
        parts.broker.usage.record_usage(turn, ["rule:sql-safety"])
    store.close()
    out = subprocess.run(
        [BROKER, "stats", "--config", str(path), "--json"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    stats = json.loads(out.stdout)
    sql = rows(stats)["rule:sql-safety"]
    assert (sql["selected"], sql["used"], sql["precision"]) == (5, 5, 1.0)
    assert suggested(stats)["rule:house-style"] == "agent"
    text = subprocess.run(
        [BROKER, "stats", "--config", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    assert "recorded usage in 5 of 5 turn(s)" in text
    assert "rule:sql-safety: agent -> always: used in every one of the 5 turns" in text
