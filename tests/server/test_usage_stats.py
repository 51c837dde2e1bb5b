"""get_usage_stats, context://stats and `context-broker stats` over real sessions."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from context_broker.server.host.mcp_server import build_server
from context_broker.server.parts import build_parts
from context_broker.server.settings import load_config
from context_broker.server.stores.sqlite import SqliteSessionStore
from mcp import Client

from tests.support.broker_procs import BROKER, write_config
from tests.support.hash_embedder import HashEmbedder


async def test_usage_stats_tool_and_resource_report_inclusions(tmp_path: Path) -> None:
    config = load_config(write_config(tmp_path), environ={})
    parts = build_parts(config, embedder=HashEmbedder())
    async with Client(build_server(parts.broker)) as client:
        created = await client.call_tool("create_session", {})
        sid = created.structured_content["session_id"]  # type: ignore[index]
        await client.call_tool(
            "build_request_context", {"session_id": sid, "message": "parameterized SQL queries"}
        )
        one = await client.call_tool("get_usage_stats", {"session_id": sid})
        assert not one.is_error
        data = one.structured_content
        assert data["sessions"] == 1 and data["turns"] == 1  # type: ignore[index]
        keys = {row["key"]: row for row in data["items"]}  # type: ignore[index]
        assert keys["rule:python-style"]["by_mode"]["always"] == 1
        bad = await client.call_tool("get_usage_stats", {"session_id": "nope"})
        assert bad.is_error and "session_id" in bad.content[0].text  # type: ignore[union-attr]
        resource = await client.read_resource("context://stats")
        kinds = {c.mime_type for c in resource.contents}
        assert kinds == {"application/json", "text/markdown"}
        body = next(c for c in resource.contents if c.mime_type == "application/json")
        payload = json.loads(body.text)  # type: ignore[union-attr]
        assert payload["turns"] == 1


def test_stats_command_reads_the_session_store(tmp_path: Path) -> None:
    path = write_config(tmp_path, backend="sqlite")
    config = load_config(path, environ={})
    store = SqliteSessionStore(config.resolve(Path("sessions.sqlite3")))
    parts = build_parts(config, embedder=HashEmbedder(), store=store)
    sid = parts.broker.create_session().session_id
    parts.broker.build_request_context(sid, "parameterized SQL queries")
    store.close()
    out = subprocess.run(
        [BROKER, "stats", "--config", str(path), "--json"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert json.loads(out.stdout)["turns"] == 1
    text = subprocess.run(
        [BROKER, "stats", "--config", str(path)], capture_output=True, text=True, timeout=60
    )
    assert "1 session(s), 1 request context(s)" in text.stdout
    (tmp_path / "m").mkdir()
    memory = subprocess.run(
        [BROKER, "stats", "--config", str(write_config(tmp_path / "m"))],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert memory.returncode == 2 and "in memory only" in memory.stderr
