"""Every tool the broker lists, called with generated arguments drawn from its own input
schema and then spoiled (wrong types, missing and extra fields, huge strings, unicode junk):
each call ends in a result or a short tool error, never an escaping exception or a hang."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import anyio
import pytest
import pytest_asyncio
from context_broker.server.host.mcp_server import build_server
from context_broker.server.parts import build_parts
from context_broker.server.settings import load_config
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mcp import Client, MCPError
from mcp_types import Tool

from tests.support.broker_procs import write_config
from tests.support.hash_embedder import HashEmbedder


@dataclass
class Broker:
    client: Client
    tools: list[Tool]
    session_id: str


@pytest_asyncio.fixture
async def broker(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Broker]:
    # The client's task group must be entered and left in one task; fixture setup and
    # teardown run in different ones, so the client lives in a task of its own.
    config = load_config(write_config(tmp_path_factory.mktemp("args")), environ={})
    parts = build_parts(config, embedder=HashEmbedder())
    ready: asyncio.Future[Broker] = asyncio.get_running_loop().create_future()
    stop = asyncio.Event()

    async def connect() -> None:
        try:
            async with Client(build_server(parts.broker)) as client:
                with anyio.fail_after(30):
                    tools = (await client.list_tools()).tools
                    created = await client.call_tool("create_session", {"agent": "fuzz"})
                assert isinstance(created.structured_content, dict)
                ready.set_result(Broker(client, tools, created.structured_content["session_id"]))
                await stop.wait()
        except BaseException as exc:
            if not ready.done():
                ready.set_exception(exc)
            raise

    task = asyncio.create_task(connect())
    with anyio.fail_after(60):
        connected = await ready
    yield connected
    stop.set()
    with anyio.fail_after(30):
        await task


_JUNK_TEXT = st.one_of(
    st.text(max_size=40),
    st.sampled_from(
        ["", " ", "\x00", "\u202e\u200b\ufeff", "🙂" * 50, "../../etc/passwd", "%s%n{0}", "null"]
    ),
    st.integers(min_value=10_000, max_value=200_000).map(lambda n: "x" * n),
)
_ANY = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(),
        st.floats(allow_nan=False, allow_infinity=False),
        _JUNK_TEXT,
    ),
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=10,
)


def _fitting(schema: dict[str, Any], draw: st.DrawFn, session: str, depth: int = 0) -> Any:
    """A value that fits ``schema`` roughly (enough to get past the first checks)."""
    if "enum" in schema:
        return draw(st.sampled_from(schema["enum"]))
    kinds = schema.get("type")
    options = schema.get("anyOf") or schema.get("oneOf")
    if options and not kinds:
        return _fitting(draw(st.sampled_from(options)), draw, session, depth + 1)
    kind = draw(st.sampled_from(kinds)) if isinstance(kinds, list) else kinds
    if kind == "string":
        return draw(st.one_of(st.just(session), _JUNK_TEXT))
    if kind == "integer":
        return draw(st.integers(min_value=-(2**70), max_value=2**70))
    if kind == "number":
        return draw(st.floats(allow_nan=False, allow_infinity=False))
    if kind == "boolean":
        return draw(st.booleans())
    if kind == "array" and depth < 4:
        items = schema.get("items") or {}
        return [_fitting(items, draw, session, depth + 1) for _ in range(draw(st.integers(0, 3)))]
    if kind == "object" and depth < 4:
        return _object(schema, draw, session, depth + 1)
    return draw(_ANY)


def _object(schema: dict[str, Any], draw: st.DrawFn, session: str, depth: int) -> dict[str, Any]:
    """Each property fitting, spoiled with a wrong type, or left out; maybe extra fields."""
    arguments: dict[str, Any] = {}
    for name, sub in (schema.get("properties") or {}).items():
        how = draw(st.sampled_from(["fit", "fit", "fit", "wrong", "missing"]))
        if how == "fit":
            arguments[name] = _fitting(sub, draw, session, depth)
        elif how == "wrong":
            arguments[name] = draw(_ANY)
    if draw(st.booleans()):
        arguments |= draw(st.dictionaries(st.text(max_size=12), _ANY, max_size=3))
    return arguments


TOOLS = settings(
    max_examples=120,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


@TOOLS
@given(data=st.data())
async def test_every_tool_answers_generated_arguments_with_a_result_or_a_short_tool_error(
    broker: Broker, data: st.DataObject
) -> None:
    tool = data.draw(st.sampled_from(broker.tools), label="tool")
    arguments = data.draw(
        st.composite(lambda draw: _object(tool.input_schema, draw, broker.session_id, 0))(),
        label="arguments",
    )
    try:
        with anyio.fail_after(30):
            result = await broker.client.call_tool(tool.name, arguments)
    except MCPError as exc:
        pytest.fail(f"{tool.name} raised a protocol error instead of a tool error: {exc}")
    text = "".join(getattr(block, "text", "") for block in result.content)
    if result.is_error:
        assert 0 < len(text) <= 2000, (tool.name, text[:300])  # clipped at 2,000
        assert "Traceback" not in text and 'File "' not in text, (tool.name, text[:500])
