"""Forwarded calls on the stdio fast lane (``Gateway.call_tool_json``): timeouts, cancellation
and a server that dies mid-call behave as on the SDK path, with errors naming server and tool."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest
from context_broker.server.gateway import GatewayError, GatewaySettings
from gateway_env import fixture_server, running, status_of

from tests.support.polling import eventually, wait_for_mark


async def test_a_timed_out_call_is_an_error_naming_server_and_tool_and_is_cancelled_downstream(
    tmp_path: Path,
) -> None:
    marks = tmp_path / "marks.txt"
    slow = fixture_server("slow_tools.py", env={"MARKS": str(marks)})
    async with running({"slow": slow}) as gw:
        quick = await gw.call_tool_json("slow", "wait", {"seconds": 0, "tag": "quick"})
        assert quick["content"][0]["text"] == "waited 0s quick"
        assert quick.get("isError") in (None, False)
        with pytest.raises(GatewayError, match="timed out") as info:
            await gw.call_tool_json("slow", "wait", {"seconds": 30, "tag": "late"}, timeout=1.0)
        assert (info.value.server, info.value.tool) == ("slow", "wait")
        assert "'slow'" in str(info.value) and "'wait'" in str(info.value)
        await wait_for_mark(marks, "cancelled late")  # the courtesy cancel reached the server
        again = await gw.call_tool_json("slow", "wait", {"seconds": 0, "tag": "after"})
        assert again["content"][0]["text"] == "waited 0s after"
        assert status_of(gw, "slow").reconnects == 0  # a timeout keeps the connection


async def test_a_caller_that_gives_up_cancels_the_downstream_request(tmp_path: Path) -> None:
    marks = tmp_path / "marks.txt"
    slow = fixture_server("slow_tools.py", env={"MARKS": str(marks)})
    async with running({"slow": slow}) as gw:
        answered: list[object] = []

        async def call() -> None:
            answered.append(await gw.call_tool_json("slow", "wait", {"seconds": 30, "tag": "gone"}))

        async with anyio.create_task_group() as tg:
            tg.start_soon(call)
            await wait_for_mark(marks, "started gone")  # the call has reached the server
            tg.cancel_scope.cancel()  # the caller gives up
        assert not answered
        await wait_for_mark(marks, "cancelled gone")
        result = await gw.call_tool_json("slow", "wait", {"seconds": 0})
        assert result["content"][0]["text"] == "waited 0s"


async def test_a_server_dying_mid_call_fails_that_call_and_is_reconnected() -> None:
    settings = GatewaySettings(backoff_base=0.2, backoff_max=1.0, debounce=0.05)
    async with running({"slow": fixture_server("slow_tools.py")}, settings=settings) as gw:
        with anyio.fail_after(10), pytest.raises(GatewayError, match="connection lost") as info:
            await gw.call_tool_json("slow", "die", {})
        assert (info.value.server, info.value.tool) == ("slow", "die")
        await eventually(lambda: status_of(gw, "slow").reconnects >= 1, within=30)
        await eventually(lambda: status_of(gw, "slow").connected, within=30)
        result = await gw.call_tool_json("slow", "wait", {"seconds": 0, "tag": "back"})
        assert result["content"][0]["text"] == "waited 0s back"


async def test_calls_to_a_down_server_or_an_unknown_tool_name_the_server() -> None:
    async with running({"slow": fixture_server("slow_tools.py")}) as gw:
        with pytest.raises(GatewayError, match="'elsewhere'"):
            await gw.call_tool_json("elsewhere", "wait", {})
        # A name the server never listed is refused before it goes downstream (trust "pin").
        with pytest.raises(
            GatewayError, match="'no_such_tool' is not one downstream server 'slow'"
        ):
            await gw.call_tool_json("slow", "no_such_tool", {})
