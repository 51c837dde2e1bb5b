"""The server with the real embedding model (prepared by scripts/setup.sh)."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest
from context_broker.server.embedding import resolve_model_dir
from context_broker.server.host.mcp_server import build_server
from context_broker.server.parts import build_parts
from context_broker.server.settings import load_config
from mcp import Client

from tests.support.broker_procs import write_config

pytestmark = pytest.mark.model


async def test_build_request_context_selects_items_by_meaning_with_the_real_model(
    tmp_path: Path,
) -> None:
    config = load_config(write_config(tmp_path, semantic=True), environ={})
    if resolve_model_dir(config) is None:
        pytest.fail("embedding model not prepared; run scripts/setup.sh")
    parts = build_parts(config)
    with anyio.fail_after(120):
        async with Client(build_server(parts.broker)) as client:
            sid = (await client.call_tool("create_session", {})).structured_content["session_id"]  # type: ignore[index]
            built = await client.call_tool(
                "build_request_context",
                {
                    "session_id": sid,
                    "message": "How should I query the database safely?",
                    "top_n": 1,
                },
            )
    out = built.structured_content
    assert out is not None and out["search_mode"] == "hybrid" and not out["warnings"]
    agent = [i for i in out["items"] if i["include_mode"] == "agent"]
    assert agent[0]["name"] == "sql-safety" and agent[0]["similarity_score"] > 0.2
