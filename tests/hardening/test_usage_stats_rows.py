"""get_usage_stats over a real SQLite file damaged by hand: unreadable stored rows are left
out and named in ``warnings``; every readable turn is still counted."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import anyio
from mcp import Client, StdioServerParameters

from tests.support.broker_procs import BROKER, server_env, write_config
from tests.support.mcp_calls import call


def _broker(config: Path) -> Client:
    params = StdioServerParameters(
        command=BROKER, args=["serve", "--config", str(config)], env=server_env()
    )
    return Client(params)


async def _sessions_with_turns(client: Client, turns: list[int]) -> list[str]:
    ids = []
    for count in turns:
        sid = (await call(client, "create_session"))["session_id"]
        for i in range(count):
            await call(client, "build_request_context", session_id=sid, message=f"SQL queries {i}")
        ids.append(sid)
    return ids


def _damage(db: Path, sid: str, seq_rank: int, change: Any) -> None:
    with sqlite3.connect(db) as conn:
        seq, data = conn.execute(
            "SELECT seq, data FROM turns WHERE session_id = ? ORDER BY seq LIMIT 1 OFFSET ?",
            (sid, seq_rank),
        ).fetchone()
        conn.execute(
            "UPDATE turns SET data = ? WHERE session_id = ? AND seq = ?", (change(data), sid, seq)
        )
    conn.close()


def _without_items(data: str) -> str:
    row = json.loads(data)
    del row["items"]
    return json.dumps(row)


def _with_text_score(data: str) -> str:
    row = json.loads(data)
    row["include_score"] = "high"
    return json.dumps(row)


async def test_malformed_stored_turns_are_skipped_and_named_in_warnings(tmp_path: Path) -> None:
    config = write_config(tmp_path, backend="sqlite")
    with anyio.fail_after(120):
        async with _broker(config) as client:
            corrupt, missing, odd, _intact = await _sessions_with_turns(client, [1, 2, 2, 1])
        db = tmp_path / "sessions.sqlite3"
        _damage(db, corrupt, 0, lambda data: "{not json")
        _damage(db, missing, 0, _without_items)
        _damage(db, odd, 1, _with_text_score)
        async with _broker(config) as client:
            stats = await call(client, "get_usage_stats")
            report = (await client.call_tool("get_usage_stats", {})).content[0].text  # type: ignore[union-attr]
    warnings = stats["warnings"]
    assert stats["sessions"] == 4 and stats["turns"] == 3  # missing 1, odd 1, intact 1
    assert len(warnings) == 3, warnings
    assert any(corrupt in w and "turn 0" in w for w in warnings)
    assert any(missing in w and "turn 0" in w and "items" in w for w in warnings)
    assert any(odd in w and "include_score" in w and "'high'" in w for w in warnings)
    assert "left out (3)" in report
