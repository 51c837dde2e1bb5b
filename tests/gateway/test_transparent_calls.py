"""A downstream behaves through the broker as it does when a host connects to it directly: the
same results by the prefixed names, its log messages, progress values and JSON-RPC errors as
it sent them, over Streamable HTTP and over stdio, with the project's conformance fixture
server (tests/conformance/fixture_server.py) as the downstream."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import ClientSession, MCPError, StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

from tests.conformance.test_server_scenarios import FIXTURE, running_fixture
from tests.support.broker_procs import running_broker, server_env, write_config
from tests.support.stdio_host import StdioHost, stdio_broker

SAME_RESULTS = (
    "test_simple_text",
    "test_image_content",
    "test_audio_content",
    "test_embedded_resource",
    "test_multiple_content_types",
    "test_error_handling",
)
STDIO_FIXTURE = [str(FIXTURE), "--transport", "stdio"]
_TOLD = ("notifications/message", "notifications/progress")
WRAPPED = "downstream://fixture/test%3A%2F%2Fstatic-text"


def _table(*, url: str | None = None, prefix: str | None = None) -> str:
    """``[servers.fixture]``: the fixture over HTTP at ``url``, else over stdio."""
    where = (
        f"url = {url!r}\n" if url else f"command = {sys.executable!r}\nargs = {STDIO_FIXTURE!r}\n"
    )
    line = "" if prefix is None else f"prefix = {prefix!r}\n"
    return (
        "\n[gateway]\nstartup_budget = 20\n\n[servers.fixture]\n"
        f'{where}include = "always"\ntrust = "auto"\ntimeout = 20\n{line}'
    )


class Seen:
    """What a host's session was told: log messages (level, logger, data) and progress."""

    def __init__(self) -> None:
        self.logs: list[tuple[str, str | None, Any]] = []
        self.progress: list[tuple[float, float | None, str | None]] = []

    async def log(self, params: types.LoggingMessageNotificationParams) -> None:
        self.logs.append((params.level, params.logger, params.data))

    async def on_progress(self, value: float, total: float | None, message: str | None) -> None:
        self.progress.append((value, total, message))


@asynccontextmanager
async def http_session(url: str, seen: Seen) -> AsyncIterator[ClientSession]:
    async with (
        streamable_http_client(url) as (read, write),
        ClientSession(read, write, logging_callback=seen.log) as session,
    ):
        await session.initialize()
        yield session


def _dump(result: types.CallToolResult) -> dict[str, Any]:
    """A result as JSON, without the ``_meta`` a server stamps on its own results."""
    return result.model_dump(by_alias=True, mode="json", exclude_none=True, exclude={"meta"})


async def _prompt_and_resource(session: ClientSession, name: str, uri: str) -> tuple[Any, ...]:
    """A prompt rendered with arguments and a resource's contents, as JSON (the contents'
    URIs left out: a wrapped resource's contents come back under its wrapped URI)."""
    with anyio.fail_after(30):
        prompt = await session.get_prompt(
            f"{name}test_prompt_with_arguments", {"arg1": "a", "arg2": "b"}
        )
        read = await session.read_resource(uri)
    messages = [m.model_dump(by_alias=True, mode="json") for m in prompt.messages]
    contents = [c.model_dump(by_alias=True, mode="json", exclude={"uri"}) for c in read.contents]
    return messages, contents


async def _told(session: ClientSession, name: str, seen: Seen) -> tuple[Any, ...]:
    """What a host sees of the calls that log, report progress and fail: the log messages,
    the progress reported, and the JSON-RPC error."""
    with anyio.fail_after(30):
        await session.call_tool(f"{name}test_tool_with_logging", {})
        progress = await session.call_tool(
            f"{name}test_tool_with_progress", {}, progress_callback=seen.on_progress
        )
        with pytest.raises(MCPError) as failed:
            await session.call_tool(f"{name}test_jsonrpc_error", {})
    assert not progress.is_error, progress
    error = failed.value.error.model_dump(by_alias=True, mode="json", exclude_none=True)
    return seen.logs, seen.progress, error


