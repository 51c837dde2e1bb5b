"""A broker for the UI tests: a config with rules and references of several priorities and
modes and a real downstream server, served over HTTP as a subprocess, and recorded turns."""

from __future__ import annotations

import os
import queue
import re
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

ROOT = Path(__file__).resolve().parents[2]
BROKER = str(Path(sys.executable).parent / "context-broker")
NAMED_TOOLS = ROOT / "tests" / "gateway" / "fixtures" / "named_tools.py"
TOKEN = "ui-test-token"

AGENT_ONLY_CONFIG = f"""
[search]
semantic = false

[server.http]
auth_token = "{TOKEN}"

[[rules]]
name = "sql-safety"
description = "Database queries and SQL"
text = "Always use parameterized SQL database queries."
include = "agent"

[[references]]
name = "deploy-guide"
description = "How to deploy the service"
text = "Deploy the service with the release script."
include = "agent"
"""
"""A config of agent items only, searched by keywords: a message that matches none of them
selects nothing at all."""

CONFIG = f"""
[search]
semantic = false

[server.http]
auth_token = "{TOKEN}"

[[rules]]
name = "house-style"
description = "How to write answers"
text = "Answer in British English."
include = "always"
priority = 20

[[rules]]
name = "alpha-rule"
description = "Another always rule"
text = "Alpha rule text."
include = "always"
priority = 20

[[rules]]
name = "commit-messages"
description = "Git commit messages"
text = "Write commit messages in the imperative mood."
include = "manual"
priority = 7

[[rules]]
name = "sql-safety"
description = "Database queries and SQL"
text = "Always use parameterized SQL database queries; never format SQL strings."
include = "agent"
priority = 5

[[references]]
name = "deploy-guide"
description = "How to deploy the service"
text = "Deploy the service with the release script, then roll out."
include = "agent"

[servers.ops]
command = "{sys.executable}"
args = ["{NAMED_TOOLS}", "deploy_service", "query_database"]
include = "agent"
trust = "auto"
"""

MESSAGE = "deploy the service and run the database SQL queries"


def write_config(folder: Path) -> Path:
    path = folder / "broker.toml"
    path.write_text(CONFIG, encoding="utf-8")
    return path


