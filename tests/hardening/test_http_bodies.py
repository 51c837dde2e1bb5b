"""Hostile request bodies on the Streamable HTTP transport of a real ``context-broker serve``
over a real socket: each is answered with a JSON-RPC message or an HTTP 4xx, never a 5xx or a
traceback, in both protocol eras, and the server serves normally afterwards."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import httpx2
import pytest
import pytest_asyncio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support.broker_procs import running_broker, write_config
from tests.support.handshake import INITIALIZE, PROTOCOL_VERSION
from tests.support.wire_lines import LINES, PLACEHOLDER, SECRET, Line

pytestmark = pytest.mark.asyncio(loop_scope="module")

ACCEPT = "application/json, text/event-stream"
AUTH = {"authorization": f"Bearer {SECRET}"}


@dataclass
class Endpoint:
    url: str
    process: anyio.abc.Process
    http: httpx2.AsyncClient
    session_id: str

    async def post(self, body: bytes, headers: dict[str, str]) -> httpx2.Response:
        base = {"content-type": "application/json", "accept": ACCEPT}
        return await self.http.post(self.url, content=body, headers=base | headers)

    async def initialize(self) -> httpx2.Response:
        return await self.post(json.dumps(INITIALIZE).encode(), {})


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def endpoint(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Endpoint]:
    # The broker's task group must be entered and left in one task; fixture setup and
    # teardown run in different ones, so the broker lives in a task of its own.
    folder: Path = tmp_path_factory.mktemp("bodies")
    config = write_config(folder, extra=f'\n[server.http]\nauth_token = "{SECRET}"\n')
    ready: asyncio.Future[Endpoint] = asyncio.get_running_loop().create_future()
    stop = asyncio.Event()

    async def serve() -> None:
        try:
            async with (
                running_broker(config) as (url, process),
                httpx2.AsyncClient(
                    timeout=30, headers={"authorization": f"Bearer {SECRET}"}
                ) as http,
            ):
                ready.set_result(await _started(Endpoint(f"{url}/mcp", process, http, "")))
                await stop.wait()
        except BaseException as exc:
            if not ready.done():
                ready.set_exception(exc)
            raise

    task = asyncio.create_task(serve())
    with anyio.fail_after(60):
        endpoint = await ready
    try:
        yield endpoint
        assert endpoint.process.returncode is None, "the broker exited"
        again = await endpoint.initialize()
        assert again.status_code == 200 and "result" in _messages(again)[0]
    finally:
        stop.set()
        with anyio.fail_after(30):
            await task


async def _started(endpoint: Endpoint) -> Endpoint:
    started = await endpoint.initialize()
    assert started.status_code == 200, started.text
    endpoint.session_id = started.headers["mcp-session-id"]
    initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    era = {"mcp-session-id": endpoint.session_id, "mcp-protocol-version": PROTOCOL_VERSION}
    await endpoint.post(json.dumps(initialized).encode(), era)
    return endpoint


def _messages(response: httpx2.Response) -> list[dict[str, Any]]:
    """The JSON-RPC messages in a response body, JSON or an event stream."""
    text = response.text
    if not text.strip():
        return []
    if response.headers.get("content-type", "").startswith("text/event-stream"):
        chunks = [line[5:].strip() for line in text.splitlines() if line.startswith("data:")]
        return [json.loads(chunk) for chunk in chunks if chunk]
    data = json.loads(text)
    return data if isinstance(data, list) else [data]


def _check(response: httpx2.Response, request_id: int | str | None) -> None:
    status = response.status_code
    assert status < 500, (status, response.text[:500])
    assert "Traceback" not in response.text and 'File "' not in response.text
    assert SECRET not in response.text
    messages = _messages(response)
    for message in messages:
        assert message.get("jsonrpc") == "2.0", message
        if "error" in message:
            error = message["error"]
            assert isinstance(error["code"], int) and 0 < len(error["message"]) < 4000
    if status >= 400:
        assert status < 500 and any("error" in message for message in messages), response.text
    elif request_id is not None and status == 200:
        assert any(m.get("id") == request_id for m in messages), response.text[:500]


ERAS = st.sampled_from(["session", "none", "modern"])


def _headers(endpoint: Endpoint, era: str) -> dict[str, str]:
    if era == "session":
        return {"mcp-session-id": endpoint.session_id, "mcp-protocol-version": PROTOCOL_VERSION}
    if era == "modern":
        return {"mcp-protocol-version": "2026-07-28"}
    return {}


BODIES = settings(
    max_examples=80,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


@BODIES
@given(line=LINES, era=ERAS)
async def test_generated_hostile_bodies_get_a_json_rpc_answer_or_a_4xx(
    endpoint: Endpoint, line: Line, era: str
) -> None:
    request_id: int | str | None = None
    body = line.text
    if line.id_kind is not None:
        request_id = 4242 if line.id_kind == "int" else "body-4242"
        body = body.replace(PLACEHOLDER.encode(), json.dumps(request_id).encode())
    with anyio.fail_after(30):
        response = await endpoint.post(body, _headers(endpoint, era))
    _check(response, request_id)
    assert endpoint.process.returncode is None


DEFECTS = {
    "deep tools/call": '{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"x",'
    '"arguments":{"a":' + "[" * 5000 + "]" * 5000 + "}}}",
    "deep cancel": '{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":'
    + "[" * 5000
    + "]" * 5000
    + "}}",
    "cut emoji": '{"jsonrpc":"2.0","id":7,"method":"ping","params":{"x":"\\ud83d"}}',
    "raw NUL": '{"jsonrpc":"2.0","id":7,"method":"ping","params":{"x":"a\x00"}}',
    "huge integer": '{"jsonrpc":"2.0","id":7,"method":"ping","params":{"x":' + "7" * 5000 + "}}",
    "jsonrpc 1.0": '{"jsonrpc":"1.0","id":7,"method":"ping"}',
    "params a string": '{"jsonrpc":"2.0","id":7,"method":"ping","params":"x"}',
    "garbage": "\x00\x01 not json",
}


@pytest.mark.parametrize("era", ["session", "none", "modern"])
@pytest.mark.parametrize("kind", list(DEFECTS))
async def test_each_known_hostile_body_gets_a_json_rpc_error_and_the_server_lives(
    endpoint: Endpoint, kind: str, era: str
) -> None:
    with anyio.fail_after(30):
        response = await endpoint.post(DEFECTS[kind].encode(), _headers(endpoint, era))
    _check(response, None)
    assert endpoint.process.returncode is None
