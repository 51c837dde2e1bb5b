"""A proxied call with a session_id is kept as its own record in the session store."""

from __future__ import annotations

import sys
from pathlib import Path

import anyio
from context_broker.server.stores.sqlite import SqliteSessionStore
from mcp import Client, StdioServerParameters

BIN = Path(sys.executable).parent


async def test_a_call_with_a_session_id_is_a_record_of_its_own_in_the_store(
    tmp_path: Path,
) -> None:
    config = tmp_path / "broker.toml"
    config.write_text(
        f"""
[search]
semantic = false

[persistence]
backend = "sqlite"
path = "sessions.sqlite3"

[servers.time]
command = "{BIN / "mcp-server-time"}"
""",
        encoding="utf-8",
    )
    params = StdioServerParameters(
        command=str(BIN / "context-broker"), args=["serve", "--config", str(config)]
    )
    with anyio.fail_after(60):
        async with Client(params, mode="legacy") as client:
            created = await client.call_tool("create_session", {})
            sid = created.structured_content["session_id"]  # type: ignore[index]
            for zone in ("Asia/Tokyo", "Mars/Base"):
                arguments = {"timezone": zone}
                await client.call_tool(
                    "call_tool",
                    {
                        "server": "time",
                        "tool": "get_current_time",
                        "arguments": arguments,
                        "session_id": sid,
                    },
                )
    store = SqliteSessionStore(tmp_path / "sessions.sqlite3")
    try:
        calls = store.calls(sid)
    finally:
        store.close()
    assert [(c["server"], c["tool"], c["arguments"]) for c in calls] == [
        ("time", "get_current_time", {"timezone": "Asia/Tokyo"}),
        ("time", "get_current_time", {"timezone": "Mars/Base"}),
    ]
    assert [c["seq"] for c in calls] == [0, 1]
    assert "Asia/Tokyo" in calls[0]["result"] and not calls[0]["is_error"]
    assert calls[1]["is_error"]
