"""Every request context built for a host is counted and traced, whichever path built it:
``build_request_context``, ``assemble_context`` and the ``context`` prompt, over HTTP on a real
socket (metrics), and in the span of the tool call that built it (in-memory span exporter)."""

from __future__ import annotations

import re
from pathlib import Path

import anyio
import httpx
from context_broker.server.host.mcp_server import build_server
from context_broker.server.observability import Observer
from context_broker.server.parts import build_parts
from context_broker.server.settings import load_config
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from ui_env import MESSAGE, TOKEN, http_broker, write_config

from tests.support.hash_embedder import HashEmbedder

AUTH = {"Authorization": f"Bearer {TOKEN}"}


def counted(metrics: str, name: str, **labels: str) -> float:
    """The sum of ``name``'s samples whose labels include ``labels``."""
    total = 0.0
    for line in metrics.splitlines():
        match = re.match(rf"{name}\{{(.*)\}} (\S+)$", line)
        if match and all(f'{k}="{v}"' in match.group(1) for k, v in labels.items()):
            total += float(match.group(2))
    return total


async def test_each_path_that_builds_a_request_context_moves_the_metrics(tmp_path: Path) -> None:
    with http_broker(write_config(tmp_path)) as url:
        async with httpx.AsyncClient(headers=AUTH, timeout=30) as http:

            async def metrics() -> str:
                return (await http.get(f"{url}/metrics")).text

            with anyio.fail_after(60):
                async with Client(streamable_http_client(f"{url}/mcp", http_client=http)) as client:
                    created = await client.call_tool("create_session", {})
                    sid = created.structured_content["session_id"]  # type: ignore[index]
                    before = await metrics()
                    for tool in ("build_request_context", "assemble_context"):
                        result = await client.call_tool(
                            tool, {"session_id": sid, "message": MESSAGE}
                        )
                        assert not result.is_error, result.content
                    await client.get_prompt("context", {"message": MESSAGE, "session_id": sid})
                after = await metrics()
    searches = "context_broker_searches_total"
    assert counted(after, searches) == counted(before, searches) + 3
    assert counted(after, searches, mode="lexical") == counted(before, searches, mode="lexical") + 3
    # MESSAGE selects both tools of the ops server by search, in each of the three contexts.
    tools = ("context_broker_selections_total", {"include_mode": "agent", "type": "tool"})
    assert counted(after, tools[0], **tools[1]) == counted(before, tools[0], **tools[1]) + 6


async def test_the_tool_span_names_the_request_context_it_built(tmp_path: Path) -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    config = load_config(write_config(tmp_path), environ={})
    parts = build_parts(config.model_copy(update={"servers": {}}), embedder=HashEmbedder())
    async with Client(build_server(parts.broker, observer=Observer(provider))) as client:
        with anyio.fail_after(30):
            created = await client.call_tool("create_session", {})
            sid = created.structured_content["session_id"]  # type: ignore[index]
            assembled = await client.call_tool(
                "assemble_context", {"session_id": sid, "message": "deploy the service"}
            )
    request_id = assembled.structured_content["request_id"]  # type: ignore[index]
    span = next(s for s in exporter.get_finished_spans() if s.name == "tool assemble_context")
    assert span.attributes is not None
    assert span.attributes["context_broker.request_id"] == request_id
    assert span.attributes["context_broker.search_mode"] == "hybrid"  # the hash embedder
    assert span.attributes["context_broker.items"] >= 3  # two always rules and a reference
