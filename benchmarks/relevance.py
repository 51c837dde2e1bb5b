"""How the relevance floors of the search presets are calibrated, re-measurable.

    .venv/bin/python benchmarks/relevance.py [--quick]

(a) MetaTool (queries-single, queries-multi): recall@5 and nDCG@10 of the hybrid ranking with
    no floor, then with each preset's tool floor (``min_score_tools``) applied to the hits. A
    floor compares as the search does (``SearchHit.clears``: the fused score, and the cosine
    for 0.6 of the floor) and hits come best first, so
    it only cuts the tail of the top 5. Target: at "normal" recall@5 drops by at most 1 point.
(b) The example agent (config.example.toml's rules and references) plus the tools of the five
    reference servers (time, git, everything, filesystem, memory), every tool searched as an
    ``agent`` item: for each preset, how many agent items ``ContextBroker.build_request_context``
    selects for clearly off-topic messages (target: none at "normal") and for the on-topic
    messages of examples/queries.jsonl, and whether their expected item is among them.

Needs the prepared model (context-broker setup-model) and scripts/setup-downstream.sh.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import anyio
from _common import ROOT, SHARED
from context_broker.server.embedding import build_embedder
from context_broker.server.gateway import Gateway
from context_broker.server.settings import AppConfig, load_config
from gateway_proxy import _five_servers

from contextcore.catalog import Catalog
from contextcore.embedding import Embedder
from contextcore.factory import load_items
from contextcore.items import ContextItem, ItemRef, Tool
from contextcore.loaders import load_catalog_json
from contextcore.metrics import ndcg_at, recall_at
from contextcore.presets import PRESET_NAMES, PRESETS
from contextcore.query_adapter import load_query_adapter
from contextcore.search import SearchEngine, SearchHit
from contextcore.services.broker import ContextBroker
from contextcore.services.evaluation import EvalQuery, load_queries

SETS = ("metatool/queries-single.jsonl", "metatool/queries-multi.jsonl")
EXAMPLE_CONFIG = ROOT / "config.example.toml"
EXAMPLE_QUERIES = ROOT / "examples" / "queries.jsonl"
OFF_TOPIC = (
    "xyzzy plugh",
    "tell me a joke about penguins",
    "hello",
    "thanks, that's all",
    "lorem ipsum dolor sit amet",
    "asdf qwerty",
    "what is the meaning of life?",
)
MAX_RECALL_DROP = 1.0  # points of recall@5 the "normal" floor may cost


# -- the five reference servers ----------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class FiveServers:
    """The reference servers' tools as agent items, their exposed names and their listing."""

    tools: list[Tool]
    names: dict[ItemRef, str]
    listing: list[dict[str, Any]]


async def _gather_five() -> FiveServers:
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        path = folder / "five.toml"
        path.write_text("[search]\nsemantic = false\n" + _five_servers(folder), encoding="utf-8")
        catalog = Catalog()
        async with Gateway.from_config(load_config(path), catalog) as gateway:
            with anyio.fail_after(120):
                still = await gateway.wait_ready()
            if still:
                raise SystemExit(f"servers did not start: {still}; run scripts/setup-downstream.sh")
            exposed = gateway.tools()
            tools = [
                dataclasses.replace(t, server_include="agent")
                for t in catalog.items(["tool"])
                if isinstance(t, Tool)
            ]
    names = {ItemRef("tool", t.tool, t.server): t.name for t in exposed}
    listing = [_listed(t.as_mcp_tool().model_dump(by_alias=True, mode="json")) for t in exposed]
    return FiveServers(tools, names, listing)


def _listed(tool: dict[str, Any]) -> dict[str, Any]:
    """What a host lists of a tool for its model: name, description and input schema."""
    return {k: tool[k] for k in ("name", "description", "inputSchema") if tool.get(k) is not None}


def five_servers() -> FiveServers:
    """Start the five reference servers through the gateway and take their tools."""
    return anyio.run(_gather_five)


class NamedTools:
    """A tool directory like the server's: ``<server>__<tool>`` names, nothing listed."""

    def __init__(self, names: dict[ItemRef, str]) -> None:
        self._names = names

    def exposed_name(self, ref: ItemRef) -> str | None:
        return self._names.get(ref)

    def listed(self, ref: ItemRef) -> bool:
        return False


def example_agent(tools: Sequence[Tool], embedder: Embedder | None) -> ContextBroker:
    """A broker over the example config's rules and references plus ``tools``."""
    items: list[ContextItem] = [*load_items(load_config(EXAMPLE_CONFIG)), *tools]
    catalog = Catalog(items)
    return ContextBroker(catalog, SearchEngine(catalog, embedder, adapter=load_query_adapter()))


def agent_keys(broker: ContextBroker, message: str, **kwargs: Any) -> list[tuple[str, float]]:
    """The agent items one request context selects, with their scores."""
    sid = broker.create_session().session_id
    context = broker.build_request_context(sid, message, **kwargs)
    return [
        (row.ref.key, row.similarity_score or 0.0)
        for row in context.items
        if row.include_mode == "agent"
    ]


# -- (a) MetaTool ------------------------------------------------------------------------


