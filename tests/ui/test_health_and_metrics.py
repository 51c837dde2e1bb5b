"""/healthz, /readyz and /metrics of an HTTP broker over a real socket, and the span tree of
a traced tool call (in-memory span exporter)."""

from __future__ import annotations

from pathlib import Path

import anyio
import httpx
from context_broker.server.host.mcp_server import build_server
from context_broker.server.observability import Observer
from context_broker.server.parts import build_parts
from context_broker.server.settings import load_config
from mcp import Client
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from ui_env import TOKEN, call_tool, http_broker, write_config

from tests.support.hash_embedder import HashEmbedder
from tests.support.polling import eventually

AUTH = {"Authorization": f"Bearer {TOKEN}"}


async def _ready_within(url: str, status: int, timeout: float = 30.0) -> httpx.Response:
    """Poll ``/readyz`` (bounded) until it answers ``status``: the model loads, or fails to,
    in the background after the server starts listening. With the token: the reasons and
    checks are only for a caller that has it."""
    last: list[httpx.Response] = []
    async with httpx.AsyncClient(headers=AUTH, timeout=10) as http:

        async def answered() -> httpx.Response | None:
            last[:] = [await http.get(f"{url}/readyz")]
            return last[0] if last[0].status_code == status else None

        return await eventually(  # type: ignore[return-value]
            answered,
            within=timeout,
            every=0.1,
            what=lambda: f"/readyz answering {status}, not {last[0].status_code}: {last[0].text}",
        )


async def test_readyz_is_503_while_the_model_is_missing_and_names_why(tmp_path: Path) -> None:
    empty = tmp_path / "no-model"
    empty.mkdir()
    config = write_config(tmp_path)
    text = config.read_text().replace(
        "[search]\nsemantic = false", f'[search]\nsemantic = true\nmodel_dir = "{empty}"'
    )
    config.write_text(text)
    with http_broker(config) as url:
        assert httpx.get(f"{url}/healthz", timeout=10).json() == {"status": "alive"}
        response = await _ready_within(url, 503)
        assert response.status_code == 503
        body = response.json()
        assert body["ready"] is False and body["checks"]["model"]["state"] == "failed"
        assert any("embedding model" in r and "setup-model" in r for r in body["reasons"])


async def test_readyz_is_200_lexical_only_by_choice_and_metrics_move_with_calls(
    tmp_path: Path,
) -> None:
    with http_broker(write_config(tmp_path)) as url:
        ready = await _ready_within(url, 200)
        assert ready.status_code == 200, ready.text
        assert ready.json()["checks"]["model"]["state"] == "lexical-only"
        assert httpx.get(f"{url}/metrics", timeout=10).status_code == 401

        def calls() -> float:
            text = httpx.get(f"{url}/metrics", headers=AUTH, timeout=10).text
            line = 'context_broker_tool_calls_total{outcome="ok",tool="create_session"}'
            found = [ln for ln in text.splitlines() if ln.startswith(line)]
            return float(found[0].split()[-1]) if found else 0.0

        before = calls()
        call_tool(url, "create_session", {})
        call_tool(url, "create_session", {})
        assert calls() == before + 2
        text = httpx.get(f"{url}/metrics", headers=AUTH, timeout=10).text
        assert 'context_broker_downstream_up{server="ops",state="connected"} 1.0' in text


async def test_a_traced_call_gives_a_span_tree_under_the_callers_trace_id(tmp_path: Path) -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    config = load_config(write_config(tmp_path).parent / "broker.toml", environ={})
    parts = build_parts(config.model_copy(update={"servers": {}}), embedder=HashEmbedder())
    observer = Observer(provider)
    parts.broker.store = observer.traced("store", parts.broker.store)
    parts.broker.search = observer.traced("search", parts.broker.search)
    trace_id = "4bf92f3577b34da6a3ce929d0e0e4736"
    meta = {"traceparent": f"00-{trace_id}-00f067aa0ba902b7-01"}
    async with Client(build_server(parts.broker, observer=observer)) as client:
        with anyio.fail_after(30):
            session = await client.call_tool("create_session", {})
            sid = session.structured_content["session_id"]
            exporter.clear()
            await client.call_tool(
                "build_request_context", {"session_id": sid, "message": "deploy"}, meta=meta
            )
    spans = exporter.get_finished_spans()
    root = next(s for s in spans if s.name == "tool build_request_context")
    assert format(root.context.trace_id, "032x") == trace_id
    children = {
        s.name for s in spans if s.parent is not None and s.parent.span_id == root.context.span_id
    }
    assert "search.rank" in children  # the ranking the request made, under its tool span
    assert any(name.startswith("store.") for name in children)
