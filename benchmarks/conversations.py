"""Conversation-aware selection: does the last turn of a conversation select its tool?

``benchmarks/conversations.jsonl`` holds 60 conversations of 2-4 turns written by hand over
the reference servers' tools (time, git, everything, filesystem, memory; their tool lists as
listed by the servers are saved in ``benchmarks/data/reference_tools.json``), a third of them
switching topic on the last turn. Each names the tools that would serve its last turn
(``gold``, any one counts) and the tool a host would have called after each earlier turn
(``called``; the script records those calls in the session's history as the gateway does
for ``call_tool``). Ids 1-30 are the part the weights were tuned on, 31-60 are held out.

Every conversation is played in two sessions of one broker built as the server builds it
(real model, config defaults): one with the conversation counting (the default), one with
``conversation=0``, which selects exactly as a fresh session would (checked on every last
turn). Reported per part: the hit rate of the last turn with and without the conversation,
switches where the conversation did worse than the message alone, and switches that carried
an earlier turn's tool over; and the cost, ``build_request_context`` with the conversation
against without it (medians over every turn after the first, the two kinds alternating).

Targets: hit rate >= 0.85 with the conversation; no switch worse than alone; cost <= 1.2x.

Run: .venv/bin/python benchmarks/conversations.py [--weight 0.5] [--turns 2] [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import secrets
import statistics
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _common  # noqa: F401  (puts the repository on sys.path, BLAS single-threaded)
from context_broker.server.embedding import build_embedder
from context_broker.server.settings import AppConfig

from contextcore.call_record import call_messages
from contextcore.catalog import Catalog
from contextcore.config import BrokerConfig
from contextcore.factory import build_search
from contextcore.items import ItemRef, Tool
from contextcore.services.broker import ContextBroker
from contextcore.sessions import RequestContext
from contextcore.store import MessageRecord

HERE = Path(__file__).resolve().parent
CONVERSATIONS = HERE / "conversations.jsonl"
TOOLS = HERE / "data" / "reference_tools.json"


def reference_catalog() -> Catalog:
    """The reference servers' tools, as the broker sees them with ``include = "agent"``."""
    listed = json.loads(TOOLS.read_text(encoding="utf-8"))
    return Catalog(
        Tool(server, t["name"], t["description"], t["input_schema"], server_include="agent")
        for server, tools in listed.items()
        for t in tools
    )


def build(config: BrokerConfig) -> ContextBroker:
    """A broker over the reference catalog built as the server builds one (no learning)."""
    catalog = reference_catalog()
    search = build_search(config, catalog, build_embedder(AppConfig()))
    search.index()
    return ContextBroker(catalog, search)


@dataclass
class Tally:
    """Hits and timings of one part of the set."""

    total: int = 0
    with_hits: int = 0
    alone_hits: int = 0
    switches: int = 0
    switch_with: int = 0
    switch_alone: int = 0
    switch_worse: list[int] = field(default_factory=list)
    carried: list[int] = field(default_factory=list)
    misses: list[str] = field(default_factory=list)


def chosen(context: RequestContext) -> set[str]:
    return {i.ref.key for i in context.items if i.include_mode == "agent"}


def record_calls(broker: ContextBroker, session_id: str, keys: list[str]) -> None:
    """Append each call and its result to the session's history, as the gateway does."""
    for key in keys:
        call_id = "call_" + secrets.token_hex(8)
        raws = call_messages(
            "openai", ItemRef.parse(f"tool:{key}").name, {}, "done", False, call_id
        )
        ids = [(call_id,), ()]  # the call names its id; the result answers it
        records = [
            MessageRecord("m_" + secrets.token_hex(8), r, i) for r, i in zip(raws, ids, strict=True)
        ]
        broker.store.append_messages(session_id, records)


