"""Code mode against tool-by-tool calls: multi-step tasks over real local servers, through
``context-broker serve`` over stdio as a host drives it.

The servers: ``tests/code_mode/fixtures/records_server.py`` (400 order records: large results)
and the reference server ``mcp-server-time``. Each task is done twice in the same run:

- tool by tool: the host's model calls each tool (``call_tool``) and reads each result's text,
  then answers from them (here: the same Python the program runs, on the results read);
- as code: the model writes one program and calls ``run_code``; it reads only the answer.

"tokens" is what reaches the model's context, counted as characters / 4: per call, the call
it writes (tool name and arguments) and the result's text; for code, the program and the
``run_code`` result. The answers of both ways must be identical (the script stops if not).

Then the cost of one tool call from code against one ``call_tool`` call over stdio, in the
same run: ``call_tool`` round trips (with a ``session_id``, recorded as code's calls are, and
without), and from code ``(run with N calls - run with none) / N``, in alternating rounds; and
the sandbox's start: a trivial program run in-process on a warm pool (checkout, load, run and
dump of its state), and the round trip of ``run_code`` with it.

    .venv/bin/python benchmarks/code_mode.py [--calls N] [--rounds R]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
from context_broker.server.host.sandbox import Sandbox
from context_broker.server.settings import CodeConfig
from mcp import Client, StdioServerParameters

from contextcore.history.tokens import chars_per_4
from contextcore.signatures import stubs

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
RECORDS = ROOT / "tests" / "code_mode" / "fixtures" / "records_server.py"

Step = tuple[str, str, dict[str, Any]]


class Task:
    """A task: the program code mode runs, and the same work as tool-by-tool steps, each
    step chosen from the results read so far."""

    def __init__(
        self,
        name: str,
        code: str,
        steps: Callable[[list[Any]], Step | None],
        answer: Callable[[list[Any]], Any],
    ) -> None:
        self.name, self.code, self.steps, self.answer = name, code, steps, answer


def _largest_norwegian(read: list[Any]) -> Step | None:
    if not read:
        return "records", "list_orders", {"country": "NO"}
    if len(read) == 1:
        biggest = max(read[0]["orders"], key=lambda o: o["amount"])
        return "records", "get_order", {"order_id": biggest["order_id"]}
    if len(read) == 2:
        return "time", "get_current_time", {"timezone": "Europe/Oslo"}
    return None


def _per_country(read: list[Any]) -> Step | None:
    return ("records", "list_orders", {}) if not read else None


def _per_country_answer(read: list[Any]) -> Any:
    orders = read[0]["orders"]
    open_by_country: dict[str, int] = {}
    for o in orders:
        if o["status"] == "open":
            open_by_country[o["country"]] = open_by_country.get(o["country"], 0) + 1
    paid = [o["amount"] for o in orders if o["status"] == "paid" and o["country"] == "DE"]
    paid_de = round(sum(paid), 2)
    return {"open": dict(sorted(open_by_country.items())), "paid_de": paid_de}


def _top_danish(read: list[Any]) -> Step | None:
    if not read:
        return "records", "list_orders", {"country": "DK"}
    top = sorted(read[0]["orders"], key=lambda o: -o["amount"])[:3]
    if len(read) <= 3:
        return "records", "get_order", {"order_id": top[len(read) - 1]["order_id"]}
    return None


def _clocks(read: list[Any]) -> Step | None:
    zones = ("Asia/Tokyo", "Europe/Oslo")
    if len(read) < 2:
        return "time", "get_current_time", {"timezone": zones[len(read)]}
    if len(read) == 2:
        args = {"source_timezone": "Europe/Oslo", "time": "09:00", "target_timezone": "Asia/Tokyo"}
        return "time", "convert_time", args
    return None


TASKS = [
    Task(
        "largest NO order + Oslo time",
        """orders = (await records__list_orders(country="NO"))["orders"]
biggest = max(orders, key=lambda o: o["amount"])
order = await records__get_order(order_id=biggest["order_id"])
now = await time__get_current_time(timezone="Europe/Oslo")
{"customer": order["customer"], "amount": order["amount"], "oslo": now["timezone"]}""",
        _largest_norwegian,
        lambda r: {
            "customer": r[1]["customer"],
            "amount": r[1]["amount"],
            "oslo": r[2]["timezone"],
        },
    ),
    Task(
        "open orders per country, paid DE total",
        """orders = (await records__list_orders())["orders"]
open_by_country = {}
for o in orders:
    if o["status"] == "open":
        open_by_country[o["country"]] = open_by_country.get(o["country"], 0) + 1
paid = [o["amount"] for o in orders if o["status"] == "paid" and o["country"] == "DE"]
{"open": dict(sorted(open_by_country.items())), "paid_de": round(sum(paid), 2)}""",
        _per_country,
        _per_country_answer,
    ),
    Task(
        "customers of the 3 largest DK orders",
        """orders = (await records__list_orders(country="DK"))["orders"]
top = sorted(orders, key=lambda o: -o["amount"])[:3]
[(await records__get_order(order_id=o["order_id"]))["customer"] for o in top]""",
        _top_danish,
        lambda r: [o["customer"] for o in r[1:]],
    ),
    Task(
        "Tokyo and Oslo clocks, 09:00 Oslo in Tokyo",
        """tokyo = await time__get_current_time(timezone="Asia/Tokyo")
oslo = await time__get_current_time(timezone="Europe/Oslo")
at = await time__convert_time(source_timezone="Europe/Oslo", time="09:00",
                              target_timezone="Asia/Tokyo")