@contextmanager
def http_broker(config: Path) -> Iterator[str]:
    """``context-broker serve --transport http`` on a free port; yields its base URL."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("CONTEXT_BROKER_")}
    cmd = [BROKER, "serve", "--config", str(config), "--transport", "http", "--port", "0"]
    proc = subprocess.Popen(
        cmd, env=env, stdin=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )
    lines: queue.Queue[str] = queue.Queue()
    log: list[str] = []

    def drain() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            lines.put(line)

    threading.Thread(target=drain, daemon=True).start()
    try:
        url = None
        while url is None:
            try:
                line = lines.get(timeout=30)
            except queue.Empty:
                raise AssertionError("broker did not start:\n" + "".join(log)) from None
            log.append(line)
            match = re.search(r"listening on (http://\S+?)/mcp\b", line)
            url = match.group(1) if match else None
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)
        if proc.stderr is not None:
            proc.stderr.close()


def _structured(result: Any) -> dict[str, Any]:
    assert not result.is_error, result.content
    assert isinstance(result.structured_content, dict)
    return result.structured_content


async def _record(url: str) -> dict[str, Any]:
    import httpx

    headers = {"Authorization": f"Bearer {TOKEN}"}
    async with (
        httpx.AsyncClient(headers=headers, timeout=30) as http,
        Client(streamable_http_client(f"{url}/mcp", http_client=http)) as client,
    ):
        session = _structured(await client.call_tool("create_session", {}))
        sid = session["session_id"]
        _structured(
            await client.call_tool(
                "add_context_item", {"session_id": sid, "type": "rule", "name": "commit-messages"}
            )
        )
        built_result = await client.call_tool(
            "build_request_context", {"session_id": sid, "message": MESSAGE}
        )
        built = _structured(built_result)
        tools = (await client.list_tools()).tools
        listed = {t.name: t.meta for t in tools}
        recorded = _structured(
            await client.call_tool(
                "get_request_context", {"session_id": sid, "request_id": built["request_id"]}
            )
        )
        raw = built_result.model_dump(by_alias=True, mode="json", exclude_none=True)
        app = await client.read_resource("ui://context-broker/request-context")
        return {
            "built": built,
            "built_raw": raw,
            "recorded": recorded,
            "tool_meta": listed,
            "app": app.contents[0],
        }


async def _call(url: str, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    import httpx

    headers = {"Authorization": f"Bearer {TOKEN}"}
    async with (
        httpx.AsyncClient(headers=headers, timeout=30) as http,
        Client(streamable_http_client(f"{url}/mcp", http_client=http)) as client,
    ):
        result = await client.call_tool(name, arguments)
        return result.model_dump(by_alias=True, mode="json", exclude_none=True)


def call_tool(url: str, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """One tool call over HTTP from a thread of its own (callable inside Playwright's loop)."""
    out: list[dict[str, Any]] = []

    async def run() -> None:
        with anyio.fail_after(30):
            out.append(await _call(url, name, arguments))

    _in_thread(run, 40)
    assert out, f"{name} did not answer"
    return out[0]


async def _read_app(url: str) -> Any:
    import httpx

    headers = {"Authorization": f"Bearer {TOKEN}"}
    async with (
        httpx.AsyncClient(headers=headers, timeout=30) as http,
        Client(streamable_http_client(f"{url}/mcp", http_client=http)) as client,
    ):
        return (await client.read_resource("ui://context-broker/request-context")).contents[0]


def read_app(url: str) -> Any:
    """The MCP App resource's contents, read over HTTP."""
    out: list[Any] = []

    async def run() -> None:
        with anyio.fail_after(30):
            out.append(await _read_app(url))

    _in_thread(run, 40)
    assert out, "reading the app resource did not finish"
    return out[0]


def record_turn(url: str) -> dict[str, Any]:
    """A session with one manual item and one recorded turn; the tool results."""

    out: list[dict[str, Any]] = []

    async def run() -> None:
        with anyio.fail_after(60):
            out.append(await _record(url))

    _in_thread(run, 70)
    assert out, "recording the turn did not finish"
    return out[0]


def _in_thread(run: Any, timeout: float) -> None:
    """``anyio.run(run)`` in a thread of its own: Playwright's sync API keeps a loop running
    in the test's thread."""
    errors: list[BaseException] = []

    def target() -> None:
        try:
            anyio.run(run)
        except BaseException as exc:
            errors.append(exc)

    worker = threading.Thread(target=target)
    worker.start()
    worker.join(timeout=timeout)
    if errors:
        raise errors[0]


def expected_columns(items: list[dict[str, Any]], priorities: dict[str, int]) -> dict[str, list]:
    """What each column should show, in order: (label, name, badge, score text)."""

    def row(item: dict[str, Any]) -> tuple[str, str, str, str]:
        tool = item["type"] == "tool"
        label = f"{item['server']}." if tool else f"{priorities[item['name']]:03d}"
        score = item["similarity_score"]
        badge = item["include_mode"].capitalize()
        text = f"{score:.2f}" if item["include_mode"] == "agent" and score is not None else ""
        return (label, item["name"], badge, text)

    rules = sorted(
        (i for i in items if i["type"] == "rule"), key=lambda i: (-priorities[i["name"]], i["name"])
    )
    refs = sorted(
        (i for i in items if i["type"] == "reference"),
        key=lambda i: (-priorities[i["name"]], i["name"]),
    )
    tools = sorted(
        (i for i in items if i["type"] == "tool"), key=lambda i: (i["server"], i["name"])
    )
    return {
        "rules": [row(i) for i in rules],
        "references": [row(i) for i in refs],
        "tools": [row(i) for i in tools],
    }


PRIORITIES = {
    "house-style": 20,
    "alpha-rule": 20,
    "commit-messages": 7,
    "sql-safety": 5,
    "deploy-guide": 0,
}
DESCRIPTIONS = {
    "house-style": "How to write answers",
    "alpha-rule": "Another always rule",
    "commit-messages": "Git commit messages",
    "sql-safety": "Database queries and SQL",
    "deploy-guide": "How to deploy the service",
    "deploy_service": "Echo as deploy_service",
    "query_database": "Echo as query_database",
    "grow": "Add a tool named ``name`` and announce the change.",
}