async def test_through_the_default_prefix_an_http_host_sees_what_it_sees_directly(
    tmp_path: Path,
) -> None:
    async with running_fixture() as fixture_url:
        config = write_config(tmp_path, extra=_table(url=fixture_url))
        direct_seen, broker_seen = Seen(), Seen()
        async with (
            running_broker(config, "http") as (broker_url, _),
            http_session(fixture_url, direct_seen) as direct,
            http_session(f"{broker_url}/mcp", broker_seen) as broker,
        ):
            for name in SAME_RESULTS:
                with anyio.fail_after(30):
                    want = _dump(await direct.call_tool(name, {}))
                    got = _dump(await broker.call_tool(f"fixture__{name}", {}))
                assert got == want, name
            assert await _prompt_and_resource(broker, "fixture__", WRAPPED) == (
                await _prompt_and_resource(direct, "", "test://static-text")
            )
            want_told = await _told(direct, "", direct_seen)
            got_told = await _told(broker, "fixture__", broker_seen)
    logs, progress, error = got_told
    assert got_told == want_told
    assert len(logs) == 3 and [p[0] for p in progress] == [0, 50, 100]
    assert error["code"] == -32042 and error["data"] == {"reason": "fixture", "retryable": False}


async def _direct_over_stdio() -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The fixture's log messages (as JSON) and JSON-RPC error, asked directly over stdio."""
    seen = Seen()
    params = StdioServerParameters(command=sys.executable, args=STDIO_FIXTURE, env=server_env())
    async with (
        stdio_client(params) as (read, write),
        ClientSession(read, write, logging_callback=seen.log) as session,
    ):
        await session.initialize()
        logs, _, error = await _told(session, "", seen)
    rows = [{"level": level, "logger": logger, "data": data} for level, logger, data in logs]
    return [{k: v for k, v in row.items() if v is not None} for row in rows], error


async def _wire_call(host: StdioHost, name: str, **extra: Any) -> tuple[list[Any], Any]:
    """A call from the raw stdio host: the log and progress notifications it was sent
    before the answer (as JSON), and the answer."""
    host.unclaimed.clear()
    request_id = host.fresh_id()
    await host.call(request_id, name, {}, **extra)
    answer = await host.answer(request_id)
    told = [m for m in host.unclaimed if m.get("method") in _TOLD]
    return told, answer


@pytest.mark.parametrize("downstream", ["stdio", "http"])
async def test_a_stdio_host_gets_log_messages_progress_and_errors_as_the_server_sent_them(
    tmp_path: Path, downstream: str
) -> None:
    want_logs, want_error = await _direct_over_stdio()
    async with running_fixture() as fixture_url:
        url = fixture_url if downstream == "http" else None
        config = write_config(tmp_path, extra=_table(url=url))
        async with stdio_broker(config, log=tmp_path / "broker.log") as host:
            await host.request("tools/list")  # the first gathering is over: the short path
            told, answer = await _wire_call(host, "fixture__test_tool_with_logging")
            assert "result" in answer, answer
            assert [m["params"] for m in told] == want_logs
            _, failed = await _wire_call(host, "fixture__test_jsonrpc_error")
            assert failed["error"] == want_error
            meta = {"_meta": {"progressToken": "p-1"}}
            told, answer = await _wire_call(host, "fixture__test_tool_with_progress", **meta)
            values = [m["params"]["progress"] for m in told if m["method"].endswith("progress")]
            assert values == [0, 50, 100] and all(type(v) is int for v in values), told
            assert {m["params"]["progressToken"] for m in told} == {"p-1"}
            await host.request("logging/setLevel", {"level": "warning"})
            told, answer = await _wire_call(host, "fixture__test_tool_with_logging")
            assert "result" in answer and told == []  # info messages, below warning


async def _modern_logs(url: str, name: str) -> list[tuple[str, str | None, Any]]:
    """The log messages a 2026-07-28 host that asked for them with its request's log level
    is told during a call."""
    seen = Seen()
    async with (
        streamable_http_client(url) as (read, write),
        ClientSession(read, write, logging_callback=seen.log, log_level="info") as session,
    ):
        await session.discover()
        with anyio.fail_after(30):
            result = await session.call_tool(name, {})
    assert not result.is_error, result
    return seen.logs


async def test_a_2026_host_is_told_the_log_messages_of_its_call(tmp_path: Path) -> None:
    async with running_fixture() as fixture_url:
        config = write_config(tmp_path, extra=_table(url=fixture_url))
        async with running_broker(config, "http") as (broker_url, _):
            want = await _modern_logs(fixture_url, "test_tool_with_logging")
            got = await _modern_logs(f"{broker_url}/mcp", "fixture__test_tool_with_logging")
    assert got == want and len(want) == 3