def play(
    broker: ContextBroker, row: dict, tally: Tally, cost: dict[str, list[float]], calls: bool
) -> None:
    """Play one conversation in both sessions and count its last turn."""
    on, off = broker.create_session().session_id, broker.create_session().session_id
    last: dict[str, RequestContext] = {}
    for n, message in enumerate(row["turns"]):
        for name, sid, weight in (("off", off, 0.0), ("on", on, None)):
            start = time.perf_counter()
            last[name] = broker.build_request_context(sid, message, conversation=weight)
            if n:
                cost[name].append(time.perf_counter() - start)
            if calls and n < len(row["called"]):
                record_calls(broker, sid, row["called"][n])
    fresh = broker.build_request_context(broker.create_session().session_id, row["turns"][-1])
    assert chosen(fresh) == chosen(last["off"]), f"conversation 0 differs from fresh: {row['id']}"
    gold = {ItemRef.parse(f"tool:{g}").key for g in row["gold"]}
    hit_with, hit_alone = bool(gold & chosen(last["on"])), bool(gold & chosen(last["off"]))
    tally.total += 1
    tally.with_hits += hit_with
    tally.alone_hits += hit_alone
    if not hit_with:
        tally.misses.append(f"{row['id']}: {sorted(chosen(last['on']))}")
    if row["kind"] == "switch":
        tally.switches += 1
        tally.switch_with += hit_with
        tally.switch_alone += hit_alone
        if hit_alone and not hit_with:
            tally.switch_worse.append(row["id"])
        if any(i.via == "conversation" for i in last["on"].items):
            tally.carried.append(row["id"])


def report(name: str, t: Tally, show: bool) -> None:
    print(
        f"{name:5} {t.total:3} conversations: last-turn hit rate {t.with_hits / t.total:.3f} "
        f"with the conversation, {t.alone_hits / t.total:.3f} alone; switches "
        f"{t.switch_with}/{t.switches} with, {t.switch_alone}/{t.switches} alone, worse than "
        f"alone: {t.switch_worse or 'none'}, an earlier tool carried over: "
        f"{t.carried or 'none'}"
    )
    if show and t.misses:
        print("      missed: " + "; ".join(t.misses))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--weight", type=float, default=None, help="search.conversation_weight")
    parser.add_argument("--turns", type=int, default=None, help="search.conversation_turns")
    parser.add_argument("--rounds", type=int, default=3, help="passes for the cost figures")
    parser.add_argument("--show", action="store_true", help="list the missed conversations")
    parser.add_argument("--no-calls", action="store_true", help="record no calls between turns")
    args = parser.parse_args()
    search = {"conversation_weight": args.weight, "conversation_turns": args.turns}
    config = BrokerConfig.model_validate(
        {"search": {k: v for k, v in search.items() if v is not None}}
    )
    broker = build(config)
    rows = [json.loads(line) for line in CONVERSATIONS.read_text().splitlines() if line.strip()]
    cost: dict[str, list[float]] = {"on": [], "off": []}
    tallies = {"tune": Tally(), "held": Tally()}
    for row in rows:
        play(broker, row, tallies[row["split"]], cost, not args.no_calls)
    for _ in range(args.rounds - 1):  # more passes for steadier timings
        for row in rows:
            play(broker, row, Tally(), cost, not args.no_calls)
    s = config.search
    print(f"conversation_weight {s.conversation_weight}, conversation_turns {s.conversation_turns}")
    for name, tally in tallies.items():
        report(name, tally, args.show)
    both = Tally()
    for t in tallies.values():
        for key in ("total", "with_hits", "alone_hits", "switches", "switch_with", "switch_alone"):
            setattr(both, key, getattr(both, key) + getattr(t, key))
        both.switch_worse += t.switch_worse
        both.carried += t.carried
    report("all", both, False)
    on, off = statistics.median(cost["on"]), statistics.median(cost["off"])
    print(
        f"cost: build_request_context median {on * 1000:.2f} ms with the conversation, "
        f"{off * 1000:.2f} ms without ({on / off:.2f}x; {len(cost['on'])} calls each)"
    )


if __name__ == "__main__":
    main()
