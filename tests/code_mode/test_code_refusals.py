"""What a program cannot do through a real ``context-broker serve``: reach anything outside
the sandbox, outlast its limits, or call a tool its caller may not (outside the profile,
held by trust, app-only, with bad arguments); the broker answers as before afterwards."""

from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path

import anyio
import pytest

from tests.code_mode.code_env import (
    RECORDS,
    answer_of,
    downstream_calls,
    run,
    serving,
    write_config,
)
from tests.support.mcp_calls import call
from tests.support.polling import eventually

LIMITS = "timeout = 2\nmax_memory_mb = 32\nmax_recursion_depth = 100\nmax_calls = 20"
HOSTILE = {
    # Refused by the check before anything runs:
    "file": ("open('/etc/passwd').read()", "`open` used when not defined"),
    "os.system": ("import os\nos.system('touch /tmp/pwned')", "has no member `system`"),
    "subprocess": ("import subprocess", "Cannot resolve imported module `subprocess`"),
    "socket": ("import socket", "Cannot resolve imported module `socket`"),
    # Refused by the sandbox while it runs:
    "os.system at run time": (
        "import os\nos.system('touch /tmp/pwned')  # type: ignore",
        "has no attribute 'system'",
    ),
    "file at run time": (
        "import pathlib\npathlib.Path('/etc/passwd').read_text()",
        "PermissionError",
    ),
    "environment": ("import os\nos.environ['HOME']", "'os.environ' is not supported"),
    "getenv": ("import os\nos.getenv('PATH')", "not supported"),
    "endless loop": ("kept = 1\nwhile True:\n    kept += 1", "time limit exceeded"),
    "huge allocation": ("blob = 'x' * 10**10", "memory limit exceeded"),
    "growing allocation": ("xs = []\nwhile True:\n    xs.append('y' * 10**6)", "memory limit"),
    "deep recursion": ("def f(n):\n    return f(n + 1)\nf(0)", "RecursionError"),
    "flood of calls": (
        "for i in range(10_000):\n    await records__get_order(order_id=1000)",
        "limit of 20 tool calls (code.max_calls)",
    ),
}


@pytest.mark.parametrize("name", sorted(HOSTILE))
async def test_a_hostile_program_is_refused_leaves_no_trace_and_the_broker_answers_after(
    tmp_path: Path, name: str
) -> None:
    code, refusal = HOSTILE[name]
    async with serving(write_config(tmp_path, code=LIMITS)) as client:
        sid = (await call(client, "create_session"))["session_id"]
        failed, text = await run(client, "before = 41\nbefore", session_id=sid)
        assert not failed and answer_of(text) == 41

        failed, text = await run(client, code, session_id=sid)
        assert failed and refusal in text, text

        # The broker serves on; the session's variables are those before the refused run.
        failed, text = await run(client, "before + 1", session_id=sid)
        assert not failed and answer_of(text) == 42, text
        for leftover in ("kept", "blob", "xs"):
            failed, text = await run(client, leftover, session_id=sid)
            assert failed and "not defined" in text
        servers = await call(client, "list_servers")
        assert {s["name"] for s in servers["servers"]} == {"records", "time"}
    assert not Path("/tmp/pwned").exists()
    assert len(downstream_calls(tmp_path)) <= 20


REFUSED = """
refusals = {}
for label, server, tool, arguments in [
    ("outside the profile", "time", "get_current_time", {"timezone": "Europe/Oslo"}),
    ("held back", "held", "get_order", {"order_id": 1000}),
    ("app only", "records", "refresh_board", {}),
    ("bad arguments", "records", "list_orders", {"country": 47}),
]:
    try:
        await call_tool(server, tool, arguments)
        refusals[label] = None
    except RuntimeError as exc:
        refusals[label] = str(exc)
refusals
"""


async def test_calls_outside_the_profile_held_app_only_or_with_bad_arguments_never_go_out(
    tmp_path: Path,
) -> None:
    # "held": the records server again, under trust = "strict" (nothing approved: all held)
    extra = f"""
[servers.held]
command = {json.dumps(sys.executable)}
args = [{json.dumps(str(RECORDS))}]
env = {{ RECORDS_CALL_LOG = {json.dumps(str(tmp_path / "held_calls.jsonl"))} }}
trust = "strict"

[profiles.orders]
servers = ["records", "held"]
"""
    async with serving(write_config(tmp_path, extra=extra), "--profile", "orders") as client:
        failed, text = await run(client, REFUSED)
        assert not failed, text
        refusals = answer_of(text)
        assert "not in profile 'orders'" in refusals["outside the profile"]
        assert "held back" in refusals["held back"]
        assert "for its MCP App alone" in refusals["app only"]
        assert "country" in refusals["bad arguments"] and "47" in refusals["bad arguments"]

        # As functions they do not exist: the program does not run at all.
        for code in (
            "await time__get_current_time(timezone='Europe/Oslo')",
            "await records__refresh_board()",
            "await held__get_order(order_id=1000)",
        ):
            failed, text = await run(client, code)
            assert failed and "not defined" in text, text

        failed, text = await run(client, "await records__list_orders(country=47)")
        assert failed and "Expected `str | None`" in text
    assert downstream_calls(tmp_path) == []
    assert not (tmp_path / "held_calls.jsonl").exists()


def _workers() -> list[int]:
    """The sandbox workers of the brokers this test process started."""
    me = str(os.getpid())
    brokers = {
        p.name
        for p in Path("/proc").iterdir()
        if p.name.isdigit() and _parent(p) == me and b"context-broker" in _cmdline(p)
    }
    return [
        int(p.name)
        for p in Path("/proc").iterdir()
        if p.name.isdigit() and _parent(p) in brokers and b"monty" in _cmdline(p)
    ]


def _parent(proc: Path) -> str:
    try:
        return (proc / "stat").read_text().rsplit(")", 1)[1].split()[1]
    except (OSError, IndexError):
        return ""


def _cmdline(proc: Path) -> bytes:
    try:
        return (proc / "cmdline").read_bytes()
    except OSError:
        return b""


async def test_a_run_past_its_time_is_stopped_a_killed_worker_replaced_and_the_broker_serves(
    tmp_path: Path,
) -> None:
    config = write_config(tmp_path, code="run_timeout = 3\nworkers = 1")
    async with serving(config) as client:
        failed, text = await run(client, "await records__wait(seconds=30)")
        assert failed and "longer than 3 s (code.run_timeout)" in text, text
        failed, text = await run(client, "6 * 7")
        assert not failed and answer_of(text) == 42

        outcome: list[tuple[bool, str]] = []

        async def waiting() -> None:
            outcome.append(await run(client, "await records__wait(seconds=2)\n'done'"))

        async with anyio.create_task_group() as tasks:
            tasks.start_soon(waiting)
            await eventually(lambda: len(downstream_calls(tmp_path)) == 2)
            (worker,) = _workers()
            os.kill(worker, signal.SIGKILL)
        failed, text = outcome[0]
        assert failed and "sandbox worker stopped" in text, text
        failed, text = await run(client, "6 * 7")
        assert not failed and answer_of(text) == 42
        assert _workers() and worker not in _workers()
