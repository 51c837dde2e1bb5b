"""Per-tool ``enabled`` and a server's ``call_policy``, through the broker over stdio in front
of the real ``mcp-server-time`` (tools ``get_current_time`` and ``convert_time``)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import anyio
from mcp import Client, StdioServerParameters

from tests.support.broker_procs import BROKER, server_env
from tests.support.mcp_calls import call, error

TIME = Path(sys.executable).parent / "mcp-server-time"
CONVERT_ARGS = {"source_timezone": "UTC", "time": "12:00", "target_timezone": "Asia/Tokyo"}


def broker(tmp_path: Path, servers: str) -> StdioServerParameters:
    config = tmp_path / "broker.toml"
    config.write_text(
        f"""
[search]
semantic = false

[[rules]]
name = "timezones"
description = "Answering questions about time"
text = "Always state the IANA timezone you used."
include = "agent"

[servers.time]
command = "{TIME}"
{servers}
""",
        encoding="utf-8",
    )
    return StdioServerParameters(
        command=BROKER, args=["serve", "--config", str(config)], env=server_env()
    )


def tool_names(items: list[dict[str, Any]]) -> set[str]:
    return {i["name"] for i in items if i["type"] == "tool"}


async def test_a_disabled_tool_is_not_listed_not_selected_and_refused_naming_the_key(
    tmp_path: Path,
) -> None:
    params = broker(
        tmp_path,
        """include = "agent"

[servers.time.tools.convert_time]
include = "always"
enabled = false
""",
    )
    with anyio.fail_after(60):
        async with Client(params, mode="legacy") as client:
            listed = {t.name for t in (await client.list_tools()).tools}
            assert "call_tool" in listed and "time__convert_time" not in listed
            catalog = await call(client, "list_catalog", types=["tool"])
            rows = {i["name"]: i["enabled"] for i in catalog["items"]}
            assert rows == {"get_current_time": True, "convert_time": False}
            session = await call(client, "create_session")
            assert "convert_time" not in tool_names(session["items"])
            built = await call(
                client,
                "build_request_context",
                session_id=session["session_id"],
                message="convert the current time from one timezone to another timezone",
            )
            assert tool_names(built["items"]) == {"get_current_time"}
            found = await call(client, "search_context_items", query="convert time timezone")
            assert "convert_time" not in tool_names(found["items"])

            refused = await error(
                client, "call_tool", server="time", tool="convert_time", arguments=CONVERT_ARGS
            )
            assert "servers.time.tools.convert_time.enabled = false" in refused
            assert "disabled in the config" in refused
            direct = await client.call_tool("time__convert_time", CONVERT_ARGS)
            assert direct.is_error
            assert "servers.time.tools.convert_time.enabled" in direct.content[0].text  # type: ignore[union-attr]
            allowed = await client.call_tool(
                "call_tool",
                {"server": "time", "tool": "get_current_time", "arguments": {"timezone": "UTC"}},
            )
            assert not allowed.is_error, allowed.content


async def test_selected_call_policy_forwards_only_tools_in_the_sessions_context(
    tmp_path: Path,
) -> None:
    params = broker(tmp_path, 'include = "agent"\ncall_policy = "selected"\n')
    with anyio.fail_after(60):
        async with Client(params, mode="legacy") as client:
            await client.list_tools()  # waits for the downstream's first connection
            sid = (await call(client, "create_session"))["session_id"]
            built = await call(
                client,
                "build_request_context",
                session_id=sid,
                message="what is the current time in Tokyo",
                top_n=1,
            )
            assert tool_names(built["items"]) == {"get_current_time"}

            now = await client.call_tool(
                "call_tool",
                {
                    "server": "time",
                    "tool": "get_current_time",
                    "arguments": {"timezone": "Asia/Tokyo"},
                    "session_id": sid,
                },
            )
            assert not now.is_error, now.content
            assert "Asia/Tokyo" in now.content[0].text  # type: ignore[union-attr]

            refused = await error(
                client,
                "call_tool",
                server="time",
                tool="convert_time",
                arguments=CONVERT_ARGS,
                session_id=sid,
            )
            assert "not in the context of session" in refused and "convert_time" in refused

            anonymous = await error(
                client, "call_tool", server="time", tool="get_current_time", arguments={}
            )
            assert "pass the session_id" in anonymous

            await call(
                client,
                "add_context_item",
                session_id=sid,
                type="tool",
                name="convert_time",
                server="time",
            )
            converted = await client.call_tool(
                "call_tool",
                {
                    "server": "time",
                    "tool": "convert_time",
                    "arguments": CONVERT_ARGS,
                    "session_id": sid,
                },
            )
            assert not converted.is_error, converted.content
