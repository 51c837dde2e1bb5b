"""The broker's first seconds as a host meets them, on a real ``context-broker serve`` with a
real downstream server: a direct call made before any ``tools/list`` waits for the first
gathering and is answered by the downstream (stdio and HTTP), a batch on stdio is answered,
and input closed at any moment of startup ends the process cleanly, with no child left."""

from __future__ import annotations

import json
import os
import sys
import uuid
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import httpx2
import pytest

from tests.support.broker_procs import BROKER, running_broker, server_env
from tests.support.handshake import INITIALIZE, INITIALIZED, PROTOCOL_VERSION
from tests.support.polling import eventually
from tests.support.stdio_host import stdio_broker

BIN = Path(sys.executable).parent
SLOW_START = Path(__file__).with_name("fixtures") / "slow_start.py"
ACCEPT = "application/json, text/event-stream"
EARLY_CALL = {
    "jsonrpc": "2.0",
    "id": 2,
    "method": "tools/call",
    "params": {"name": "time__get_current_time", "arguments": {"timezone": "UTC"}},
}


def _config(folder: Path, *, delay: float, semantic: bool = False, tag: str = "") -> Path:
    """A broker with one downstream (``mcp-server-time``) that starts after ``delay`` s."""
    config = folder / "broker.toml"
    config.write_text(
        f"""
[search]
semantic = {str(semantic).lower()}

[gateway]
startup_budget = 60

[servers.time]
command = "{sys.executable}"
args = ["{SLOW_START}", "{delay}", "{BIN / "mcp-server-time"}"]
env = {{ BROKER_STARTUP_TAG = "{tag}" }}
""",
        encoding="utf-8",
    )
    return config


def _line(message: Any) -> bytes:
    return json.dumps(message).encode() + b"\n"


def _text(result: dict[str, Any]) -> str:
    return "".join(block.get("text", "") for block in result.get("content", []))


async def test_a_direct_call_before_any_tools_list_on_stdio_waits_and_is_answered(
    tmp_path: Path,
) -> None:
    async with stdio_broker(_config(tmp_path, delay=2.0), within=60) as host:
        await host.send(EARLY_CALL)
        answer = await host.answer(2)
    assert "result" in answer, answer
    assert not answer["result"].get("isError"), answer
    assert "UTC" in _text(answer["result"])


def _messages(response: httpx2.Response) -> list[dict[str, Any]]:
    if response.headers.get("content-type", "").startswith("text/event-stream"):
        chunks = [line[5:].strip() for line in response.text.splitlines() if line[:5] == "data:"]
        return [json.loads(chunk) for chunk in chunks if chunk]
    data = json.loads(response.text)
    return data if isinstance(data, list) else [data]


async def test_a_direct_call_before_any_tools_list_over_http_waits_and_is_answered(
    tmp_path: Path,
) -> None:
    base = {"content-type": "application/json", "accept": ACCEPT}
    async with (
        running_broker(_config(tmp_path, delay=2.0)) as (url, _process),
        httpx2.AsyncClient(timeout=60) as http,
    ):
        started = await http.post(f"{url}/mcp", content=_line(INITIALIZE), headers=base)
        assert started.status_code == 200, started.text
        era = base | {"mcp-session-id": started.headers["mcp-session-id"]}
        era["mcp-protocol-version"] = PROTOCOL_VERSION
        await http.post(f"{url}/mcp", content=_line(INITIALIZED), headers=era)
        called = await http.post(f"{url}/mcp", content=_line(EARLY_CALL), headers=era)
    (answer,) = [m for m in _messages(called) if m.get("id") == 2]
    assert "result" in answer, answer
    assert not answer["result"].get("isError"), answer
    assert "UTC" in _text(answer["result"])


async def test_a_batch_on_stdio_gets_an_invalid_request_answer_like_over_http(
    tmp_path: Path,
) -> None:
    batch = [{"jsonrpc": "2.0", "id": 5, "method": "ping"}]
    async with stdio_broker(_config(tmp_path, delay=0), within=60) as host:
        for sent in (batch, []):
            await host.send(sent)
            answer = await host.answer(None)
            assert answer["error"]["code"] == -32600, answer
            assert "batch" in answer["error"]["message"]
        await host.send({"jsonrpc": "2.0", "id": 6, "method": "ping"})
        assert (await host.answer(6))["result"] == {}  # still serving
    base = {"content-type": "application/json", "accept": ACCEPT}
    async with (
        running_broker(_config(tmp_path, delay=0)) as (url, _process),
        httpx2.AsyncClient(timeout=60) as http,
    ):
        over_http = await http.post(f"{url}/mcp", content=_line(batch), headers=base)
    (http_answer,) = _messages(over_http)
    assert http_answer["id"] is None and "error" in http_answer  # the same shape of answer


def _tagged_processes(tag: str) -> list[int]:
    """Processes whose environment carries ``tag`` (the downstream and what it started)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            environ = Path(f"/proc/{entry}/environ").read_bytes()
        except OSError:
            continue
        if f"BROKER_STARTUP_TAG={tag}".encode() in environ.split(b"\0"):
            found.append(int(entry))
    return found


@pytest.mark.model
@pytest.mark.parametrize("after", [0.0, 0.1, 0.3, 0.6, 1.0, 1.5])
async def test_input_closed_at_any_moment_of_startup_ends_the_process_cleanly(
    tmp_path: Path, after: float
) -> None:
    tag = uuid.uuid4().hex
    config = _config(tmp_path, delay=0, semantic=True, tag=tag)
    process = await anyio.open_process([BROKER, "serve", "--config", str(config)], env=server_env())
    async with process:
        assert process.stdin is not None and process.stderr is not None
        await anyio.sleep(after)  # the moment under test, not a synchronisation
        await process.stdin.aclose()
        with anyio.fail_after(60):
            stderr = b"".join([chunk async for chunk in process.stderr])
            code = await process.wait()
    log = stderr.decode(errors="replace")
    assert code == 0, f"exit {code} after closing input at {after}s:\n{log[-3000:]}"
    assert "terminate called" not in log and "Traceback" not in log, log[-3000:]
    await eventually(
        lambda: not _tagged_processes(tag),
        within=10,
        every=0.1,
        what=lambda: f"the downstream and its children gone (left: {_tagged_processes(tag)})",
    )
