"""The fast path is only faster: the same lines sent to a ``context-broker serve`` with the fast
path on and to one with it off (``[server] fast_path = false``, or
``CONTEXT_BROKER_FAST_PATH=0``) get the same answers, over stdio with real downstream servers
(mcp-server-time, and a slow one to cancel). Answers are compared whole, after replacing what
differs by nature (each broker's session id, clock readings)."""

from __future__ import annotations

import json
import re
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest

from tests.support.broker_procs import BROKER, server_env
from tests.support.polling import wait_for_mark
from tests.support.stdio_host import StdioHost, stdio_broker

TIME = str(Path(sys.executable).parent / "mcp-server-time")
FIXTURES = Path(__file__).resolve().parents[1] / "gateway" / "fixtures"
ANSWER_WITHIN = 30.0
SESSION = "@@SESSION@@"
_CLOCK = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:[+-]\d{2}:\d{2}|Z)?")


def _line(request_id: int | str, method: str, params: dict[str, Any] | None = None) -> bytes:
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
    if params is not None:
        message["params"] = params
    return json.dumps(message).encode()


def _call(request_id: int | str, name: str, arguments: Any, **extra: Any) -> bytes:
    return _line(request_id, "tools/call", {"name": name, "arguments": arguments, **extra})


def _proxied(request_id: int, tool_arguments: Any, **extra: Any) -> bytes:
    body = {"server": "time", "tool": "get_current_time", "arguments": tool_arguments} | extra
    return _call(request_id, "call_tool", body)


CANCEL = json.dumps(
    {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 40}}
).encode()

# (line, the id it is answered under or None) in order; SESSION is replaced per broker.
SCRIPT: list[tuple[bytes, int | str | None]] = [
    (_line("list", "tools/list"), "list"),
    (_call(1, "time__get_current_time", {"timezone": "Asia/Tokyo"}), 1),
    (_call("1", "time__get_current_time", {"timezone": "Europe/Paris"}), "1"),
    (_proxied(2, {"timezone": "America/New_York"}), 2),
    (_proxied(3, {"timezone": "Asia/Tokyo"}, session_id=SESSION), 3),
    (_call(4, "time__get_current_time", {"timezone": "UTC"}, _meta={"session_id": SESSION}), 4),
    (_call(5, "time__get_current_time", None), 5),
    # bad arguments: wrong type, unknown timezone, not an object, missing field
    (_call(10, "time__get_current_time", {"timezone": 5}), 10),
    (_proxied(11, {"timezone": 5}), 11),
    (_call(12, "time__get_current_time", {"timezone": "Mars/Olympus_Mons"}), 12),
    (_proxied(13, "Asia/Tokyo"), 13),
    (_call(14, "call_tool", {"server": "time"}), 14),
    (_proxied(15, {"timezone": "UTC"}, session_id="no-such-session"), 15),
    # unknown tools and servers
    (_call(20, "time__no_such_tool", {}), 20),
    (_call(21, "call_tool", {"server": "time", "tool": "no_such_tool", "arguments": {}}), 21),
    (_call(22, "call_tool", {"server": "nowhere", "tool": "x", "arguments": {}}), 22),
    (_call(23, "no_such_tool", {}), 23),
    # malformed lines: answered under their id when it can be read, skipped otherwise
    (b'{"jsonrpc":"2.0","id":30,"method":"tools/call","params":{"name":', 30),
    (b"not json at all", None),
    (b'{"jsonrpc":"1.0","id":31,"method":"tools/call","params":{"name":"call_tool"}}', 31),
    (b'{"jsonrpc":"2.0","id":32,"method":"tools/call","params":["time__get_current_time"]}', 32),
    (b'{"jsonrpc":"2.0","id":33,"method":"tools/call","params":' + b"[" * 200 + b"]" * 200, 33),
    (b'{"jsonrpc":"2.0","id":null,"method":"tools/call","params":{}}', None),
    (_call(34, "time__get_current_time", {"timezone": "Asia/Tokyo\ud800"}), 34),
    # a host's cancel: the call stops and gets no answer; the broker goes on serving (39 is
    # answered while 40 runs; the cancel is sent once the slow server has marked 40 started)
    (_call(40, "slow__wait", {"seconds": 30, "tag": "stop-me"}), None),
    (_call(39, "slow__wait", {"seconds": 0, "tag": "before"}), 39),
    (CANCEL, None),
    (_call(41, "slow__wait", {"seconds": 0, "tag": "after"}), 41),
    (_line(99, "ping"), 99),
]


@dataclass
class Broker:
    host: StdioHost
    stderr: Path
    marks: Path


def _config(tmp: Path, fast_path: bool | None) -> Path:
    setting = "" if fast_path is None else f"fast_path = {str(fast_path).lower()}"
    path = tmp / "broker.toml"
    path.write_text(
        f"""
[search]
semantic = false

[server]
{setting}

[gateway]
startup_budget = 30  # every answer waits for the first gathering of the servers

[servers.time]
command = "{TIME}"
timeout = 20

[servers.slow]
command = "{sys.executable}"
args = ["{FIXTURES / "slow_tools.py"}"]
env = {{ MARKS = "{tmp / "marks.txt"}" }}
timeout = 20

[servers.ids]
command = "{sys.executable}"
args = ["{FIXTURES / "request_ids.py"}"]
timeout = 20
include = "agent"
""",
        encoding="utf-8",
    )
    return path


