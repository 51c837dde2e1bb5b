"""run_code through a real ``context-broker serve``: a task over two real downstream servers
answered by one program, what the model reads of it, the record it leaves, the signatures a
model writes against, and the state a session keeps between runs and across a restart."""

from __future__ import annotations

from pathlib import Path

import pytest
from mcp import MCPError

from tests.code_mode.code_env import (
    THREE_STEPS,
    answer_of,
    downstream_calls,
    run,
    serving,
    text_of,
    write_config,
)
from tests.support.mcp_calls import call


async def test_a_three_step_task_over_two_servers_returns_only_its_answer_on_the_record(
    tmp_path: Path,
) -> None:
    async with serving(write_config(tmp_path)) as client:
        turn = await call(
            client, "build_request_context", message="the largest Norwegian order, time in Oslo"
        )
        sid, request_id = turn["session_id"], turn["request_id"]
        failed, text = await run(client, THREE_STEPS, session_id=sid)
        assert not failed, text

        answer = answer_of(text)
        assert answer["customer"] == "Customer 366 of NO" and answer["amount"] == 9840.4
        assert answer["oslo"].endswith("+01:00") or answer["oslo"].endswith("+02:00")
        assert text.startswith("67 Norwegian orders\n")
        assert f"[session_id {sid}; 3 tool calls]" in text
        # Nothing else of what the tools returned: no other order, no other field.
        assert "Customer 000" not in text and "shipped" not in text and len(text) < 400

        assert downstream_calls(tmp_path) == [
            {"tool": "list_orders", "arguments": {"country": "NO"}},
            {"tool": "get_order", "arguments": {"order_id": 1366}},
        ]
        usage = await call(client, "get_usage_stats", session_id=sid)
        used = {row["key"]: row for row in usage["items"] if row.get("used")}
        assert {"tool:records/list_orders", "tool:records/get_order"} <= set(used)
        assert "tool:time/get_current_time" in used
        assert usage["turns_with_usage"] == 1

        view = await call(client, "ui_request_context", session_id=sid, request_id=request_id)
        (shown,) = view["code_runs"]
        assert shown["code"] == THREE_STEPS and not shown["is_error"]
        assert [(c["server"], c["tool"], c["ok"]) for c in shown["calls"]] == [
            ("records", "list_orders", True),
            ("records", "get_order", True),
            ("time", "get_current_time", True),
        ]
        assert "Customer 366 of NO" in shown["answer"]
        recorded = await client.call_tool(
            "get_request_context", {"session_id": sid, "request_id": request_id}
        )
        assert "## Code runs after this request (1)" in text_of(recorded)
        assert "records/list_orders, records/get_order, time/get_current_time" in text_of(recorded)


async def test_a_tool_s_python_signature_is_given_and_a_wrong_call_is_a_type_error_with_its_line(
    tmp_path: Path,
) -> None:
    async with serving(write_config(tmp_path)) as client:
        got = await call(
            client, "get_context_items", keys=["records__list_orders", "records/get_order"]
        )
        python = [item["python"] for item in got["items"]]
        assert python == [
            "async def records__list_orders(*, country: str | None = None) -> dict[str, Any]",
            "async def records__get_order(*, order_id: int) -> dict[str, Any]",
        ]
        assert "Python (run_code): `async def records__get_order(*, order_id: int)" in got["text"]

        failed, text = await run(client, 'x = 1\norder = await records__get_order(order_id="7")')
        assert failed and "run_code.py:2:" in text and "Expected `int`" in text
        failed, text = await run(client, "x = 1\ny = 1 +\nz = 2")
        assert failed and "run_code.py:2:" in text and "invalid-syntax" in text
        assert downstream_calls(tmp_path) == []  # nothing ran


async def test_variables_last_for_the_next_run_and_a_broker_restart_on_sqlite(
    tmp_path: Path,
) -> None:
    config = write_config(tmp_path, backend="sqlite")
    async with serving(config) as client:
        sid = (await call(client, "create_session"))["session_id"]
        failed, text = await run(
            client,
            'norway = (await records__list_orders(country="NO"))["orders"]\nlen(norway)',
            session_id=sid,
        )
        assert not failed and answer_of(text) == 67
        failed, text = await run(client, "sum(o['items'] for o in norway)", session_id=sid)
        assert not failed, text
        items = answer_of(text)
        other = (await call(client, "create_session"))["session_id"]
        failed, text = await run(client, "norway", session_id=other)
        assert failed and "not defined" in text  # another session's variables are its own

    async with serving(config) as client:
        failed, text = await run(client, "[len(norway), norway[0]['country']]", session_id=sid)
        assert not failed and answer_of(text) == [67, "NO"], text
        failed, text = await run(client, "sum(o['items'] for o in norway)", session_id=sid)
        assert answer_of(text) == items
        failed, text = await run(client, "norway", session_id=sid, reset=True)
        assert failed and "not defined" in text
    assert len(downstream_calls(tmp_path)) == 1


async def test_variables_over_the_size_limit_are_not_kept_and_the_answer_says_so(
    tmp_path: Path,
) -> None:
    async with serving(write_config(tmp_path, code="max_state_bytes = 2000")) as client:
        sid = (await call(client, "create_session"))["session_id"]
        failed, text = await run(
            client, "everything = await records__list_orders()\neverything['count']", session_id=sid
        )
        assert not failed and "variables not kept" in text and "max_state_bytes = 2000" in text
        assert answer_of(text.rsplit("\n", 1)[0]) == 400
        failed, text = await run(client, "everything", session_id=sid)
        assert failed and "not defined" in text


async def test_code_mode_off_takes_run_code_off_the_surface(tmp_path: Path) -> None:
    async with serving(write_config(tmp_path, code="enabled = false")) as client:
        names = [t.name for t in (await client.list_tools()).tools]
        assert "call_tool" in names and "run_code" not in names
        got = await call(client, "get_context_items", keys=["records__list_orders"])
        assert got["items"][0]["python"] is None and "Python" not in got["text"]
        with pytest.raises(MCPError, match="unknown tool 'run_code'"):
            await client.call_tool("run_code", {"code": "1"})


async def test_calls_awaited_together_run_at_once(tmp_path: Path) -> None:
    async with serving(write_config(tmp_path)) as client:
        code = (
            "import asyncio, time\n"
            "start = time.monotonic()\n"
            "said = await asyncio.gather(*[records__wait(seconds=1) for _ in range(3)])\n"
            "[said, time.monotonic() - start]"
        )
        failed, text = await run(client, code)
        assert not failed, text
        said, took = answer_of(text)
        assert said == [{"result": "waited 1.0 s"}] * 3 and 1 <= took < 2.5
        assert "; 3 tool calls]" in text


async def test_printed_output_and_the_answer_are_cut_at_their_limit_saying_so(
    tmp_path: Path,
) -> None:
    async with serving(write_config(tmp_path, code="max_output_chars = 100")) as client:
        failed, text = await run(
            client, "for i in range(100_000):\n    print('line', i)\n'x' * 500"
        )
        assert not failed, text
        printed, cut = text.split("\n[printed output cut at 100 characters; ", 1)
        assert printed.startswith("line 0\nline 1\n") and len(printed) == 100
        assert cut.split(" ", 1)[0].isdigit()
        assert "x" * 100 + "\n[answer cut at 100 characters]" in text