[tokyo["timezone"], oslo["timezone"], at["target"]["datetime"][11:16]]""",
        _clocks,
        lambda r: [r[0]["timezone"], r[1]["timezone"], r[2]["target"]["datetime"][11:16]],
    ),
]


def _config(folder: Path) -> Path:
    path = folder / "broker.toml"
    path.write_text(
        f"""
[search]
semantic = false

[servers.records]
command = {json.dumps(sys.executable)}
args = [{json.dumps(str(RECORDS))}]

[servers.time]
command = {json.dumps(str(BIN / "mcp-server-time"))}
""",
        encoding="utf-8",
    )
    return path


def _text(result: Any) -> str:
    return "".join(getattr(b, "text", "") for b in result.content)


async def _tool_by_tool(client: Client, task: Task) -> tuple[int, int, Any]:
    """Tokens the model reads and writes calling each tool, the calls made, the answer."""
    read: list[Any] = []
    tokens = 0
    while (step := task.steps(read)) is not None:
        server, tool, arguments = step
        call = {"server": server, "tool": tool, "arguments": arguments}
        result = await client.call_tool("call_tool", call)
        assert not result.is_error, _text(result)
        text = _text(result)
        tokens += chars_per_4(json.dumps(call)) + chars_per_4(text)
        read.append(result.structured_content if result.structured_content else json.loads(text))
    return tokens, len(read), task.answer(read)


async def _as_code(client: Client, task: Task) -> tuple[int, Any]:
    result = await client.call_tool("run_code", {"code": task.code})
    text = _text(result)
    assert not result.is_error, text
    answer = json.loads(text.rstrip().splitlines()[-2])
    return chars_per_4(task.code) + chars_per_4(text), answer


async def _tasks(client: Client) -> None:
    print(f"{'task':44} {'calls':>5} {'tool by tool':>12} {'code':>6} {'code/tools':>10}  answers")
    totals = [0, 0]
    for task in TASKS:
        tools, calls, expected = await _tool_by_tool(client, task)
        code, answer = await _as_code(client, task)
        if answer != expected:
            raise SystemExit(f"{task.name}: different answers: {answer!r} != {expected!r}")
        totals[0] += tools
        totals[1] += code
        print(f"{task.name:44} {calls:5} {tools:12} {code:6} {code / tools:10.1%}  identical")
    print(f"{'all tasks':44} {'':5} {totals[0]:12} {totals[1]:6} {totals[1] / totals[0]:10.1%}")


async def _timed(fn: Callable[[], Any]) -> float:
    start = time.perf_counter()
    await fn()
    return time.perf_counter() - start


async def _call_cost(client: Client, calls: int, rounds: int) -> None:
    # The connection's session, as run_code's footer names it: "[session_id s_...; ...]".
    footer = _text(await client.call_tool("run_code", {"code": "0"})).rstrip().splitlines()[-1]
    sid = footer.removeprefix("[session_id ").split(";", 1)[0]
    args = {"server": "records", "tool": "get_order", "arguments": {"order_id": 1000}}
    with_sid = {**args, "session_id": sid}
    loop = f"for i in range({calls}):\n    await records__get_order(order_id=1000)"
    plain: list[float] = []
    recorded: list[float] = []
    code: list[float] = []
    for _ in range(rounds):
        for _ in range(calls):
            plain.append(await _timed(lambda: client.call_tool("call_tool", args)))
            recorded.append(await _timed(lambda: client.call_tool("call_tool", with_sid)))
        empty = await _timed(lambda: client.call_tool("run_code", {"code": "0", "session_id": sid}))
        full = await _timed(lambda: client.call_tool("run_code", {"code": loop, "session_id": sid}))
        code.append((full - empty) / calls)
    p_plain, p_rec, p_code = (statistics.median(x) * 1000 for x in (plain, recorded, code))
    print(f"\none tool call, {calls} calls x {rounds} rounds (ms, p50):")
    print(f"  call_tool over stdio, no session_id:   {p_plain:7.2f}")
    print(f"  call_tool over stdio, with session_id: {p_rec:7.2f}")
    print(f"  from code, in run_code:                {p_code:7.2f}")
    print(f"  code / call_tool with session_id:      {p_code / p_rec:7.2f}x")
    print(f"  code / call_tool without:              {p_code / p_plain:7.2f}x")


async def _sandbox_start(client: Client, runs: int) -> None:
    sandbox = Sandbox(CodeConfig())
    try:
        await sandbox.run("0", stubs([]), {})  # the pool's first worker starts
        inproc = [await _timed(lambda: sandbox.run("None", stubs([]), {})) for _ in range(runs)]
    finally:
        await sandbox.aclose()
    trip = [
        await _timed(lambda: client.call_tool("run_code", {"code": "None"})) for _ in range(runs)
    ]
    print(f"\nsandbox start, {runs} runs of a trivial program (ms):")
    print(f"  in-process (checkout, run, dump), p50: {statistics.median(inproc) * 1000:7.2f}")
    print(f"  run_code round trip over stdio, p50:   {statistics.median(trip) * 1000:7.2f}")


async def main(calls: int, rounds: int) -> None:
    with tempfile.TemporaryDirectory() as folder:
        params = StdioServerParameters(
            command=str(BIN / "context-broker"),
            args=["--log-level", "WARNING", "serve", "--config", str(_config(Path(folder)))],
        )
        async with Client(params, mode="legacy") as client:
            await client.list_tools()
            await _tasks(client)
            await _call_cost(client, calls, rounds)
            await _sandbox_start(client, 50)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=40, help="calls per round (default 40)")
    parser.add_argument("--rounds", type=int, default=5, help="rounds (default 5)")
    ns = parser.parse_args()
    anyio.run(main, ns.calls, ns.rounds)