@asynccontextmanager
async def broker(
    tmp: Path, *, fast_path: bool | None, env: dict[str, str] | None = None
) -> AsyncIterator[Broker]:
    """A ``context-broker serve`` over stdio, initialized, with every server's tools listed."""
    tmp.mkdir(parents=True, exist_ok=True)
    config = _config(tmp, fast_path)
    stderr = tmp / "broker.log"
    async with stdio_broker(config, log=stderr, env=env, within=ANSWER_WITHIN) as host:
        yield Broker(host, stderr, tmp / "marks.txt")


def _normalized(value: Any, session: str) -> Any:
    text = json.dumps(value, sort_keys=True).replace(session, SESSION)
    return json.loads(_CLOCK.sub("@@TIME@@", text))


async def _run_script(broker: Broker) -> dict[str, Any]:
    """Every answer of SCRIPT, by id, normalized; unanswered ids are checked absent."""
    host = broker.host
    await host.send_raw(_call("s", "create_session", {}))
    created = await host.answer("s")
    session = created["result"]["structuredContent"]["session_id"]
    answers: dict[str, Any] = {}
    for line, answer_id in SCRIPT:
        if line == CANCEL:  # cancel only a call that has reached the server
            await wait_for_mark(broker.marks, "started stop-me", within=ANSWER_WITHIN)
        await host.send_raw(line.replace(SESSION.encode(), session.encode()))
        if answer_id is not None:
            answers[repr(answer_id)] = _normalized(await host.answer(answer_id), session)
    assert not [m for m in host.unclaimed if m.get("id") == 40], "a cancelled call answered"
    return answers


@pytest.mark.asyncio
async def test_every_answer_is_the_same_with_the_fast_path_on_and_off(tmp_path: Path) -> None:
    results: dict[str, dict[str, Any]] = {}

    async def run(name: str, fast_path: bool) -> None:
        async with broker(tmp_path / name, fast_path=fast_path) as b:
            results[name] = await _run_script(b)

    async with anyio.create_task_group() as tg:
        tg.start_soon(run, "fast", True)
        tg.start_soon(run, "sdk", False)
    fast, sdk = results["fast"], results["sdk"]
    assert list(fast) == list(sdk)
    differ = {i: (fast[i], sdk[i]) for i in fast if fast[i] != sdk[i]}
    assert not differ, "answers differ (fast, sdk):\n" + "\n".join(map(str, differ.items()))
    # the script did reach the downstream servers and the cancel held
    assert "@@TIME@@" in json.dumps(fast["1"])
    assert fast["41"]["result"]["content"][0]["text"] == "waited 0s after"
    for name in ("fast", "sdk"):  # the downstream call was cancelled, not left running
        await wait_for_mark(
            tmp_path / name / "marks.txt", "cancelled stop-me", within=ANSWER_WITHIN
        )
    assert "fast path off" in (tmp_path / "sdk" / "broker.log").read_text()
    assert "fast path off" not in (tmp_path / "fast" / "broker.log").read_text()


async def _id_seen_downstream(broker: Broker, request_id: int) -> str:
    call = {"server": "ids", "tool": "request_id", "arguments": {}}
    await broker.host.send_raw(_call(request_id, "call_tool", call))
    answer = await broker.host.answer(request_id)
    return str(answer["result"]["content"][0]["text"])


@pytest.mark.asyncio
async def test_with_the_switch_off_calls_reach_the_downstream_through_the_sdk_session(
    tmp_path: Path,
) -> None:
    async with broker(tmp_path / "on", fast_path=None) as on:
        await _id_seen_downstream(on, 1)  # a call before the first gathering: the full path
        lane_id = await _id_seen_downstream(on, 2)
    off_env = {"CONTEXT_BROKER_FAST_PATH": "0"}
    async with broker(tmp_path / "env", fast_path=True, env=off_env) as off:
        sdk_id = await _id_seen_downstream(off, 1)
    assert lane_id.startswith("cb-"), lane_id  # the fast lane's own request ids
    assert sdk_id.isdigit(), sdk_id  # the SDK client session's numbered requests
    assert "fast path off" in (tmp_path / "env" / "broker.log").read_text()


@pytest.mark.asyncio
async def test_a_fast_path_variable_that_is_neither_on_nor_off_is_refused(tmp_path: Path) -> None:
    config = _config(tmp_path, None)
    env = server_env() | {"CONTEXT_BROKER_FAST_PATH": "maybe"}
    with anyio.fail_after(ANSWER_WITHIN):
        done = await anyio.run_process(
            [BROKER, "serve", "--config", str(config)], env=env, check=False
        )
    assert done.returncode != 0
    message = done.stderr.decode()
    assert "CONTEXT_BROKER_FAST_PATH='maybe'" in message and "set it to 0" in message
    assert "Traceback" not in message
