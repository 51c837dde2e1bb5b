"""A downstream tool's schemas as its server wrote them, through a real ``context-broker serve``
over stdio: listed to hosts and shown in request contexts with every JSON Schema 2020-12
keyword, and ``call_tool`` checks arguments through the schema's own ``$ref``s without ever
fetching a remote one."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import anyio
from mcp import Client, StdioServerParameters

from tests.support.broker_procs import BROKER, server_env, write_config

POISONED = Path(__file__).resolve().parents[1] / "hardening" / "fixtures" / "poisoned_server.py"


def _input_schema(canary: str) -> dict[str, Any]:
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "object",
        "$defs": {
            "userId": {"type": "string", "minLength": 2},
            "address": {
                "$anchor": "address",
                "type": "object",
                "properties": {"zip": {"type": "integer"}},
                "required": ["zip"],
            },
        },
        "properties": {
            "id": {"$ref": "#/$defs/userId"},
            "home": {"$ref": "#address"},
            "profile": {"$ref": canary},
            "kind": {"anyOf": [{"const": "person"}, {"const": "team"}]},
        },
        "allOf": [{"required": ["id"]}],
        "if": {"required": ["kind"], "properties": {"kind": {"const": "team"}}},
        "then": {"required": ["home"]},
        "else": {},
        "additionalProperties": False,
    }


OUTPUT_SCHEMA = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "$defs": {"name": {"type": "string"}},
    "properties": {"name": {"$ref": "#/$defs/name"}},
    "additionalProperties": False,
}


def _text(result: Any) -> str:
    return "".join(getattr(block, "text", "") for block in result.content)


def _config(tmp_path: Path, schema: dict[str, Any]) -> Path:
    """A broker with server ``rich``: ``lookup`` (listed to hosts, with an output schema)
    and ``find_profile`` (chosen by search), both with ``schema`` as their input schema."""
    lookup = {"description": "Look up a user by id", "inputSchema": schema}
    tools = {
        "tools": [
            {"name": "lookup", **lookup, "outputSchema": OUTPUT_SCHEMA},
            {**lookup, "name": "find_profile", "description": "Find the profile of a user"},
        ]
    }
    (tmp_path / "tools.json").write_text(json.dumps(tools), encoding="utf-8")
    extra = f"""
[servers.rich]
command = {sys.executable!r}
args = [{str(POISONED)!r}, {str(tmp_path / "tools.json")!r}]
include = "always"
trust = "auto"
[servers.rich.tools.find_profile]
include = "agent"
"""
    return write_config(tmp_path, extra=extra)


async def _check_arguments(client: Client) -> None:
    """call_tool's checks follow the schema's local $refs, anchors and keywords; the part
    behind a remote $ref is left to the server."""

    async def call(arguments: dict[str, Any]) -> tuple[bool, str]:
        result = await client.call_tool(
            "call_tool", {"server": "rich", "tool": "lookup", "arguments": arguments}
        )
        return bool(result.is_error), _text(result)

    short = await call({"id": "a"})
    assert short[0] and "arguments['id']: 'a' is too short" in short[1], short
    team = await call({"id": "ab", "kind": "team", "home": {}})
    assert team[0] and "arguments['home']: 'zip' is a required property" in team[1], team
    extra_key = await call({"id": "ab", "nickname": "x"})
    assert extra_key[0] and "'nickname' was unexpected" in extra_key[1], extra_key
    remote = await call({"id": "ab", "profile": {"anything": 1}})
    assert remote == (False, 'lookup called with {"id": "ab", "profile": {"anything": 1}}')


async def test_schemas_keep_every_keyword_and_arguments_are_checked_through_local_refs(
    tmp_path: Path,
) -> None:
    hits: list[int] = []  # connections to where the remote $ref points: none expected
    listener = await anyio.create_tcp_listener(local_host="127.0.0.1")
    port = listener.extra(anyio.abc.SocketAttribute.local_port)
    schema = _input_schema(f"http://127.0.0.1:{port}/profile-schema.json")
    params = StdioServerParameters(
        command=BROKER, args=["serve", "--config", str(_config(tmp_path, schema))], env=server_env()
    )

    async def count(stream: anyio.abc.SocketStream) -> None:
        hits.append(1)
        await stream.aclose()

    async with listener, anyio.create_task_group() as tg:  # the listener closed at the end
        tg.start_soon(listener.serve, count)
        with anyio.fail_after(90):
            async with Client(params, mode="legacy") as client:
                listed = {t.name: t for t in (await client.list_tools()).tools}
                assert listed["rich__lookup"].input_schema == schema
                assert listed["rich__lookup"].output_schema == OUTPUT_SCHEMA
                created = await client.call_tool("create_session", {})
                sid = (created.structured_content or {})["session_id"]
                built = await client.call_tool(
                    "build_request_context",
                    {"session_id": sid, "message": "find the profile of a user"},
                )
                shown = _text(built).split("### rich__find_profile", 1)[1]
                # The text keeps every keyword but the dialect URI, which tells a model nothing.
                text_schema = json.loads(shown.split("Input schema: ", 1)[1].split("\n", 1)[0])
                assert text_schema == {k: v for k, v in schema.items() if k != "$schema"}
                await _check_arguments(client)
        tg.cancel_scope.cancel()
    assert hits == []
