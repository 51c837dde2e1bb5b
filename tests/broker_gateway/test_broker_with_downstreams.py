"""The broker chained in front of real downstream servers, driven as a host would."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
from mcp import Client, StdioServerParameters

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
BROKER = str(BIN / "context-broker")
FIXTURES = ROOT / "tests" / "gateway" / "fixtures"
EVERYTHING = ROOT / "tests" / "downstream" / "node_modules" / ".bin" / "mcp-server-everything"


def config(tmp_path: Path, *, semantic: bool = False, extra: str = "") -> Path:
    text = f"""
[search]
semantic = {str(semantic).lower()}

[[rules]]
name = "timezones"
description = "Answering questions about time"
text = "Always state the IANA timezone you used."
include = "agent"

[servers.time]
command = "{BIN / "mcp-server-time"}"
include = "agent"

[servers.time.tools.get_current_time]
include = "always"

# alpha and beta add tools as they run (their grow tool); they are trusted to
[servers.alpha]
command = "{sys.executable}"
args = ["{FIXTURES / "named_tools.py"}", "read-file"]
hold_new_tools = false

[servers.beta]
command = "{sys.executable}"
args = ["{FIXTURES / "named_tools.py"}", "read_file"]
hold_new_tools = false

[servers.silent]
command = "{sys.executable}"
args = ["{FIXTURES / "never_answers.py"}"]
timeout = 3
{extra}
"""
    path = tmp_path / "broker.toml"
    path.write_text(text, encoding="utf-8")
    return path


def params(path: Path) -> StdioServerParameters:
    return StdioServerParameters(command=BROKER, args=["serve", "--config", str(path)])


def text_of(result: Any) -> str:
    return "".join(getattr(block, "text", "") for block in result.content)


async def test_downstream_tools_are_listed_namespaced_and_called_through_the_broker(
    tmp_path: Path,
) -> None:
    with anyio.fail_after(60):
        async with Client(params(config(tmp_path)), mode="legacy") as client:
            start = anyio.current_time()
            listed = await client.list_tools()
            elapsed = anyio.current_time() - start
            names = [t.name for t in listed.tools]
            assert elapsed < 3 + 5, "a silent downstream must not hold tools/list past its timeout"
            # The default gateway_tools: what a model needs (sessions, list_servers and the rest
            # answer by name, listed with [server] tools = "all").
            assert {"build_request_context", "get_context_items", "call_tool"} <= set(names)
            assert "create_session" not in names and "list_servers" not in names
            assert "time__get_current_time" in names
            assert "time__convert_time" not in names  # agent mode: reachable via call_tool
            read_names = sorted(n for n in names if "read" in n)
            assert read_names == ["alpha__read-file", "beta__read_file"]
            assert all(len(n) <= 64 for n in names)

            direct = await client.call_tool("time__get_current_time", {"timezone": "Asia/Tokyo"})
            proxied = await client.call_tool(
                "call_tool",
                {
                    "server": "time",
                    "tool": "get_current_time",
                    "arguments": {"timezone": "Asia/Tokyo"},
                },
            )
            assert not direct.is_error and not proxied.is_error
            assert json.loads(text_of(direct))["timezone"] == "Asia/Tokyo"
            assert json.loads(text_of(proxied))["timezone"] == "Asia/Tokyo"

            echoed = await client.call_tool("beta__read_file", {"text": "x"})
            assert text_of(echoed) == "read_file:x"  # the original name reached the downstream

            bad = await client.call_tool(
                "call_tool",
                {
                    "server": "time",
                    "tool": "get_current_time",
                    "arguments": {"timezone": "Mars/Base"},
                },
            )
            assert bad.is_error

            servers = await client.call_tool("list_servers", {})
            rows = {r["name"]: r for r in servers.structured_content["servers"]}  # type: ignore[index]
            assert rows["time"]["connected"] and rows["time"]["tool_count"] == 2
            assert not rows["silent"]["connected"]

            down = await client.call_tool("call_tool", {"server": "silent", "tool": "x"})
            assert down.is_error and "silent" in text_of(down)


async def test_downstream_tools_take_part_in_sessions_and_search(tmp_path: Path) -> None:
    with anyio.fail_after(90):
        async with Client(params(config(tmp_path, semantic=True)), mode="legacy") as client:
            await client.list_tools()
            created = await client.call_tool("create_session", {})
            session = created.structured_content  # type: ignore[assignment]
            keys = {(i["type"], i["server"], i["name"]) for i in session["items"]}
            assert ("tool", "time", "get_current_time") in keys
            found = await client.call_tool(
                "search_context_items",
                {"query": "convert a time from Tokyo to Paris timezone", "types": ["tool"]},
            )
            first = found.structured_content["items"][0]  # type: ignore[index]
            assert (first["server"], first["name"]) == ("time", "convert_time")
            built = await client.call_tool(
                "build_request_context",
                {"session_id": session["session_id"], "message": "what time is it in Tokyo?"},
            )
            items = built.structured_content["items"]  # type: ignore[index]
            expected = {
                "type": "tool",
                "name": "get_current_time",
                "server": "time",
                "include_mode": "always",
                "similarity_score": None,
            }
            assert any(expected.items() <= item.items() for item in items), items


def test_check_reports_each_downstream_and_eval_uses_the_live_catalog(tmp_path: Path) -> None:
    path = config(tmp_path)
    out = subprocess.run(
        [BROKER, "check", "--config", str(path), "--json"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    report = json.loads(out.stdout)
    servers = {s["name"]: s for s in report["servers"]}
    assert servers["time"]["connected"] and servers["time"]["toolCount"] == 2
    assert not servers["silent"]["connected"]
    queries = tmp_path / "q.jsonl"
    queries.write_text(
        json.dumps({"query": "convert time between timezones", "gold": ["tool:time/convert_time"]})
        + "\n"
    )
    out = subprocess.run(
        [
            BROKER,
            "eval",
            "--config",
            str(path),
            "--queries",
            str(queries),
            "--mode",
            "lexical",
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    result = json.loads(out.stdout)
    assert result["n_items"] >= 5 and result["missing_gold"] == []
    assert result["metrics"]["recall@5"] == 1.0


async def test_stdio_carries_megabyte_messages_and_keeps_stray_output_off_the_wire(
    tmp_path: Path,
) -> None:
    path = config(tmp_path)
    with anyio.fail_after(60):
        async with Client(params(path), mode="legacy") as client:
            created = await client.call_tool("create_session", {})
            sid = created.structured_content["session_id"]  # type: ignore[index]
            big = await client.call_tool(
                "build_request_context", {"session_id": sid, "message": "time " * 200_001}
            )
            assert big.is_error and "max_message_chars" in text_of(big)
            ok = await client.call_tool(
                "build_request_context", {"session_id": sid, "message": "x " * 400_000}
            )
            assert not ok.is_error  # an 800 kB line went through intact


async def test_calls_with_a_session_id_are_recorded_in_its_history_and_trimmed_later(
    tmp_path: Path,
) -> None:
    extra = "\n[gateway]\nrecord_max_chars = 300\n\n[servers.beta2]\n" + (
        f'command = "{sys.executable}"\nargs = ["{FIXTURES / "named_tools.py"}", "echo"]\n'
        "record_calls = false\n"
    )
    with anyio.fail_after(60):
        async with Client(params(config(tmp_path, extra=extra)), mode="legacy") as client:
            await client.list_tools()
            sid = (await client.call_tool("create_session", {})).structured_content["session_id"]  # type: ignore[index]
            await client.call_tool(
                "call_tool",
                {
                    "server": "time",
                    "tool": "get_current_time",
                    "arguments": {"timezone": "Asia/Tokyo"},
                    "session_id": sid,
                },
            )
            await client.call_tool(
                "beta__read_file", {"text": "y" * 1000}, meta={"session_id": sid}
            )
            await client.call_tool(
                "call_tool",
                {
                    "server": "time",
                    "tool": "get_current_time",
                    "arguments": {"timezone": "Mars/Base"},
                    "session_id": sid,
                },
            )
            await client.call_tool(
                "call_tool",
                {"server": "beta2", "tool": "echo", "arguments": {"text": "z"}, "session_id": sid},
            )
            unknown = await client.call_tool(
                "call_tool",
                {"server": "time", "tool": "get_current_time", "session_id": "s_" + "A" * 32},
            )
            assert unknown.is_error and "unknown session_id" in text_of(unknown)

            window = await client.call_tool("get_history", {"session_id": sid})
            messages = window.structured_content["messages"]  # type: ignore[index]
            calls = [
                m["tool_calls"][0]["function"]["name"] for m in messages if m.get("tool_calls")
            ]
            assert calls == ["get_current_time", "read_file", "get_current_time"]  # not beta2
            results = [m["content"] for m in messages if m["role"] == "tool"]
            assert "Asia/Tokyo" in results[0]
            assert (
                results[1].startswith("read_file:yyy") and "truncated by the broker" in results[1]
            )
            assert len(results[1]) < 400
            assert results[2].startswith("Error:")

            trimmed = await client.call_tool(
                "get_history",
                {
                    "session_id": sid,
                    "filters": [{"name": "sizeLimiter", "options": {"maxTokens": 120}}],
                },
            )
            kept = trimmed.structured_content["messages"]  # type: ignore[index]
            assert 0 < len(kept) < len(messages)
            ids = [m["tool_calls"][0]["id"] for m in kept if m.get("tool_calls")]
            answered = [m["tool_call_id"] for m in kept if m["role"] == "tool"]
            assert ids == answered  # the pipeline keeps each call with its result


async def test_hosts_hear_tools_list_changed_when_the_exposed_tools_change(
    tmp_path: Path,
) -> None:
    heard: list[anyio.Event] = [anyio.Event()]

    async def on_message(message: Any) -> None:
        if getattr(message, "method", None) == "notifications/tools/list_changed":
            heard[-1].set()

    with anyio.fail_after(60):
        async with Client(
            params(config(tmp_path)), mode="legacy", message_handler=on_message
        ) as client:
            names = [t.name for t in (await client.list_tools()).tools]
            assert "alpha__grow" in names and "alpha__fresh" not in names
            heard.append(anyio.Event())
            grown = await client.call_tool("alpha__grow", {"name": "fresh"})
            assert not grown.is_error, text_of(grown)
            # Handshake era: a notification on the connection. Servers still connecting at
            # startup may announce their own changes first; a host re-lists on each one, and
            # one of them must come after the new tool is exposed.
            while "alpha__fresh" not in names:
                await heard[-1].wait()
                heard.append(anyio.Event())
                names = [t.name for t in (await client.list_tools()).tools]

    with anyio.fail_after(60):
        async with Client(params(config(tmp_path)), mode="auto") as client:
            names = [t.name for t in (await client.list_tools()).tools]
            assert "beta__newer" not in names
            async with client.listen(tools_list_changed=True) as events:
                grown = await client.call_tool("beta__grow", {"name": "newer"})
                assert not grown.is_error, text_of(grown)
                async for _ in events:  # 2026-07-28: an event on the listen stream
                    names = [t.name for t in (await client.list_tools()).tools]
                    if "beta__newer" in names:
                        break
            assert "beta__newer" in names


async def test_downstream_progress_reaches_the_host_through_the_broker(tmp_path: Path) -> None:
    extra = f'\n[servers.everything]\ncommand = "{EVERYTHING}"\n'
    seen: list[float] = []

    async def progress(value: float, total: float | None, message: str | None) -> None:
        seen.append(value)

    with anyio.fail_after(60):
        async with Client(params(config(tmp_path, extra=extra)), mode="legacy") as client:
            await client.list_tools()
            result = await client.call_tool(
                "call_tool",
                {
                    "server": "everything",
                    "tool": "trigger-long-running-operation",
                    "arguments": {"duration": 0.3, "steps": 3},
                },
                progress_callback=progress,
            )
            assert not result.is_error
            assert seen == [1, 2, 3]
            seen.clear()
            quiet = await client.call_tool(
                "call_tool",
                {
                    "server": "everything",
                    "tool": "trigger-long-running-operation",
                    "arguments": {"duration": 0.1, "steps": 2},
                },
            )
            assert not quiet.is_error and seen == []
