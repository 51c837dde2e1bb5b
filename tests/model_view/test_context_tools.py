"""The request context's text, presets, relevance floors and item loading, through the MCP
tools of an in-memory broker (hash embedder: fast and deterministic)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import anyio
import pytest
from context_broker.server.host.mcp_server import build_server
from context_broker.server.parts import build_parts
from context_broker.server.settings import load_config
from mcp import Client

from tests.support.hash_embedder import HashEmbedder

CONFIG = """
[search]
semantic = {semantic}
{search_extra}

[[rules]]
name = "sql-safety"
description = "Database queries"
text = "Always use parameterized SQL queries; never build SQL with string formatting."
include = "agent"
priority = 5

[[rules]]
name = "house-style"
description = "How to write answers"
text = "Answer in British English."
include = "always"
priority = 20

[[rules]]
name = "alpha-rule"
description = "Another always rule"
text = "Alpha rule text."
include = "always"
priority = 20

[[references]]
name = "deploy-guide"
description = "How to deploy the service"
text = "Deploy with the release script: build the image, push it, then roll out."
include = "manual"
"""


def make_client(tmp_path: Path, *, search_extra: str = "", semantic: bool = True) -> Client:
    path = tmp_path / "broker.toml"
    path.write_text(
        CONFIG.format(semantic=str(semantic).lower(), search_extra=search_extra), encoding="utf-8"
    )
    parts = build_parts(load_config(path, environ={}), embedder=HashEmbedder())
    return Client(build_server(parts.broker))


async def call(client: Client, name: str, /, **arguments: Any) -> tuple[str, dict[str, Any]]:
    with anyio.fail_after(20):
        result = await client.call_tool(name, arguments)
    text = result.content[0].text  # type: ignore[union-attr]
    assert not result.is_error, text
    assert isinstance(result.structured_content, dict)
    return text, result.structured_content


async def failure(client: Client, name: str, /, **arguments: Any) -> str:
    with anyio.fail_after(20):
        result = await client.call_tool(name, arguments)
    assert result.is_error
    return result.content[0].text  # type: ignore[union-attr]


async def test_the_text_gives_rule_texts_in_priority_then_name_order_with_modes(
    tmp_path: Path,
) -> None:
    async with make_client(tmp_path) as client:
        _, session = await call(client, "create_session")
        sid = session["session_id"]
        await call(
            client, "add_context_item", session_id=sid, type="reference", name="deploy-guide"
        )
        text, out = await call(
            client,
            "build_request_context",
            session_id=sid,
            message="parameterized SQL queries string formatting",
            min_score=0.0,
        )
    heads = re.findall(r"^### (\d{3} \S+) — (\S+)", text, flags=re.M)
    assert heads[:2] == [("020 alpha-rule", "always"), ("020 house-style", "always")]
    assert ("005 sql-safety", "agent,") in heads
    assert ("000 deploy-guide", "manual") in heads
    assert text.index("## Rules") < text.index("## References")
    assert "Always use parameterized SQL queries" in text
    assert "Deploy with the release script" in text
    assert re.search(r"005 sql-safety — agent, score \d\.\d\d", text)
    assert out["text"] == text and out["omitted"] == []
    assert out["preset"] == "normal" and out["parameters"]["min_score"] == 0.0


async def test_names_detail_gives_headings_only_and_a_small_budget_names_what_did_not_fit(
    tmp_path: Path,
) -> None:
    async with make_client(tmp_path) as client:
        _, session = await call(client, "create_session")
        sid = session["session_id"]
        names, _ = await call(
            client, "build_request_context", session_id=sid, message="style", detail="names"
        )
        assert "- 020 house-style — always" in names
        assert "Answer in British English." not in names
        _, out = await call(
            client, "build_request_context", session_id=sid, message="style", max_context_tokens=100
        )
        # The header and the "Not included" list take the whole budget: no rule fits.
        assert set(out["omitted"]) == {"rule:alpha-rule", "rule:house-style"}
        assert all(f'get_context_items(keys=["{k}"])' in out["text"] for k in out["omitted"])
        assert not re.search(r"^### ", out["text"], flags=re.M)
        assert "Answer in British English." not in out["text"]
        _, roomy = await call(
            client, "build_request_context", session_id=sid, message="style", max_context_tokens=400
        )
        assert roomy["omitted"] == [] and roomy["text_tokens"] <= 400
        assert "Answer in British English." in roomy["text"]


async def test_presets_come_from_config_then_session_then_call_and_are_recorded(
    tmp_path: Path,
) -> None:
    async with make_client(tmp_path, search_extra='preset = "aggressive"') as client:
        _, plain = await call(client, "create_session")
        _, out = await call(
            client, "build_request_context", session_id=plain["session_id"], message="deploy"
        )
        assert out["preset"] == "aggressive" and out["parameters"]["top_n"] == 10
        _, careful = await call(client, "create_session", preset="conservative")
        assert careful["preset"] == "conservative"
        sid = careful["session_id"]
        _, out = await call(client, "build_request_context", session_id=sid, message="deploy")
        assert out["parameters"]["top_n"] == 3 and out["parameters"]["min_score_tools"] == 0.32
        _, out = await call(
            client,
            "build_request_context",
            session_id=sid,
            message="deploy",
            preset="normal",
            top_n=7,
        )
        assert out["preset"] == "normal" and out["parameters"]["top_n"] == 7
        text, recorded = await call(
            client, "get_request_context", session_id=sid, request_id=out["request_id"]
        )
        assert recorded["parameters"] == out["parameters"] and "preset normal" in text
        bad = await failure(client, "create_session", preset="reckless")
        assert "preset" in bad


async def test_the_relevance_floor_leaves_out_weak_agent_items(tmp_path: Path) -> None:
    async with make_client(tmp_path) as client:
        _, session = await call(client, "create_session")
        sid = session["session_id"]
        message = "parameterized SQL queries string formatting"
        _, loose = await call(
            client, "build_request_context", session_id=sid, message=message, min_score=0.0
        )
        agent = [i for i in loose["items"] if i["include_mode"] == "agent"]
        assert agent
        floor = max(i["similarity_score"] for i in agent) + 0.01
        _, strict = await call(
            client, "build_request_context", session_id=sid, message=message, min_score=floor
        )
        assert not [i for i in strict["items"] if i["include_mode"] == "agent"]


async def test_search_is_sorted_by_the_score_shown_and_full_detail_gives_definitions(
    tmp_path: Path,
) -> None:
    async with make_client(tmp_path) as client:
        text, out = await call(
            client, "search_context_items", query="deploy the release image", top_n=4
        )
        scores = [i["similarity_score"] for i in out["items"]]
        assert scores == sorted(scores, reverse=True)
        shown = [float(s) for s in re.findall(r"\((-?\d\.\d\d)\)$", text, flags=re.M)]
        assert shown == sorted(shown, reverse=True) and len(shown) == len(scores)
        full, out = await call(
            client, "search_context_items", query="deploy the release image", detail="full"
        )
        assert "Deploy with the release script" in full
        assert any(i["definition"] and i["definition"]["text"] for i in out["items"])


async def test_get_context_items_returns_texts_and_names_unknown_keys(tmp_path: Path) -> None:
    async with make_client(tmp_path) as client:
        text, out = await call(
            client, "get_context_items", keys=["rule:sql-safety", "reference:deploy-guide"]
        )
        assert "Always use parameterized SQL queries" in text
        assert "Deploy with the release script" in text
        assert [i["key"] for i in out["items"]] == ["rule:sql-safety", "reference:deploy-guide"]
        bad = await failure(
            client, "get_context_items", keys=["rule:nope", "tool:x", "rule:sql-safety"]
        )
        assert "'rule:nope'" in bad and "'tool:x'" in bad and "sql-safety" not in bad


async def test_the_context_prompt_works_without_downstream_servers(tmp_path: Path) -> None:
    async with make_client(tmp_path) as client:
        prompts = (await client.list_prompts()).prompts
        assert [p.name for p in prompts] == ["context"]
        result = await client.get_prompt("context", {"message": "hello", "preset": "conservative"})
        texts = [m.content.text for m in result.messages]  # type: ignore[union-attr]
        assert texts[-1] == "hello" and "Answer in British English." in texts[0]
        with pytest.raises(Exception, match="message"):
            await client.get_prompt("context", {})


async def test_the_context_prompt_takes_a_plan_and_tells_the_model_how_to_write_one(
    tmp_path: Path,
) -> None:
    async with make_client(tmp_path) as client:
        listed = (await client.list_prompts()).prompts[0]
        described = {a.name: a.description for a in listed.arguments or []}
        assert "one step per line" in (described.get("intents") or "")
        result = await client.get_prompt(
            "context", {"message": "ship it", "intents": "write SQL safely\n\ndeploy the service"}
        )
        texts = [m.content.text for m in result.messages]  # type: ignore[union-attr]
        assert any("one short step per action" in t for t in texts[:-1])
        meta = result.meta or {}
        recorded = await client.call_tool(
            "get_request_context",
            {
                "session_id": meta["context-broker/session_id"],
                "request_id": meta["context-broker/request_id"],
            },
        )
        assert recorded.structured_content is not None
        assert recorded.structured_content["intents"] == ["write SQL safely", "deploy the service"]
