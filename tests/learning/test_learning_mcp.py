"""Learning from usage through the MCP surface: the broker as a real stdio subprocess with
the real embedding model, mcp-server-time downstream and a SQLite session store."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client, StdioServerParameters

pytestmark = pytest.mark.model

BIN = Path(sys.executable).parent
FIRST = "My colleague lives in Tokyo; what hour is it there when it is 9am in Paris?"
PARAPHRASE = "If it's nine in the morning in Paris, what time will it be for my coworker in Tokyo?"
CONVERT = "tool:time/convert_time"


def write_config(tmp_path: Path, *, learning: bool = True) -> Path:
    path = tmp_path / "broker.toml"
    path.write_text(
        f"""
[search]
top_n = 1

[persistence]
backend = "sqlite"
path = "sessions.db"

[learning]
enabled = {str(learning).lower()}

[[rules]]
name = "meeting-etiquette"
description = "Scheduling meetings with colleagues abroad in other countries and cities"
text = "Propose two slots that fall in both people's working hours, morning in Paris."

[[rules]]
name = "travel-japan"
description = "Travelling to Tokyo and Japan: trains, hours, customs"
text = "Mention that Japan has no daylight saving time."

[servers.time]
command = "{BIN / "mcp-server-time"}"
include = "agent"
""",
        encoding="utf-8",
    )
    return path


def broker(path: Path) -> StdioServerParameters:
    return StdioServerParameters(
        command=str(BIN / "context-broker"), args=["serve", "--config", str(path)]
    )


async def ok(client: Client, name: str, **arguments: Any) -> dict[str, Any]:
    with anyio.fail_after(60):
        result = await client.call_tool(name, arguments)
    assert not result.is_error, result.content
    assert isinstance(result.structured_content, dict)
    return result.structured_content


async def failed(client: Client, name: str, **arguments: Any) -> str:
    with anyio.fail_after(60):
        result = await client.call_tool(name, arguments)
    assert result.is_error, result.structured_content
    return "".join(getattr(b, "text", "") for b in result.content)


def agent_keys(context: dict[str, Any]) -> list[str]:
    keys = []
    for item in context["items"]:
        if item["include_mode"] == "agent":
            prefix = f"tool:{item['server']}/" if item["type"] == "tool" else f"{item['type']}:"
            keys.append(prefix + item["name"])
    return keys


async def ranking(client: Client, query: str) -> list[tuple[str, float]]:
    found = await ok(client, "search_context_items", query=query, top_n=10)
    return [(h["key"], h["similarity_score"]) for h in found["items"]]


async def test_a_tool_used_after_a_miss_is_selected_for_a_paraphrase_and_survives_a_restart(
    tmp_path: Path,
) -> None:
    path = write_config(tmp_path)
    async with Client(broker(path), mode="legacy") as client:
        cold = await ranking(client, PARAPHRASE)
        sid = (await ok(client, "create_session"))["session_id"]
        first = await ok(client, "build_request_context", session_id=sid, message=FIRST)
        assert CONVERT not in agent_keys(first), first["items"]
        with anyio.fail_after(60):
            result = await client.call_tool(
                "call_tool",
                {
                    "server": "time",
                    "tool": "convert_time",
                    "session_id": sid,
                    "arguments": {
                        "source_timezone": "Europe/Paris",
                        "time": "09:00",
                        "target_timezone": "Asia/Tokyo",
                    },
                },
            )
        assert not result.is_error, result.content
        second = await ok(client, "build_request_context", session_id=sid, message=PARAPHRASE)
        assert agent_keys(second) == [CONVERT], second["items"]
        learned = await ranking(client, PARAPHRASE)
    async with Client(broker(path), mode="legacy") as client:
        assert await ranking(client, PARAPHRASE) == learned
        forgot = await ok(client, "forget_usage", session_id=sid)
        assert forgot["events_deleted"] == 1
        assert await ranking(client, PARAPHRASE) == cold
    async with Client(broker(path), mode="legacy") as client:
        assert await ranking(client, PARAPHRASE) == cold


async def test_record_usage_names_unknown_keys_and_request_ids(tmp_path: Path) -> None:
    async with Client(broker(write_config(tmp_path)), mode="legacy") as client:
        sid = (await ok(client, "create_session"))["session_id"]
        turn = await ok(client, "build_request_context", session_id=sid, message=FIRST)
        rid = turn["request_id"]
        text = await failed(
            client,
            "record_usage",
            session_id=sid,
            request_id=rid,
            used=["tool:time/no_such_tool", "rule:travel-japan", "bogus"],
        )
        assert "'tool:time/no_such_tool'" in text and "'bogus'" in text
        assert "travel-japan" not in text
        text = await failed(
            client, "record_usage", session_id=sid, request_id="r_" + "0" * 32, used=[]
        )
        assert "r_" + "0" * 32 in text
        recorded = await ok(
            client,
            "record_usage",
            session_id=sid,
            request_id=rid,
            used=["rule:travel-japan", CONVERT],
            unused=["rule:meeting-etiquette"],
        )
        assert CONVERT in recorded["missed"] and recorded["learned"]


async def test_with_learning_disabled_rankings_equal_those_without_learning(
    tmp_path: Path,
) -> None:
    on, off = tmp_path / "on", tmp_path / "off"
    on.mkdir()
    off.mkdir()
    async with Client(broker(write_config(on)), mode="legacy") as client:
        cold = await ranking(client, PARAPHRASE)
    async with Client(broker(write_config(off, learning=False)), mode="legacy") as client:
        sid = (await ok(client, "create_session"))["session_id"]
        turn = await ok(client, "build_request_context", session_id=sid, message=FIRST)
        await ok(
            client,
            "record_usage",
            session_id=sid,
            request_id=turn["request_id"],
            used=[CONVERT],
        )
        assert await ranking(client, PARAPHRASE) == cold
