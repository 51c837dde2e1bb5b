"""The caller's trace goes on to downstream servers: a proxied call carries a
``_meta.traceparent`` of the caller's trace, under the broker's own span for the call."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import anyio
import context_broker.server.runtime
import pytest
from context_broker.server.runtime import build_runtime
from context_broker.server.settings import load_config
from mcp import Client
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

ECHO = Path(__file__).parent / "fixtures" / "meta_echo.py"
TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"


async def test_a_proxied_call_passes_the_callers_trace_on_to_the_downstream(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    monkeypatch.setattr(
        context_broker.server.runtime, "build_tracer_provider", lambda _config: provider
    )
    path = tmp_path / "broker.toml"
    path.write_text(
        f'[search]\nsemantic = false\n\n[servers.echo]\ncommand = "{sys.executable}"\n'
        f'args = ["{ECHO}"]\n',
        encoding="utf-8",
    )
    runtime = build_runtime(load_config(path, environ={}), path)
    assert runtime.gateway is not None
    meta = {"traceparent": f"00-{TRACE_ID}-00f067aa0ba902b7-01"}
    with anyio.fail_after(60):
        async with runtime.gateway, Client(runtime.server) as client:
            result = await client.call_tool(
                "call_tool", {"server": "echo", "tool": "meta", "arguments": {}}, meta=meta
            )
    assert not result.is_error, result.content
    received = json.loads(result.content[0].text)  # type: ignore[union-attr]
    version, trace_id, parent_id, _flags = received["traceparent"].split("-")
    assert (version, trace_id) == ("00", TRACE_ID)
    spans = {format(s.context.span_id, "016x"): s for s in exporter.get_finished_spans()}
    sender = spans[parent_id]  # the downstream saw the broker's span for the call as parent
    assert sender.name == "downstream echo/meta"
    assert format(sender.context.trace_id, "032x") == TRACE_ID
