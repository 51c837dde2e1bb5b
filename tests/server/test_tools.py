"""Every tool and resource through the SDK's in-memory client, on both protocol eras."""

from __future__ import annotations

import json
import warnings
from collections.abc import Callable
from typing import Any

import pytest
from context_broker.server.host.mcp_server import build_server
from context_broker.server.parts import build_parts
from context_broker.server.settings import AppConfig
from mcp import Client, MCPError

from tests.support.hash_embedder import HashEmbedder
from tests.support.mcp_calls import call, error
from tests.support.tool_names import BROKER_TOOL_NAMES


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_both_protocol_eras_list_exactly_the_context_tools(
    make_client: Callable[..., Client], mode: str
) -> None:
    async with make_client(mode) as client:
        assert client.protocol_version == ("2025-11-25" if mode == "legacy" else "2026-07-28")
        tools = (await client.list_tools()).tools
        assert {t.name for t in tools} == BROKER_TOOL_NAMES
        assert all(t.output_schema and t.input_schema["type"] == "object" for t in tools)
        session = await call(client, "create_session")
        assert session["session_id"].startswith("s_")


async def test_create_session_starts_with_the_always_items(
    make_client: Callable[..., Client],
) -> None:
    async with make_client() as client:
        out = await call(client, "create_session", agent="coder")
        assert out["items"] == [
            {"type": "rule", "name": "python-style", "server": None, "include_mode": "always"}
        ]
        listed = await call(client, "list_session_context", session_id=out["session_id"])
        assert listed["agent"] == "coder" and listed["items"] == out["items"]


async def test_items_are_added_and_removed_by_hand(make_client: Callable[..., Client]) -> None:
    async with make_client() as client:
        sid = (await call(client, "create_session"))["session_id"]
        added = await call(
            client, "add_context_item", session_id=sid, type="rule", name="commit-messages"
        )
        assert added["changed"] and {"rule", "commit-messages", "manual"} <= {
            v for i in added["items"] for v in i.values() if v
        }
        again = await call(
            client, "add_context_item", session_id=sid, type="rule", name="commit-messages"
        )
        assert not again["changed"]
        removed = await call(
            client, "remove_context_item", session_id=sid, type="rule", name="python-style"
        )
        assert removed["changed"]
        assert [i["name"] for i in removed["items"]] == ["commit-messages"]


async def test_build_request_context_records_the_turn_and_can_return_messages(
    make_client: Callable[..., Client],
) -> None:
    async with make_client() as client:
        sid = (await call(client, "create_session"))["session_id"]
        built = await call(
            client,
            "build_request_context",
            session_id=sid,
            message="How do I deploy the service with kubectl?",
            top_n=1,
            include_messages=True,
        )
        assert set(built) >= {
            "request_id",
            "timestamp",
            "items",
            "summary",
            "search_mode",
            "warnings",
        }
        modes = {i["name"]: i["include_mode"] for i in built["items"]}
        assert modes["python-style"] == "always"
        agent = [i for i in built["items"] if i["include_mode"] == "agent"]
        assert agent and all(isinstance(i["similarity_score"], float) for i in agent)
        assert built["messages"][-1] == {
            "role": "user",
            "content": "How do I deploy the service with kubectl?",
        }
        turns = await call(client, "list_turns", session_id=sid)
        assert [t["request_id"] for t in turns["turns"]] == [built["request_id"]]
        got = await call(
            client, "get_request_context", session_id=sid, request_id=built["request_id"]
        )
        assert got["items"] == built["items"] and got["message"].startswith("How do I deploy")


async def test_search_and_catalog_tools(make_client: Callable[..., Client]) -> None:
    async with make_client() as client:
        found = await call(
            client, "search_context_items", query="parameterized SQL", types=["rule"]
        )
        assert found["search_mode"] in {"hybrid", "dense", "lexical"}
        assert found["items"][0]["key"] == "rule:sql-safety"
        assert all(i["type"] == "rule" for i in found["items"])
        catalog = await call(client, "list_catalog", types=["reference"])
        assert {i["key"] for i in catalog["items"]} == {
            "reference:deploy-guide",
            "reference:api overview",
        }
        assert {i["include_mode"] for i in catalog["items"]} == {"agent"}


@pytest.mark.parametrize(
    ("tool", "arguments", "expected"),
    [
        ("list_session_context", {}, "session_id: required argument is missing"),
        ("list_session_context", {"session_id": "nope"}, "session_id: malformed session_id"),
        ("list_session_context", {"session_id": "s_" + "A" * 32}, "unknown session_id"),
        ("list_session_context", {"session_id": 5}, "session_id: Input should be a valid string"),
        ("create_session", {"agent": "a", "colour": "red"}, "colour: unknown argument"),
        ("list_catalog", {"types": ["widget"]}, "types.0: Input should be 'rule'"),
        ("search_context_items", {"query": "x", "top_k": 0}, "top_k: Input should be greater"),
        ("search_context_items", {"query": "   "}, "query"),
        ("search_context_items", {"query": "x", "include_score": 2}, "include_score"),
    ],
)
async def test_bad_calls_are_tool_errors_that_name_the_field(
    make_client: Callable[..., Client], tool: str, arguments: dict[str, Any], expected: str
) -> None:
    async with make_client() as client:
        assert expected in await error(client, tool, **arguments)


