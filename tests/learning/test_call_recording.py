"""A proxied call with a session_id is one domain operation: the broker built from its config
(SQLite store, mcp-server-time downstream) records the call, its history messages and the use
of its tool in one store write, and the recorder that remembers those uses is the one
``forget_usage`` clears."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import anyio
import context_broker.server.runtime
import pytest
from context_broker.server.runtime import Runtime, build_runtime
from context_broker.server.settings import load_config
from mcp import Client
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

BIN = Path(sys.executable).parent
TIME = {"server": "time", "tool": "get_current_time", "arguments": {"timezone": "Asia/Tokyo"}}


def runtime(tmp_path: Path, persistence: str) -> Runtime:
    path = tmp_path / "broker.toml"
    path.write_text(
        f"""
[search]
semantic = false

[gateway]
startup_budget = 60  # a loaded machine may take seconds to start the downstream

{persistence}

[servers.time]
command = "{BIN / "mcp-server-time"}"
include = "agent"
""",
        encoding="utf-8",
    )
    return build_runtime(load_config(path, environ={}), path)


async def ok(client: Client, name: str, **arguments: Any) -> dict[str, Any]:
    result = await client.call_tool(name, arguments)
    assert not result.is_error, result.content
    assert isinstance(result.structured_content, dict)
    return result.structured_content


async def test_a_recorded_call_is_at_most_four_store_operations(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Every operation on the runtime's store is a "store.<method>" span (Observer.traced).
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    monkeypatch.setattr(
        context_broker.server.runtime, "build_tracer_provider", lambda _config: provider
    )
    built = runtime(tmp_path, '[persistence]\nbackend = "sqlite"\npath = "sessions.db"')
    assert built.gateway is not None
    with anyio.fail_after(60):
        async with built.gateway, Client(built.server) as client:
            sid = (await ok(client, "create_session"))["session_id"]
            await ok(client, "build_request_context", session_id=sid, message="time in Tokyo")
            exporter.clear()
            result = await client.call_tool("call_tool", {**TIME, "session_id": sid})
            assert not result.is_error, result.content
    operations = [s.name for s in exporter.get_finished_spans() if s.name.startswith("store.")]
    assert len(operations) <= 4, operations
    store = built.parts.broker.store
    assert [(c["server"], c["tool"]) for c in store.calls(sid)] == [("time", "get_current_time")]
    assert [m.raw["role"] for m in store.messages(sid)] == ["assistant", "tool"]
    assert store.history_state(sid) == {"shape": "openai"}
    events = store.usage_events(sid)
    assert [(e["kind"], e["used"]) for e in events] == [("call", ["tool:time/get_current_time"])]
    store.close()


async def test_forget_usage_clears_what_the_gateway_remembers_of_a_turn(tmp_path: Path) -> None:
    built = runtime(tmp_path, "")
    assert built.gateway is not None
    with anyio.fail_after(60):
        async with built.gateway, Client(built.server) as client:
            sid = (await ok(client, "create_session"))["session_id"]
            await ok(client, "build_request_context", session_id=sid, message="time in Tokyo")
            await ok(client, "call_tool", **TIME, session_id=sid)
            await ok(client, "call_tool", **TIME, session_id=sid)  # one use per turn and tool
            forgot = await ok(client, "forget_usage", session_id=sid)
            assert forgot["events_deleted"] == 1
            # Forgotten, the same use in the same turn is recorded again.
            await ok(client, "call_tool", **TIME, session_id=sid)
            forgot = await ok(client, "forget_usage", session_id=sid)
            assert forgot["events_deleted"] == 1
