"""Forwarded calls on the stdio fast lane (``Gateway.call_tool_json``): timeouts, cancellation
and a server that dies mid-call behave as on the SDK path, with errors naming server and tool."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest
from gateway_env import fixture_server, running, status_of, until

from server.gateway import GatewayError, GatewaySettings


def marks(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").split() if path.exists() else []


async def wait_for_mark(path: Path, tag: str) -> None:
    with anyio.fail_after(10):
        while tag not in marks(path):
            await anyio.sleep(0.05)


async def test_a_timed_out_call_is_an_error_naming_server_and_tool_and_is_cancelled_downstream(
    tmp_path: Path,
) -> None:
    marker = tmp_path / "cancelled.txt"
    slow = fixture_server("slow_tools.py", env={"CANCEL_MARKER": str(marker)})
    async with running({"slow": slow}) as gw:
        quick = await gw.call_tool_json("slow", "wait", {"seconds": 0, "tag": "quick"})
        assert quick["content"][0]["text"] == "waited 0s quick"
        assert quick.get("isError") in (None, False)
        with pytest.raises(GatewayError, match="timed out") as info:
            await gw.call_tool_json("slow", "wait", {"seconds": 30, "tag": "late"}, timeout=1.0)
        assert (info.value.server, info.value.tool) == ("slow", "wait")
        assert "'slow'" in str(info.value) and "'wait'" in str(info.value)
        await wait_for_mark(marker, "late")  # the courtesy cancel reached the server
        again = await gw.call_tool_json("slow", "wait", {"seconds": 0, "tag": "after"})
        assert again["content"][0]["text"] == "waited 0s after"
        assert status_of(gw, "slow").reconnects == 0  # a timeout keeps the connection


async def test_a_caller_that_gives_up_cancels_the_downstream_request(tmp_path: Path) -> None:
    marker = tmp_path / "cancelled.txt"
    slow = fixture_server("slow_tools.py", env={"CANCEL_MARKER": str(marker)})
    async with running({"slow": slow}) as gw:
        with anyio.move_on_after(0.5) as scope:
            await gw.call_tool_json("slow", "wait", {"seconds": 30, "tag": "abandoned"})
        assert scope.cancelled_caught
        await wait_for_mark(marker, "abandoned")
        result = await gw.call_tool_json("slow", "wait", {"seconds": 0})
        assert result["content"][0]["text"] == "waited 0s"


async def test_a_server_dying_mid_call_fails_that_call_and_is_reconnected() -> None:
    settings = GatewaySettings(backoff_base=0.2, backoff_max=1.0, debounce=0.05)
    async with running({"slow": fixture_server("slow_tools.py")}, settings=settings) as gw:
        with anyio.fail_after(10), pytest.raises(GatewayError, match="connection lost") as info:
            await gw.call_tool_json("slow", "die", {})
        assert (info.value.server, info.value.tool) == ("slow", "die")
        with anyio.fail_after(30):
            await until(lambda: status_of(gw, "slow").reconnects >= 1)
            await until(lambda: status_of(gw, "slow").connected)
        result = await gw.call_tool_json("slow", "wait", {"seconds": 0, "tag": "back"})
        assert result["content"][0]["text"] == "waited 0s back"


async def test_calls_to_a_down_server_or_an_unknown_tool_name_the_server() -> None:
    async with running({"slow": fixture_server("slow_tools.py")}) as gw:
        with pytest.raises(GatewayError, match="'elsewhere'"):
            await gw.call_tool_json("elsewhere", "wait", {})
        unknown = await gw.call_tool_json("slow", "no_such_tool", {})
        assert unknown["isError"] is True  # the server's own answer, passed through