def ranked(engine: SearchEngine, queries: Sequence[EvalQuery]) -> list[list[SearchHit]]:
    """Each query's top 10 with fused scores, ranked as ``context-broker eval`` ranks."""
    vectors = engine.embed_queries([q.query for q in queries])
    chunks = max(engine.index().chunks, 1)
    out = []
    for i, q in enumerate(queries):
        result = engine.search(
            q.query,
            top_n=10,
            top_k=chunks,
            apply_include_score=False,
            query_vector=vectors[i] if vectors is not None else None,
        )
        out.append(list(result.hits))
    return out


def scores_at(
    queries: Sequence[EvalQuery], hits: Sequence[list[SearchHit]], floor: float
) -> tuple[float, float]:
    """Mean recall@5 and nDCG@10 (in points) with hits below ``floor`` dropped."""
    recall = ndcg = 0.0
    for q, row in zip(queries, hits, strict=True):
        keys = [h.ref.key for h in row if h.clears(floor)]
        recall += recall_at(keys, set(q.gold), 5)
        ndcg += ndcg_at(keys, set(q.gold), 10)
    return recall / len(queries) * 100, ndcg / len(queries) * 100


def metatool(embedder: Embedder | None, limit: int | None) -> bool:
    print("(a) MetaTool, hybrid ranking: recall@5 / nDCG@10 without and with the tool floor")
    head = "".join(f"{f'{p} ({PRESETS[p].min_score_tools:.2f})':>22}" for p in PRESET_NAMES)
    print(f"{'set':<14}{'queries':>8}{'no floor':>16}{head}   drop@normal")
    catalog = Catalog(load_catalog_json(SHARED / "metatool" / "catalog.json"))
    engine = SearchEngine(catalog, embedder, adapter=load_query_adapter())
    ok = True
    for name in SETS:
        queries = load_queries(SHARED / name)[:limit]
        hits = ranked(engine, queries)
        base = scores_at(queries, hits, 0.0)
        cells = {p: scores_at(queries, hits, PRESETS[p].min_score_tools) for p in PRESET_NAMES}
        drop = base[0] - cells["normal"][0]
        ok = ok and drop <= MAX_RECALL_DROP
        row = "".join(f"{f'{r:.1f} / {n:.1f}':>22}" for r, n in cells.values())
        label = Path(name).stem.removeprefix("queries-")
        first = f"{base[0]:.1f} / {base[1]:.1f}"
        print(f"{label:<14}{len(queries):>8}{first:>16}{row}   {drop:.1f}")
    verdict = "PASS" if ok else "FAIL"
    print(f"recall@5 drop at normal <= {MAX_RECALL_DROP:.0f} point on every set: {verdict}\n")
    return ok


# -- (b) the example agent ---------------------------------------------------------------


def _cell(selected: list[tuple[str, float]], gold: frozenset[str] | None) -> str:
    if gold is None:
        return str(len(selected))
    hit = "yes" if gold & {key for key, _ in selected} else "no"
    return f"{len(selected)} {hit}"


def example(embedder: Embedder | None, tools: Sequence[Tool]) -> bool:
    broker = example_agent(tools, embedder)
    agents = sum(1 for i in broker.catalog.enabled() if i.effective_include == "agent")
    print(
        f"(b) example agent: {agents} agent items ({len(tools)} tools of the five servers); "
        "agent items selected per message (on-topic: count, expected item selected?)"
    )
    print(f"{'message':<62}{'top score':>10}" + "".join(f"{p:>14}" for p in PRESET_NAMES))
    on_topic = load_queries(EXAMPLE_QUERIES)
    rows: list[tuple[str, frozenset[str] | None]] = [(m, None) for m in OFF_TOPIC]
    rows += [(q.query, q.gold) for q in on_topic]
    off_selected: list[str] = []
    found = dict.fromkeys(PRESET_NAMES, 0)
    for message, gold in rows:
        everything = agent_keys(broker, message, min_score=0.0, min_score_tools=0.0)
        top = max((score for _, score in everything), default=0.0)
        cells = []
        for preset in PRESET_NAMES:
            selected = agent_keys(broker, message, preset=preset)
            cells.append(_cell(selected, gold))
            if gold is None and preset == "normal":
                off_selected += [f"{key} ({score:.3f}) for {message!r}" for key, score in selected]
            if gold is not None and gold & {key for key, _ in selected}:
                found[preset] += 1
        shown = message if len(message) <= 60 else message[:57] + "..."
        print(f"{shown:<62}{top:>10.3f}" + "".join(f"{c:>14}" for c in cells))
    counts = ", ".join(f"{p} {found[p]}/{len(on_topic)}" for p in PRESET_NAMES)
    print(f"on-topic messages whose expected item is selected: {counts}")
    ok = not off_selected
    print(
        f"off-topic messages select no agent item at normal ({len(off_selected)} selected): "
        f"{'PASS' if ok else 'FAIL'}"
    )
    for line in off_selected:
        print(f"  selected at normal: {line}")
    return ok


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="the first 300 queries of each set")
    args = parser.parse_args()
    embedder = build_embedder(AppConfig())
    ok = metatool(embedder, 300 if args.quick else None)
    ok = example(embedder, five_servers().tools) and ok
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
