"""What a model pays over whole conversations, and which needed tools it is told of.

    .venv/bin/python benchmarks/conversation_bill.py [--set all|reference|example|
        mcp-bench-plans|one-server] [--split all|dev|holdout] [--limit N] [--relist]
        [--json] [--no-cache] [--no-code]
    .venv/bin/python benchmarks/conversation_bill.py --growth 3000

A host keeps every tool result in the conversation, so a request-context text is paid again
on every later turn, while a listed tool costs the same each turn (ARCHITECTURE.md, "A
conversation is the unit of cost"). This plays conversations as a desktop host does: one
connection serves every conversation; a conversation's first turn calls
``build_request_context`` without a ``session_id``, and its later turns pass back the one the
first result named. After each call, what the model pays is the host's tool list (the
broker's own ``tools/list``, plus with ``--relist`` the tools of the latest request context,
which a handshake-era host re-lists after ``tools/list_changed``) plus every text returned so
far in the conversation; the baseline is listing every catalog tool directly, on every turn.

Reported per set: the bill per turn (turn 1, 2, 3: the mean over conversations of what the
model pays on that turn divided by listing) and over whole conversations (everything paid on
every turn, summed, divided by listing times the turns), also for the two-turn conversations
alone; reach over the conversation (the share of each turn's needed tools that some text so
far names, averaged over turns and conversations: :func:`reach.named`); the median text of a
follow-up whose needed tools an earlier text of the conversation named in full; and the
median first text.

Sets: ``reference`` and ``example``, the 60 conversations of benchmarks/conversations.jsonl
(needed: the tools each earlier turn called, and for the last turn one of its gold tools) on
the reference servers' tools alone (five servers, 50 tools) and on config.example.toml with
them (its rules and references too); ``mcp-bench-plans``, the shared mcp-bench tasks played
one planned step per turn (the task, then each step of its plan as a message; reach: the
gold tools some text of the conversation named); ``one-server``, every mcp-bench tool behind
one server (257 tools), the tasks' single requests (reach of that one turn). ``--split`` keeps
conversations by the sha256 of their first message as benchmarks/reach.py does (tune on dev,
quote holdout).

``--growth N``: one conversation on the reference catalog, kept in a SQLite store, continued
for N turns (the same two follow-ups in turn); the median ``build_request_context`` time of
the last 50 turns against that of turns 11 to 60, and the median text of each: a continuing
turn reads at most the last 50 turns, so neither should grow with the conversation.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import anyio
from _common import ROOT, SHARED, CachedEmbedder
from context_broker.server.embedding import build_embedder
from context_broker.server.settings import AppConfig
from context_broker.tools.requests import BUILD_REQUEST_CONTEXT
from mcp import types
from reach import (
    CACHE,
    CONVERSATIONS,
    ExposedNames,
    Served,
    catalog_config,
    config_of,
    in_split,
    named,
    own_listing,
    serve,
)

from contextcore.context_text import estimate_tokens
from contextcore.embedding_cache import SqliteEmbeddingCache
from contextcore.items import ItemRef, Tool

PLANS = SHARED / "mcp-bench" / "queries-plans.jsonl"
ONE_SERVER = "api"


@dataclasses.dataclass(frozen=True)
class Turn:
    """One message of a conversation and the tools it needs (any one of ``needed`` when
    ``any_one``)."""

    message: str
    needed: tuple[str, ...]
    intents: tuple[str, ...] = ()
    any_one: bool = False


def reference_conversations() -> list[list[Turn]]:
    """benchmarks/conversations.jsonl as turns: each earlier turn needs the tools it called,
    the last one any of its gold tools."""
    out = []
    for line in CONVERSATIONS.read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        turns = [
            Turn(message, tuple(f"tool:{k}" for k in called))
            for message, called in zip(row["turns"][:-1], row["called"], strict=False)
        ]
        gold = tuple(f"tool:{k}" for k in row["gold"])
        turns.append(Turn(row["turns"][-1], gold, any_one=True))
        out.append(turns)
    return out


def planned_tasks(server: str | None = None) -> list[list[Turn]]:
    """The mcp-bench tasks with their plans, one planned step per turn after the task
    (``server``: every tool behind that one server, the task alone)."""
    out = []
    for line in PLANS.read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        gold = tuple(row["gold"])
        if server is not None:
            gold = tuple(f"tool:{server}/{ItemRef.parse(k).name}" for k in gold)
            out.append([Turn(row["query"], gold)])
            continue
        steps = tuple(row.get("intents") or ())
        # The task, then each step; reach is counted over the whole conversation: the gold
        # tools some text of it named by the last turn.
        turns = [Turn(row["query"], ())] + [Turn(step, ()) for step in steps]
        turns[-1] = dataclasses.replace(turns[-1], needed=gold)
        out.append(turns)
    return out


def one_server_config(folder: Path) -> AppConfig:
    """Every mcp-bench tool behind one server (names made unique), at defaults."""
    data = json.loads((SHARED / "mcp-bench" / "catalog.json").read_text(encoding="utf-8"))
    tools: dict[str, dict[str, Any]] = {}
    for spec in data["servers"].values():
        for tool in spec["tools"]:
            tools.setdefault(tool["name"], tool)
    return config_of({"servers": {ONE_SERVER: {"tools": list(tools.values())}}}, folder)


class Connection:
    """A host connection: one object for every request on it (weakly referenced)."""


class Relisting:
    """A tool directory that names as listed the tools a handshake-era host re-listed: those
    of the latest request context (what the gateway lists to that connection)."""

    def __init__(self, inner: ExposedNames) -> None:
        self.inner = inner
        self.relisted: set[ItemRef] = set()

    def exposed_name(self, ref: ItemRef) -> str | None:
        return self.inner.exposed_name(ref)

    def listed(self, ref: ItemRef) -> bool:
        return ref in self.relisted

    def python_line(self, item: Tool) -> str | None:
        return self.inner.python_line(item)


@dataclasses.dataclass
class Played:
    """One conversation's figures."""

    turns: int
    paid: list[int]  # per turn: the host's tool list plus every text so far
    listing: int
    reach: list[float]  # per turn: share of its needed tools named so far
    texts: list[int]
    repeat_texts: list[int]  # follow-ups whose needed tools were named in full before


