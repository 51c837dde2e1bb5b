"""Calls of directly listed downstream tools over stdio, driven line by line as a host would:
answered under the host's own ids, cancellable, and failing as tool errors naming the tool."""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import anyio.abc

ROOT = Path(__file__).resolve().parents[2]
BROKER = str(Path(sys.executable).parent / "context-broker")
SLOW = ROOT / "tests" / "gateway" / "fixtures" / "slow_tools.py"


class Host:
    """A host speaking newline-delimited JSON-RPC to the broker's stdin and stdout."""

    def __init__(self, process: anyio.abc.Process) -> None:
        self.process = process
        self.buffer = b""
        self.unclaimed: list[dict[str, Any]] = []

    async def send(self, message: dict[str, Any]) -> None:
        assert self.process.stdin is not None
        await self.process.stdin.send(json.dumps(message).encode() + b"\n")

    async def _next(self) -> dict[str, Any]:
        assert self.process.stdout is not None
        while b"\n" not in self.buffer:
            self.buffer += await self.process.stdout.receive()
        line, self.buffer = self.buffer.split(b"\n", 1)
        return json.loads(line)  # type: ignore[no-any-return]

    async def response(self, request_id: int | str, within: float = 30) -> dict[str, Any]:
        """The response to ``request_id`` (ids compared with their JSON type)."""
        for i, message in enumerate(self.unclaimed):
            if message.get("id") == request_id and type(message["id"]) is type(request_id):
                return self.unclaimed.pop(i)
        with anyio.fail_after(within):
            while True:
                message = await self._next()
                if message.get("id") == request_id and type(message["id"]) is type(request_id):
                    return message
                self.unclaimed.append(message)

    async def call(self, request_id: int | str, name: str, arguments: dict[str, Any]) -> None:
        params = {"name": name, "arguments": arguments}
        request = {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}
        await self.send(request)


@asynccontextmanager
async def broker(tmp_path: Path, marker: Path) -> AsyncIterator[Host]:
    config = tmp_path / "broker.toml"
    config.write_text(
        f"""
[search]
semantic = false

[servers.slow]
command = "{sys.executable}"
args = ["{SLOW}"]
env = {{ CANCEL_MARKER = "{marker}" }}
timeout = 5
""",
        encoding="utf-8",
    )
    with open(tmp_path / "broker.log", "wb") as log:
        async with await anyio.open_process(
            [BROKER, "serve", "--config", str(config)], stderr=log
        ) as process:
            host = Host(process)
            init = {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "line-host", "version": "1"},
            }
            await host.send({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": init})
            assert "result" in await host.response(0)
            await host.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
            await host.send({"jsonrpc": "2.0", "id": "list", "method": "tools/list"})
            listed = await host.response("list")
            assert "slow__wait" in [t["name"] for t in listed["result"]["tools"]]
            try:
                yield host
            finally:
                assert process.stdin is not None
                await process.stdin.aclose()
                with anyio.fail_after(15):
                    await process.wait()


def text(response: dict[str, Any]) -> str:
    return "".join(b.get("text", "") for b in response["result"]["content"])


async def test_listed_tools_answer_under_the_hosts_own_ids(tmp_path: Path) -> None:
    async with broker(tmp_path, tmp_path / "marks.txt") as host:
        await host.call(7, "slow__wait", {"seconds": 0.3, "tag": "int"})
        await host.call("7", "slow__wait", {"seconds": 0, "tag": "str"})
        as_str = await host.response("7")
        as_int = await host.response(7)
        assert text(as_str) == "waited 0s str" and text(as_int) == "waited 0.3s int"
        assert as_int["jsonrpc"] == "2.0" and "error" not in as_int


async def test_a_host_cancel_stops_the_downstream_call_and_gets_no_response(
    tmp_path: Path,
) -> None:
    marker = tmp_path / "marks.txt"
    async with broker(tmp_path, marker) as host:
        await host.call(1, "slow__wait", {"seconds": 30, "tag": "stopped"})
        await anyio.sleep(0.5)
        cancel = {"requestId": 1, "reason": "user pressed stop"}
        await host.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": cancel})
        with anyio.fail_after(10):
            while "stopped" not in (marker.read_text() if marker.exists() else ""):
                await anyio.sleep(0.05)
        await host.call(2, "slow__wait", {"seconds": 0, "tag": "next"})
        assert text(await host.response(2)) == "waited 0s next"
        await host.send({"jsonrpc": "2.0", "id": 3, "method": "ping"})
        await host.response(3)
        assert not any(m.get("id") == 1 for m in host.unclaimed)


async def test_a_downstream_timeout_is_a_tool_error_naming_server_and_tool(tmp_path: Path) -> None:
    async with broker(tmp_path, tmp_path / "marks.txt") as host:
        await host.call(1, "slow__wait", {"seconds": 30, "tag": "slow"})
        response = await host.response(1, within=20)
        assert response["result"]["isError"] is True
        message = text(response)
        assert "'slow'" in message and "'wait'" in message and "timed out" in message


async def test_call_tool_without_a_session_id_answers_like_the_full_path(tmp_path: Path) -> None:
    marker = tmp_path / "marks.txt"
    async with broker(tmp_path, marker) as host:
        target = {"server": "slow", "tool": "wait"}
        await host.call(1, "call_tool", target | {"arguments": {"seconds": 0, "tag": "via"}})
        assert text(await host.response(1)) == "waited 0s via"
        await host.call(2, "call_tool", {"server": "slow"})
        invalid = await host.response(2)
        assert invalid["result"]["isError"] is True
        assert text(invalid) == "call_tool: invalid arguments: tool: required argument is missing"
        await host.call(3, "call_tool", {"server": "nowhere", "tool": "wait"})
        unknown = await host.response(3)
        assert unknown["result"]["isError"] is True and "'nowhere'" in text(unknown)
        await host.call(4, "call_tool", target | {"arguments": {"seconds": 30, "tag": "gone"}})
        await anyio.sleep(0.5)
        cancel = {"requestId": 4}
        await host.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": cancel})
        with anyio.fail_after(10):
            while "gone" not in (marker.read_text() if marker.exists() else ""):
                await anyio.sleep(0.05)
