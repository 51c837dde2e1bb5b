"""Calls on the stdio fast lane (``Gateway.call`` with no host, progress or retry, awaited by
``Gateway.call_tool``): timeouts, cancellation and a server that dies mid-call behave as on the
SDK path, with tool errors naming server and tool."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
from context_broker.server.gateway import GatewaySettings
from gateway_env import fixture_server, running, status_of

from tests.support.polling import eventually, wait_for_mark


def _text(answer: object) -> str:
    """The first text of a fast-lane answer (the JSON object the server sent)."""
    assert isinstance(answer, dict), answer  # the fast lane answers with the JSON as sent
    return str(answer["content"][0]["text"])


def _error(answer: object) -> str:
    """The text of a tool error the gateway answered with."""
    assert getattr(answer, "is_error", False), answer
    content: Any = answer.content
    return str(content[0].text)


async def test_a_timed_out_call_is_an_error_naming_server_and_tool_and_is_cancelled_downstream(
    tmp_path: Path,
) -> None:
    marks = tmp_path / "marks.txt"
    slow = fixture_server("slow_tools.py", env={"MARKS": str(marks)})
    async with running({"slow": slow}) as gw:
        quick = await gw.call_tool("slow", "wait", {"seconds": 0, "tag": "quick"}, plain=True)
        assert _text(quick) == "waited 0s quick"
        assert isinstance(quick, dict) and quick.get("isError") in (None, False)
        late = await gw.call_tool(
            "slow", "wait", {"seconds": 30, "tag": "late"}, timeout=1.0, plain=True
        )
        assert "timed out" in _error(late)
        assert "'slow'" in _error(late) and "'wait'" in _error(late)
        await wait_for_mark(marks, "cancelled late")  # the courtesy cancel reached the server
        again = await gw.call_tool("slow", "wait", {"seconds": 0, "tag": "after"}, plain=True)
        assert _text(again) == "waited 0s after"
        assert status_of(gw, "slow").reconnects == 0  # a timeout keeps the connection


async def test_a_caller_that_gives_up_cancels_the_downstream_request(tmp_path: Path) -> None:
    marks = tmp_path / "marks.txt"
    slow = fixture_server("slow_tools.py", env={"MARKS": str(marks)})
    async with running({"slow": slow}) as gw:
        answered: list[object] = []

        async def call() -> None:
            answered.append(
                await gw.call_tool("slow", "wait", {"seconds": 30, "tag": "gone"}, plain=True)
            )

        async with anyio.create_task_group() as tg:
            tg.start_soon(call)
            await wait_for_mark(marks, "started gone")  # the call has reached the server
            tg.cancel_scope.cancel()  # the caller gives up
        assert not answered
        await wait_for_mark(marks, "cancelled gone")
        result = await gw.call_tool("slow", "wait", {"seconds": 0}, plain=True)
        assert _text(result) == "waited 0s"


async def test_a_server_dying_mid_call_fails_that_call_and_is_reconnected() -> None:
    settings = GatewaySettings(backoff_base=0.2, backoff_max=1.0, debounce=0.05)
    async with running({"slow": fixture_server("slow_tools.py")}, settings=settings) as gw:
        with anyio.fail_after(10):
            died = await gw.call_tool("slow", "die", {}, plain=True)
        assert "connection lost" in _error(died)
        assert "'slow'" in _error(died) and "'die'" in _error(died)
        await eventually(lambda: status_of(gw, "slow").reconnects >= 1, within=30)
        await eventually(lambda: status_of(gw, "slow").connected, within=30)
        result = await gw.call_tool("slow", "wait", {"seconds": 0, "tag": "back"}, plain=True)
        assert _text(result) == "waited 0s back"


async def test_calls_to_a_down_server_or_an_unknown_tool_name_the_server() -> None:
    async with running({"slow": fixture_server("slow_tools.py")}) as gw:
        assert "'elsewhere'" in _error(await gw.call_tool("elsewhere", "wait", {}))
        # A name the server never listed is refused before it goes downstream (trust "pin").
        unlisted = _error(await gw.call_tool("slow", "no_such_tool", {}, plain=True))
        assert "'no_such_tool' is not one downstream server 'slow'" in unlisted