def tool_tokens(tool: Tool, name: str) -> int:
    """What listing one tool costs: its name, description and input schema as JSON."""
    shown = {"name": name, "description": tool.description, "inputSchema": tool.input_schema}
    return estimate_tokens(json.dumps(shown, ensure_ascii=False, default=_plain))


def _plain(value: object) -> object:
    return dict(value) if hasattr(value, "items") else list(value)  # type: ignore[call-overload]


async def play(
    served: Served,
    relisting: Relisting | None,
    connection: object,
    turns: Sequence[Turn],
    own: int,
) -> Played:
    """Play one conversation on ``connection`` as a desktop host does."""
    ctx = SimpleNamespace(session=connection, meta=None)
    by_ref = {t.ref: t for t in served.tools}
    texts: list[str] = []
    paid: list[int] = []
    reach: list[float] = []
    repeat: list[int] = []
    session: str | None = None
    for turn in turns:
        args: dict[str, Any] = {"message": turn.message}
        if session is not None:
            args["session_id"] = session
        if turn.intents:
            args["intents"] = list(turn.intents)
        result = await served.runner.call(BUILD_REQUEST_CONTEXT, args, ctx)  # type: ignore[arg-type]
        text = "\n".join(c.text for c in result.content if isinstance(c, types.TextContent))
        if result.is_error:
            raise SystemExit(f"build_request_context failed for {turn.message[:80]!r}: {text}")
        out = dict(result.structured_content or {})
        session = out["session_id"]
        before = "\n\n".join(texts)
        if texts and turn.needed and all(_full(before, key) for key in turn.needed):
            repeat.append(estimate_tokens(text))
        texts.append(text)
        listed = own
        if relisting is not None:
            relisting.relisted = {
                ItemRef("tool", row["name"], row["server"])
                for row in out["items"]
                if row["type"] == "tool"
            }
            listed += sum(
                tool_tokens(by_ref[ref], served.directory.names[(ref.server, ref.name)])
                for ref in relisting.relisted
                if ref in by_ref
            )
        paid.append(listed + sum(estimate_tokens(t) for t in texts))
        so_far = "\n\n".join(texts)
        hits = [named(so_far, key) for key in turn.needed]
        if relisting is not None:
            hits = [
                h or ItemRef.parse(k) in relisting.relisted
                for h, k in zip(hits, turn.needed, strict=True)
            ]
        if turn.needed:
            reach.append(float(any(hits)) if turn.any_one else sum(hits) / len(hits))
    return Played(
        len(turns),
        paid,
        served.listing_tokens(),
        reach,
        [estimate_tokens(t) for t in texts],
        repeat,
    )


