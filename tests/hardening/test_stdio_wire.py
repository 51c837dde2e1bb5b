"""Hostile lines on the stdio wire of a real ``context-broker serve``: every request with a
usable id gets an answer under that id (a result or a JSON-RPC error), lines without one are
skipped, the process never dies, no answer carries a traceback or a secret, and the broker
serves normally afterwards. With and without a downstream server (mcp-server-time)."""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from hypothesis import HealthCheck, given, settings

from tests.support.stdio_host import StdioHost, stdio_broker
from tests.support.wire_lines import CALL, LINES, PLACEHOLDER, SECRET, Line

pytestmark = pytest.mark.asyncio(loop_scope="module")

TIME = str(Path(sys.executable).parent / "mcp-server-time")
PARSE_ERROR, INVALID_REQUEST, INVALID_PARAMS = -32700, -32600, -32602
ANSWER_WITHIN = 30.0


def check_answer_line(line: bytes) -> None:
    """Every line the broker writes: one JSON-RPC message, no traceback, no secret."""
    text = line.decode("utf-8")
    assert "Traceback" not in text and 'File "' not in text, text[:500]
    assert SECRET not in text
    message = json.loads(text)
    assert message.get("jsonrpc") == "2.0"
    if "error" in message:
        error = message["error"]
        assert isinstance(error["code"], int) and isinstance(error["message"], str)
        assert 0 < len(error["message"]) < 2000


def check_answer(answer: dict[str, Any]) -> None:
    assert ("result" in answer) != ("error" in answer), answer


CONFIGS = {
    "plain": "[search]\nsemantic = false\n",
    "time": f"""
[search]
semantic = false

[servers.time]
command = "{TIME}"
env = {{ TIME_API_TOKEN = "{SECRET}" }}
""",
}


