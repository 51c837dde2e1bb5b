"""The gateway against the five reference servers over stdio, run as real subprocesses."""

from __future__ import annotations

import re
import signal
from pathlib import Path
from typing import Any

import anyio
import pytest
from context_broker.server.embedding import build_embedder
from context_broker.server.gateway import ExposedTool, GatewaySettings
from context_broker.server.settings import AppConfig, DownstreamConfig
from gateway_env import (
    child_pids,
    everything_server,
    five_servers,
    running,
    status_of,
    time_server,
    tool_error,
)
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.types import CallToolResult

from contextcore.catalog import Catalog
from contextcore.items import ItemRef
from contextcore.search import SearchEngine
from tests.support.polling import eventually

VALID = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


@pytest.mark.model
async def test_all_tools_of_the_five_servers_are_gathered_and_searchable(tmp_path: Path) -> None:
    catalog = Catalog()
    exposed: list[list[ExposedTool]] = []
    async with running(five_servers(tmp_path), catalog, on_exposed_change=exposed.append) as gw:
        statuses = {s.name: s for s in gw.status()}
        assert all(s.connected for s in statuses.values()), [s.row() for s in gw.status()]
        assert all(s.tool_count > 0 and s.last_refresh for s in statuses.values())
        tools = catalog.items(["tool"])
        assert len(tools) == sum(s.tool_count for s in statuses.values())
        assert {t.ref.server for t in tools} == set(statuses)
        names = [t.name for t in gw.exposed_tools()]
        assert names == sorted(names) and len(set(names)) == len(names)
        assert all(VALID.match(n) for n in names)
        await eventually(lambda: bool(exposed) and len(exposed[-1]) == len(names), within=10)
    engine = SearchEngine(catalog, build_embedder(AppConfig()))
    result = engine.search("What is the current time in Tokyo?", types=["tool"])
    assert result.mode == "hybrid", result.warnings
    assert result.hits[0].ref.server == "time", result.hits[:3]
    assert ItemRef("tool", "get_current_time", "time") in [h.ref for h in result.hits[:2]]


CALLS: list[tuple[str, str, dict[str, Any]]] = [
    (
        "time",
        "convert_time",
        {"source_timezone": "UTC", "time": "14:00", "target_timezone": "Asia/Tokyo"},
    ),
    ("time", "get_current_time", {"timezone": "Not/AZone"}),  # an isError result
    ("everything", "get-tiny-image", {}),
    ("everything", "get-structured-content", {"location": "Chicago"}),
    ("everything", "get-sum", {"a": "not a number"}),  # input validation: isError
    ("everything", "echo", {"message": "héllo"}),
]


async def test_direct_and_proxied_calls_give_the_same_result() -> None:
    servers = {"time": time_server(), "everything": everything_server()}
    async with running(servers) as gw:
        proxied = [await gw.call_tool(s, t, a) for s, t, a in CALLS]
        lane = [await gw.call_tool(s, t, a, plain=True) for s, t, a in CALLS]
        direct = []
        for name, config in servers.items():
            params = StdioServerParameters(command=config.command or "", args=list(config.args))
            async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
                with anyio.fail_after(30):
                    await session.initialize()
                    for server, tool, args in CALLS:
                        if server == name:
                            direct.append(await session.call_tool(tool, args))
    order = [c for c in CALLS if c[0] == "time"] + [c for c in CALLS if c[0] == "everything"]
    by_call = {id(c): p for c, p in zip(CALLS, proxied, strict=True)}
    for call, expected in zip(order, direct, strict=True):
        got = by_call[id(call)]
        assert got.model_dump(by_alias=True, mode="json") == expected.model_dump(
            by_alias=True, mode="json"
        ), call
    for call, raw, typed in zip(CALLS, lane, proxied, strict=True):  # the fast lane agrees
        as_model = CallToolResult.model_validate(raw, by_name=False)
        assert as_model.model_dump(by_alias=True, mode="json") == typed.model_dump(
            by_alias=True, mode="json"
        ), call
    kinds = {block.type for r in proxied for block in r.content}
    assert "image" in kinds
    assert [r.is_error for r in proxied] == [False, True, False, False, True, False]
    assert proxied[3].structured_content is not None


async def test_progress_is_forwarded_and_unknown_targets_are_named() -> None:
    seen: list[tuple[float, float | None]] = []

    async def progress(value: float, total: float | None, message: str | None) -> None:
        seen.append((value, total))

    async with running({"everything": everything_server()}) as gw:
        with anyio.fail_after(20):
            result = await gw.call_tool(
                "everything",
                "trigger-long-running-operation",
                {"duration": 0.3, "steps": 3},
                progress_callback=progress,
            )
        assert not result.is_error
        assert [v for v, _ in seen] == [1, 2, 3] and seen[-1][1] == 3
        assert "'nowhere'" in tool_error(await gw.call_tool("nowhere", "echo", {}))
        late = await gw.call_tool(
            "everything", "trigger-long-running-operation", {"duration": 5}, timeout=0.3
        )
        assert "timed out" in tool_error(late) and "'everything'" in tool_error(late)
        assert "'trigger-long-running-operation'" in tool_error(late)


async def test_a_killed_downstream_is_reported_and_comes_back() -> None:
    settings = GatewaySettings(backoff_base=1.0, backoff_max=2.0)
    servers = {"time": time_server(), "everything": everything_server()}
    async with running(servers, settings=settings) as gw:
        (pid,) = child_pids("mcp-server-time")
        tools_before = len(gw.catalog)
        import os

        os.kill(pid, signal.SIGKILL)
        await eventually(lambda: not status_of(gw, "time").connected, within=10)
        status = status_of(gw, "time")
        assert status.last_error and status.state == "reconnecting"
        down = await gw.call_tool("time", "get_current_time", {"timezone": "UTC"})
        assert "'time'" in tool_error(down)
        assert len(gw.catalog) == tools_before  # tools stay, marked unavailable
        assert not any(t.available for t in gw.tools() if t.server == "time")
        echo = await gw.call_tool("everything", "echo", {"message": "still here"})
        assert "still here" in echo.content[0].text  # type: ignore[union-attr]
        await eventually(lambda: status_of(gw, "time").connected, within=40)
        assert status_of(gw, "time").reconnects >= 1
        result = await gw.call_tool("time", "get_current_time", {"timezone": "UTC"})
        assert not result.is_error


async def test_a_server_that_never_answers_does_not_hold_up_the_others() -> None:
    hang_timeout = 8.0
    servers: dict[str, DownstreamConfig] = {
        "hang": _never_answers(hang_timeout),
        "time": time_server(),
    }
    from context_broker.server.gateway import Gateway

    from contextcore.catalog import Catalog as _Catalog

    started = anyio.current_time()
    async with Gateway(servers, _Catalog()) as gw:
        await eventually(lambda: status_of(gw, "time").connected, within=hang_timeout)
        assert status_of(gw, "hang").state == "starting"
        assert any(t.server == "time" for t in gw.exposed_tools())
        with anyio.fail_after(hang_timeout + 2):
            await gw.wait_ready()
        assert anyio.current_time() - started < hang_timeout + 1.5
        await eventually(lambda: status_of(gw, "hang").last_error is not None, within=10)
        assert "8s" in (status_of(gw, "hang").last_error or "")
        assert status_of(gw, "time").connected


def _never_answers(timeout: float) -> DownstreamConfig:
    from gateway_env import fixture_server

    return fixture_server("never_answers.py", timeout=timeout)
