"""A real ``context-broker serve`` over stdio in front of real downstream servers (the
records server of ``fixtures/records_server.py`` and ``mcp-server-time``), for code mode."""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
from mcp import Client, StdioServerParameters

BIN = Path(sys.executable).parent
RECORDS = Path(__file__).parent / "fixtures" / "records_server.py"

THREE_STEPS = """
orders = (await records__list_orders(country="NO"))["orders"]
biggest = max(orders, key=lambda o: o["amount"])
order = await records__get_order(order_id=biggest["order_id"])
now = await time__get_current_time(timezone="Europe/Oslo")
print(f"{len(orders)} Norwegian orders")
{"order_id": order["order_id"], "customer": order["customer"],
 "amount": order["amount"], "oslo": now["datetime"]}
"""


def write_config(
    folder: Path, *, backend: str = "memory", code: str = "", extra: str = "", records: str = ""
) -> Path:
    """A broker config with the records server (its calls logged to ``calls.jsonl``) and
    the time server; ``code``: lines of the ``[code]`` table; ``records``: lines of the
    records server's table."""
    store = 'backend = "sqlite"\npath = "sessions.sqlite3"' if backend == "sqlite" else ""
    path = folder / "broker.toml"
    path.write_text(
        f"""
[search]
semantic = false

[persistence]
{store or 'backend = "memory"'}

[code]
{code}

[servers.records]
command = {json.dumps(sys.executable)}
args = [{json.dumps(str(RECORDS))}]
env = {{ RECORDS_CALL_LOG = {json.dumps(str(folder / "calls.jsonl"))} }}
{records}

[servers.time]
command = {json.dumps(str(BIN / "mcp-server-time"))}
{extra}
""",
        encoding="utf-8",
    )
    return path


def downstream_calls(folder: Path) -> list[dict[str, Any]]:
    """The calls the records server received, in order."""
    log = folder / "calls.jsonl"
    if not log.exists():
        return []
    return [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines()]


@asynccontextmanager
async def serving(config: Path, *args: str) -> AsyncIterator[Client]:
    """A host connected to ``context-broker serve`` over stdio (handshake era)."""
    params = StdioServerParameters(
        command=str(BIN / "context-broker"), args=["serve", "--config", str(config), *args]
    )
    with anyio.fail_after(120):
        async with Client(params, mode="legacy") as client:
            yield client


def text_of(result: Any) -> str:
    return "".join(getattr(block, "text", "") for block in result.content)


async def run(client: Client, code: str, **arguments: Any) -> tuple[bool, str]:
    """``(is_error, text)`` of a ``run_code`` call."""
    with anyio.fail_after(60):
        result = await client.call_tool("run_code", {"code": code, **arguments})
    return bool(result.is_error), text_of(result)


def answer_of(text: str) -> Any:
    """The JSON answer of a run's text: the line before the ``[session_id ...]`` footer."""
    lines = text.rstrip().splitlines()
    assert lines[-1].startswith("[session_id "), text
    return json.loads(lines[-2])