async def _start(tmp: Path, name: str) -> AsyncIterator[StdioHost]:
    config = tmp / f"{name}.toml"
    config.write_text(CONFIGS[name], encoding="utf-8")
    async with stdio_broker(
        config, log=tmp / f"{name}.log", within=ANSWER_WITHIN, check_line=check_answer_line
    ) as host:
        listed = await host.request("tools/list")
        names = [tool["name"] for tool in listed["result"]["tools"]]
        assert (CALL in names) == (name == "time")
        yield host
        # after everything: a normal tools/list still works
        again = await host.request("tools/list")
        assert [tool["name"] for tool in again["result"]["tools"]] == names


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def time_host(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[StdioHost]:
    async for host in _start(tmp_path_factory.mktemp("wire"), "time"):
        yield host


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def plain_host(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[StdioHost]:
    async for host in _start(tmp_path_factory.mktemp("wire"), "plain"):
        yield host


# -- the defects, one by one ---------------------------------------------------------------


def _deep(levels: int) -> str:
    return "[" * levels + "]" * levels


def _call_line(request_id: int | str, arguments_json: str, name: str = CALL) -> bytes:
    head = {"jsonrpc": "2.0", "id": request_id, "method": "tools/call"}
    text = json.dumps(head)[:-1] + f', "params": {{"name": "{name}", "arguments": '
    return (text + arguments_json + "}}").encode()


async def test_a_tools_call_nesting_5000_levels_is_a_parse_error_not_a_crash(
    time_host: StdioHost,
) -> None:
    request_id = time_host.fresh_id()
    await time_host.send_raw(_call_line(request_id, '{"timezone": ' + _deep(5000) + "}"))
    answer = await time_host.answer(request_id)
    assert answer["error"]["code"] == PARSE_ERROR
    assert "deeper than 128 levels" in answer["error"]["message"]
    await time_host.assert_alive()


async def test_a_deep_tools_call_with_the_id_last_is_answered_under_that_id(
    time_host: StdioHost,
) -> None:
    request_id = time_host.fresh_id("str")
    params = '{"name": "' + CALL + '", "arguments": {"timezone": ' + _deep(5000) + "}}"
    line = '{"method": "tools/call", "params": ' + params + ', "jsonrpc": "2.0", "id": '
    await time_host.send_raw((line + json.dumps(request_id) + "}").encode())
    assert (await time_host.answer(request_id))["error"]["code"] == PARSE_ERROR
    await time_host.assert_alive()


async def test_a_cancel_notification_nesting_5000_levels_is_skipped_not_a_crash(
    time_host: StdioHost,
) -> None:
    line = '{"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": '
    await time_host.send_raw((line + _deep(5000) + "}}").encode())
    await time_host.assert_alive()


async def test_a_call_with_a_cut_emoji_is_served_with_a_replacement_character(
    time_host: StdioHost,
) -> None:
    request_id = time_host.fresh_id()
    arguments = '{"agent": "cut emoji \\ud83d"}'
    await time_host.send_raw(_call_line(request_id, arguments, name="create_session"))
    answer = await time_host.answer(request_id)
    assert answer["result"]["isError"] is False, answer
    assert "cut emoji \ufffd" in json.dumps(answer["result"], ensure_ascii=False)


async def test_a_downstream_call_with_a_cut_emoji_gets_an_answer(time_host: StdioHost) -> None:
    request_id = time_host.fresh_id()
    await time_host.send_raw(_call_line(request_id, '{"timezone": "Asia/Tokyo \\udc00"}'))
    answer = await time_host.answer(request_id)
    assert answer["result"]["isError"] is True  # no such time zone, said as a tool error


MALFORMED = {
    "raw NUL": (
        '{"jsonrpc": "2.0", "id": ID, "method": "ping", "params": {"x": "a\x00b"}}',
        -32700,
    ),
    "5000-digit integer": (
        '{"jsonrpc": "2.0", "id": ID, "method": "ping", "params": {"x": ' + "7" * 5000 + "}}",
        PARSE_ERROR,
    ),
    "nesting of 200 levels": (
        '{"jsonrpc": "2.0", "id": ID, "method": "ping", "params": {"x": ' + _deep(200) + "}}",
        PARSE_ERROR,
    ),
    "cut short": ('{"jsonrpc": "2.0", "id": ID, "method": "tools/li', PARSE_ERROR),
    "jsonrpc 1.0": ('{"jsonrpc": "1.0", "id": ID, "method": "ping"}', INVALID_REQUEST),
    "jsonrpc missing": ('{"id": ID, "method": "ping"}', INVALID_REQUEST),
    "method missing": ('{"jsonrpc": "2.0", "id": ID}', INVALID_REQUEST),
    "method a number": ('{"jsonrpc": "2.0", "id": ID, "method": 42}', INVALID_REQUEST),
    "params a string": (
        '{"jsonrpc": "2.0", "id": ID, "method": "tools/list", "params": "x"}',
        -32602,
    ),
    "params an array": ('{"jsonrpc": "2.0", "id": ID, "method": "ping", "params": [1, 2]}', -32602),
}


@pytest.mark.parametrize("kind", list(MALFORMED))
@pytest.mark.parametrize("id_kind", ["int", "str"])
async def test_a_malformed_request_with_an_id_gets_its_json_rpc_error(
    time_host: StdioHost, kind: str, id_kind: str
) -> None:
    template, code = MALFORMED[kind]
    request_id = time_host.fresh_id(id_kind)
    await time_host.send_raw(template.replace("ID", json.dumps(request_id)).encode())
    answer = await time_host.answer(request_id)
    assert answer["error"]["code"] == code, answer
    await time_host.assert_alive()


@pytest.mark.parametrize(
    "line",
    [
        '{"jsonrpc": "2.0", "id": null, "method": "ping"}',
        '{"jsonrpc": "2.0", "id": 1.5, "method": "ping"}',
        '{"jsonrpc": "2.0", "id": true, "method": "tools/list"}',
        '{"jsonrpc": "2.0", "id": {"a": 1}, "method": "ping"}',
        '{"jsonrpc": "2.0", "method": "ping", "params": {"x": ' + "7" * 5000 + "}}",
        '{"jsonrpc": "2.0", "method": "notifications/cancelled", "params": NaN}',
    ],
    ids=["null", "fraction", "bool", "object", "notification", "broken notification"],
)
async def test_a_line_without_a_usable_id_is_skipped_and_the_broker_goes_on(
    time_host: StdioHost, line: str
) -> None:
    before = len(time_host.unclaimed)
    await time_host.send_raw(line.encode("utf-8", "surrogateescape"))
    await time_host.assert_alive()
    assert not [message for message in time_host.unclaimed[before:] if "id" in message]


@pytest.mark.parametrize(
    "line",
    [
        '{"jsonrpc": "2.0", "method": "\\", "id": 7300000001}',
        '{"jsonrpc": "2.0", "params": {"x": "\\"}, "id": "wire-x", "method": "ping"}',
        "\udcff garbage \x00",
        '{"jsonrpc": "2.0", "method": "ping", "id": ',
        '{"jsonrpc": "2.0", "id": 1.5, "method": "ping", "params": NaN}',
    ],
    ids=["method swallows the id", "param swallows the id", "garbage", "id cut", "bad id"],
)
async def test_a_parse_error_whose_id_cannot_be_read_is_answered_under_id_null(
    time_host: StdioHost, line: str
) -> None:
    time_host.unclaimed = [m for m in time_host.unclaimed if m.get("id", 0) is not None]
    await time_host.send_raw(line.encode("utf-8", "surrogateescape"))
    answer = await time_host.answer(None)
    assert answer["error"]["code"] == PARSE_ERROR, answer
    await time_host.assert_alive()


HOSTILE = settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


async def _send_and_check(host: StdioHost, line: Line) -> None:
    if line.id_kind is None:
        await host.send_raw(line.text)
    else:
        request_id = host.fresh_id(line.id_kind)
        text = line.text.replace(PLACEHOLDER.encode(), json.dumps(request_id).encode())
        await host.send_raw(text)
        check_answer(await host.answer(request_id))
    await host.assert_alive()


@HOSTILE
@given(line=LINES)
async def test_generated_hostile_lines_are_answered_and_the_broker_with_a_downstream_lives(
    time_host: StdioHost, line: Line
) -> None:
    await _send_and_check(time_host, line)


@HOSTILE
@given(line=LINES)
async def test_generated_hostile_lines_are_answered_and_the_plain_broker_lives(
    plain_host: StdioHost, line: Line
) -> None:
    await _send_and_check(plain_host, line)
