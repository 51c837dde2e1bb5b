"""Calls of directly listed downstream tools over stdio, driven line by line as a host would:
answered under the host's own ids, cancellable, and failing as tool errors naming the tool."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from tests.support.polling import wait_for_mark
from tests.support.stdio_host import StdioHost, stdio_broker

ROOT = Path(__file__).resolve().parents[2]
SLOW = ROOT / "tests" / "gateway" / "fixtures" / "slow_tools.py"


@asynccontextmanager
async def broker(tmp_path: Path, marks: Path) -> AsyncIterator[StdioHost]:
    """The broker over stdio with the slow fixture server, which writes its marks to
    ``marks``; initialized, with the fixture's tools listed."""
    config = tmp_path / "broker.toml"
    config.write_text(
        f"""
[search]
semantic = false

[servers.slow]
command = "{sys.executable}"
args = ["{SLOW}"]
env = {{ MARKS = "{marks}" }}
timeout = 5
""",
        encoding="utf-8",
    )
    async with stdio_broker(config, log=tmp_path / "broker.log") as host:
        listed = await host.request("tools/list")
        assert "result" in listed, listed
        assert "slow__wait" in [t["name"] for t in listed["result"]["tools"]]
        yield host


def text(response: dict[str, Any]) -> str:
    return "".join(b.get("text", "") for b in response["result"]["content"])


async def test_listed_tools_answer_under_the_hosts_own_ids(tmp_path: Path) -> None:
    async with broker(tmp_path, tmp_path / "marks.txt") as host:
        await host.call(7, "slow__wait", {"seconds": 0.3, "tag": "int"})
        await host.call("7", "slow__wait", {"seconds": 0, "tag": "str"})
        as_str = await host.answer("7")
        as_int = await host.answer(7)
        assert text(as_str) == "waited 0s str" and text(as_int) == "waited 0.3s int"
        assert as_int["jsonrpc"] == "2.0" and "error" not in as_int


async def test_a_host_cancel_stops_the_downstream_call_and_gets_no_response(
    tmp_path: Path,
) -> None:
    marks = tmp_path / "marks.txt"
    async with broker(tmp_path, marks) as host:
        await host.call(1, "slow__wait", {"seconds": 30, "tag": "stopped"})
        await wait_for_mark(marks, "started stopped")  # the call has reached the server
        await host.cancel(1, reason="user pressed stop")
        await wait_for_mark(marks, "cancelled stopped")
        await host.call(2, "slow__wait", {"seconds": 0, "tag": "next"})
        assert text(await host.answer(2)) == "waited 0s next"
        await host.send({"jsonrpc": "2.0", "id": 3, "method": "ping"})
        await host.answer(3)
        assert not any(m.get("id") == 1 for m in host.unclaimed)


async def test_a_downstream_timeout_is_a_tool_error_naming_server_and_tool(tmp_path: Path) -> None:
    async with broker(tmp_path, tmp_path / "marks.txt") as host:
        await host.call(1, "slow__wait", {"seconds": 30, "tag": "slow"})
        response = await host.answer(1, within=20)
        assert response["result"]["isError"] is True
        message = text(response)
        assert "'slow'" in message and "'wait'" in message and "timed out" in message


async def test_call_tool_without_a_session_id_answers_like_the_full_path(tmp_path: Path) -> None:
    marks = tmp_path / "marks.txt"
    async with broker(tmp_path, marks) as host:
        target = {"server": "slow", "tool": "wait"}
        await host.call(1, "call_tool", target | {"arguments": {"seconds": 0, "tag": "via"}})
        assert text(await host.answer(1)) == "waited 0s via"
        await host.call(2, "call_tool", {"server": "slow"})
        invalid = await host.answer(2)
        assert invalid["result"]["isError"] is True
        assert text(invalid) == "call_tool: invalid arguments: tool: required argument is missing"
        await host.call(3, "call_tool", {"server": "nowhere", "tool": "wait"})
        unknown = await host.answer(3)
        assert unknown["result"]["isError"] is True and "'nowhere'" in text(unknown)
        await host.call(4, "call_tool", target | {"arguments": {"seconds": 30, "tag": "gone"}})
        await wait_for_mark(marks, "started gone")
        await host.cancel(4)
        await wait_for_mark(marks, "cancelled gone")