def _full(text: str, key: str) -> bool:
    """Whether ``text`` gave tool ``key`` in full: a ``### `` heading naming it."""
    ref = ItemRef.parse(key)
    return any(
        line.startswith("### ") and f"server {ref.server}, tool {ref.name})" in line
        for line in text.splitlines()
    )


@dataclasses.dataclass
class SetReport:
    name: str
    conversations: int
    turns: float
    listing: int
    per_turn: list[float]
    bill: float
    bill_two_turns: float | None
    reach: float
    reach_two_turns: float | None
    first_text: float
    repeat_text: float | None
    repeats: int


def summarize(name: str, played: Sequence[Played]) -> SetReport:
    longest = max(p.turns for p in played)
    per_turn = [
        statistics.fmean(p.paid[t] / p.listing for p in played if p.turns > t)
        for t in range(min(longest, 4))
    ]

    def bill(group: Sequence[Played]) -> float:
        return statistics.fmean(sum(p.paid) / (p.listing * p.turns) for p in group)

    def reach(group: Sequence[Played]) -> float:
        return statistics.fmean(statistics.fmean(p.reach) for p in group if p.reach)

    two = [p for p in played if p.turns == 2]
    repeats = [n for p in played for n in p.repeat_texts]
    return SetReport(
        name,
        len(played),
        statistics.fmean(p.turns for p in played),
        played[0].listing,
        per_turn,
        bill(played),
        bill(two) if two else None,
        reach(played),
        reach(two) if two else None,
        statistics.median(p.texts[0] for p in played),
        statistics.median(repeats) if repeats else None,
        len(repeats),
    )


SETS = ("reference", "example", "mcp-bench-plans", "one-server")


def conversations_of(name: str, split: str, limit: int | None) -> list[list[Turn]]:
    every = {
        "reference": reference_conversations,
        "example": reference_conversations,
        "mcp-bench-plans": planned_tasks,
        "one-server": lambda: planned_tasks(ONE_SERVER),
    }[name]()
    kept = [c for c in every if in_split(c[0].message, split)]
    return kept[:limit] if limit else kept


def run(
    names: Sequence[str],
    split: str,
    limit: int | None,
    relist: bool,
    cache: Path | None,
    code: bool = True,
) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        own = own_listing(folder, code)["tokens"]
        model = build_embedder(AppConfig())
        store = SqliteEmbeddingCache(cache) if cache is not None else None
        embedder = CachedEmbedder(model, store) if model is not None else None
        reports = []
        for name in names:
            (folder / name).mkdir()
            catalog = {"reference": "reference", "example": "example"}.get(name, "mcp-bench")
            config = (
                one_server_config(folder / name)
                if name == "one-server"
                else catalog_config(catalog, folder / name)
            )
            served = serve(config, embedder, code_mode=code)
            relisting = Relisting(served.directory) if relist else None
            if relisting is not None:
                served.runner.directory = relisting
            connection = Connection()  # one host connection for every conversation
            played = [
                anyio.run(play, served, relisting, connection, turns, own)
                for turns in conversations_of(name, split, limit)
            ]
            reports.append(summarize(name, played))
            print(f"conversation_bill: {name} done", file=sys.stderr, flush=True)
    return {
        "own_listing": own,
        "relist": relist,
        "split": split,
        "code_mode": code,
        "sets": [dataclasses.asdict(r) for r in reports],
    }