async def test_bad_item_arguments_name_the_field(make_client: Callable[..., Client]) -> None:
    async with make_client() as client:
        sid = (await call(client, "create_session"))["session_id"]
        base = {"session_id": sid}
        assert "name: no rule named 'ghost'" in await error(
            client, "add_context_item", **base, type="rule", name="ghost"
        )
        assert "server is required for a tool" in await error(
            client, "add_context_item", **base, type="tool", name="t"
        )
        assert "type: Input should be" in await error(
            client, "remove_context_item", **base, type="widget", name="x"
        )
        assert "request_id: no request" in await error(
            client, "get_request_context", **base, request_id="r_missing"
        )
        for tool in ("build_request_context", "assemble_context"):
            for blank in ("", "  \n "):
                assert "message: must be a non-empty text" in await error(
                    client, tool, **base, message=blank
                )
        # Nothing was half-written by the failed calls.
        listed = await call(client, "list_session_context", session_id=sid)
        assert [i["name"] for i in listed["items"]] == ["python-style"]
        assert (await call(client, "list_turns", session_id=sid))["turns"] == []


async def test_an_unknown_tool_is_a_clear_protocol_error(
    make_client: Callable[..., Client],
) -> None:
    async with make_client() as client:
        with pytest.raises(MCPError, match="unknown tool 'summon'.*create_session"):
            await client.call_tool("summon", {})


async def test_a_message_over_the_limit_is_refused_clearly_and_not_recorded(
    make_client: Callable[..., Client],
) -> None:
    async with make_client() as client:
        sid = (await call(client, "create_session"))["session_id"]
        text = await error(client, "build_request_context", session_id=sid, message="a" * 1_000_001)
        assert (
            "message of 1000001 characters exceeds the limit of 1000000 (server.max_message_chars)"
            in text
        )
        assert "server.max_message_chars" in text
        assert (await call(client, "list_turns", session_id=sid))["turns"] == []


async def test_a_one_megabyte_message_within_the_limit_is_processed(
    make_client: Callable[..., Client],
) -> None:
    async with make_client() as client:
        sid = (await call(client, "create_session"))["session_id"]
        message = ("deploy the service with kubectl " * 40_000)[:1_000_000]
        built = await call(client, "build_request_context", session_id=sid, message=message)
        assert any("truncated" in w or "100000" in w.replace(",", "") for w in built["warnings"])
        turns = await call(client, "list_turns", session_id=sid)
        assert len(turns["turns"]) == 1 and len(turns["turns"][0]["message_preview"]) <= 201


async def test_sessions_stay_isolated(make_client: Callable[..., Client]) -> None:
    async with make_client() as client:
        a = (await call(client, "create_session"))["session_id"]
        b = (await call(client, "create_session"))["session_id"]
        await call(client, "add_context_item", session_id=a, type="rule", name="commit-messages")
        await call(client, "build_request_context", session_id=a, message="deploy")
        assert [
            i["name"] for i in (await call(client, "list_session_context", session_id=b))["items"]
        ] == ["python-style"]
        assert (await call(client, "list_turns", session_id=b))["turns"] == []


async def test_resources_give_json_and_markdown(make_client: Callable[..., Client]) -> None:
    async with make_client() as client:
        sid = (await call(client, "create_session"))["session_id"]
        rid = (await call(client, "build_request_context", session_id=sid, message="SQL queries"))[
            "request_id"
        ]
        listed = {str(r.uri) for r in (await client.list_resources()).resources}
        assert {
            "context://catalog",
            "context://rules/sql-safety",
            "context://references/api%20overview",
        } <= listed
        assert not any("sessions" in uri for uri in listed)  # sessions are never enumerable
        templates = {
            t.uri_template for t in (await client.list_resource_templates()).resource_templates
        }
        assert "context://sessions/{session_id}/requests/{request_id}" in templates
        for uri, needle in [
            ("context://catalog", "rule:sql-safety"),
            (f"context://sessions/{sid}", rid),
            (f"context://sessions/{sid}/requests/{rid}", "## Rules"),
            ("context://references/api%20overview", "bearer token"),
        ]:
            contents = (await client.read_resource(uri)).contents
            assert [c.mime_type for c in contents] == ["application/json", "text/markdown"]
            json.loads(contents[0].text)  # type: ignore[union-attr]
            assert needle in contents[0].text + contents[1].text  # type: ignore[union-attr]


@pytest.mark.parametrize(
    "uri",
    [
        "context://sessions/s_bad",
        "context://rules/ghost",
        "context://nothing",
        "file:///etc/passwd",
    ],
)
async def test_unknown_resources_are_clear_errors(
    make_client: Callable[..., Client], uri: str
) -> None:
    async with make_client() as client:
        with pytest.raises(MCPError, match="not found"):
            await client.read_resource(uri)


async def test_legacy_hosts_can_set_the_log_level(make_client: Callable[..., Client]) -> None:
    async with make_client("legacy") as client:
        assert client.server_capabilities.logging is not None
        with warnings.catch_warnings():  # the client SDK warns: deprecated in 2026-07-28
            warnings.simplefilter("ignore")
            await client.set_logging_level("debug")


async def test_a_failing_embedder_still_builds_the_request_context(config: AppConfig) -> None:
    parts = build_parts(config, embedder=HashEmbedder(fail=True))
    async with Client(build_server(parts.broker)) as client:
        sid = (await call(client, "create_session"))["session_id"]
        built = await call(client, "build_request_context", session_id=sid, message="SQL")
        assert built["items"][0]["name"] == "python-style"
        assert built["warnings"]