def table(result: dict[str, Any]) -> str:
    lines = [
        f"split {result['split']}; the broker's own tools/list {result['own_listing']:,} "
        f"tokens; selected tools re-listed: {'yes' if result['relist'] else 'no'}; "
        f"code mode: {'on' if result['code_mode'] else 'off'}",
        f"{'set':<16}{'conv':>5}{'turns':>6}{'list all':>9}{'turn 1':>7}{'2':>6}{'3':>6}"
        f"{'bill':>6}{'2-turn':>7}{'reach':>6}{'2-turn':>7}{'text 1':>7}{'repeat':>7}",
    ]
    for r in result["sets"]:
        turns = [f"{v:.2f}" for v in r["per_turn"][:3]] + ["-"] * (3 - len(r["per_turn"][:3]))
        two = lambda v: f"{v:.2f}" if v is not None else "-"  # noqa: E731
        repeat = f"{r['repeat_text']:.0f}" if r["repeat_text"] is not None else "-"
        lines.append(
            f"{r['name']:<16}{r['conversations']:>5}{r['turns']:>6.1f}{r['listing']:>9,}"
            f"{turns[0]:>7}{turns[1]:>6}{turns[2]:>6}{r['bill']:>6.2f}"
            f"{two(r['bill_two_turns']):>7}{r['reach']:>6.2f}{two(r['reach_two_turns']):>7}"
            f"{r['first_text']:>7.0f}{repeat:>7}"
        )
    lines.append(
        "turn N: what the model pays on turn N (tool list + every text so far) / listing "
        "every tool; bill: over whole conversations; reach: needed tools named so far; "
        "text 1: median first text (tokens); repeat: median follow-up text whose needed "
        "tools an earlier text gave in full"
    )
    return "\n".join(lines)


def growth(turns: int) -> int:
    """A conversation continued for ``turns`` turns in a SQLite store (see ``--growth``)."""
    import time

    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        config = catalog_config("reference", folder)
        store = config.persistence.model_copy(
            update={"backend": "sqlite", "path": folder / "sessions.sqlite3"}
        )
        config = config.model_copy(update={"persistence": store})
        model = build_embedder(AppConfig())
        embedder = CachedEmbedder(model, SqliteEmbeddingCache(CACHE)) if model else None
        served = serve(config, embedder)
        ctx = SimpleNamespace(session=Connection(), meta=None)

        async def play_long() -> tuple[list[float], list[int]]:
            times: list[float] = []
            sizes: list[int] = []
            args: dict[str, Any] = {"message": "What time is it in Tokyo?"}
            for n in range(turns):
                started = time.perf_counter()
                result = await served.runner.call(BUILD_REQUEST_CONTEXT, args, ctx)  # type: ignore[arg-type]
                times.append((time.perf_counter() - started) * 1000)
                assert not result.is_error, result.content
                out = dict(result.structured_content or {})
                sizes.append(out["text_tokens"])
                message = ("and in Lisbon?", "and in Oslo?")[n % 2]
                args = {"message": message, "session_id": out["session_id"]}
            return times, sizes

        times, sizes = anyio.run(play_long)
    early, late = times[10:60], times[-50:]
    e50, l50 = statistics.median(early), statistics.median(late)
    print(f"one conversation of {turns} turns, SQLite store")
    print(
        f"build_request_context p50: turns 11-60 {e50:.2f} ms, last 50 {l50:.2f} ms: "
        f"{l50 / e50:.2f}x"
    )
    print(
        f"text p50: turns 11-60 {statistics.median(sizes[10:60]):.0f} tokens, last 50 "
        f"{statistics.median(sizes[-50:]):.0f} tokens"
    )
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--set", default="all", choices=["all", *SETS], dest="which")
    parser.add_argument("--split", default="all", choices=["all", "dev", "holdout"])
    parser.add_argument("--limit", type=int, default=None)
    parser.add_argument(
        "--relist", action="store_true", help="the host re-lists each request context's tools"
    )
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--no-cache", action="store_true")
    parser.add_argument("--no-code", action="store_true", help="with [code] enabled = false")
    parser.add_argument("--growth", type=int, default=None, help="one conversation of N turns")
    args = parser.parse_args()
    if args.growth is not None:
        return growth(args.growth)
    names = list(SETS) if args.which == "all" else [args.which]
    cache = None if args.no_cache else CACHE
    result = run(names, args.split, args.limit, args.relist, cache, not args.no_code)
    print(json.dumps(result) if args.json else table(result))
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT / "benchmarks"))
    sys.exit(main())
