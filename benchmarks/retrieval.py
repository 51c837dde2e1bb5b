"""Retrieval quality on the development sets, stage by stage, with the serving code.

    .venv/bin/python benchmarks/retrieval.py [--sets NAME,...] [--limit N]

Each stage adds one lever to the one before and is measured with ``evaluate`` exactly as the
broker serves (``mode="served"``, what ``search_context_items`` returns), except the first,
which is the plain hybrid retriever (the message alone, every chunk considered):

    hybrid      cosine + 0.15 x scaled BM25 of the message
    + parts     the message's parts: whole plus half the best part
    + feedback  pseudo-relevance feedback (query moved half-way to its best three items)
    + adapter   the learned query adapter (contextcore/data/query_adapter.npy)
    + intents   the host's plan (sets that have one): each step searched, best step counts

Sets (from ../shared/benchmarks): metatool single and multi, mcp-bench without and with the
plans a language model wrote from each request alone, and mcp-bench with the Docker MCP
registry's 755 tools added to its catalog as distractors. Prints nDCG@10, recall@5 and
recall@10 per set and stage.
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import replace

from _common import SHARED, CachedEmbedder
from context_broker.server.embedding import build_embedder
from context_broker.server.settings import AppConfig

from contextcore.catalog import Catalog
from contextcore.items import ContextItem
from contextcore.loaders import load_catalog_json
from contextcore.query_adapter import load_query_adapter
from contextcore.search import SearchEngine, SearchSettings
from contextcore.services.evaluation import EvalQuery, evaluate, load_queries

SETS = {
    "metatool-single": ("metatool/queries-single.jsonl", ()),
    "metatool-multi": ("metatool/queries-multi.jsonl", ()),
    "mcp-bench": ("mcp-bench/queries.jsonl", ()),
    "mcp-bench-plans": ("mcp-bench/queries-plans.jsonl", ()),
    "mcp-bench-plans+registry": ("mcp-bench/queries-plans.jsonl", ("mcp-registry/catalog.json",)),
}
STAGES: list[tuple[str, dict[str, object]]] = [
    ("hybrid", {}),
    ("+ parts", {"part_share": 0.5, "feedback": 0.0, "query_adapter": False}),
    ("+ feedback", {"part_share": 0.5, "feedback": 0.5, "query_adapter": False}),
    ("+ adapter", {"part_share": 0.5, "feedback": 0.5, "query_adapter": True}),
    ("+ intents", {"part_share": 0.5, "feedback": 0.5, "query_adapter": True}),
]


def _catalog(queries_file: str, distractors: tuple[str, ...]) -> list[ContextItem]:
    items = load_catalog_json((SHARED / queries_file).parent / "catalog.json")
    for extra in distractors:
        items += load_catalog_json(SHARED / extra)
    return items


def _stage(
    engine: SearchEngine, queries: list[EvalQuery], name: str, values: dict[str, object]
) -> dict[str, float] | None:
    with_plans = any(q.intents for q in queries)
    if name == "+ intents" and not with_plans:
        return None
    asked = queries if name == "+ intents" else [replace(q, intents=()) for q in queries]
    if name == "hybrid":
        return evaluate(engine, asked, ks=(5, 10), mode="hybrid").metrics
    engine.settings = replace(SearchSettings(), **values)  # type: ignore[arg-type]
    return evaluate(engine, asked, ks=(5, 10), mode="served").metrics


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sets", default=",".join(SETS))
    parser.add_argument("--limit", type=int, default=0, help="first N queries of each set")
    parser.add_argument("--json", type=str, default="", help="also write the figures here")
    args = parser.parse_args()
    embedder = CachedEmbedder(build_embedder(AppConfig()))
    adapter = load_query_adapter()
    figures: dict[str, dict[str, dict[str, float]]] = {}
    print(f"{'set':<26} {'stage':<11} {'nDCG@10':>8} {'R@5':>6} {'R@10':>6} {'s':>5}")
    for name in args.sets.split(","):
        queries_file, distractors = SETS[name]
        engine = SearchEngine(
            Catalog(_catalog(queries_file, distractors)),
            embedder,  # type: ignore[arg-type]
            adapter=adapter,
        )
        queries = load_queries(SHARED / queries_file)
        queries = queries[: args.limit] if args.limit else queries
        for stage, values in STAGES:
            started = time.monotonic()
            m = _stage(engine, queries, stage, values)
            if m is None:
                continue
            figures.setdefault(name, {})[stage] = m
            print(
                f"{name:<26} {stage:<11} {m['ndcg@10']:>8.3f} {m['recall@5']:>6.3f} "
                f"{m['recall@10']:>6.3f} {time.monotonic() - started:>5.0f}",
                flush=True,
            )
    if args.json:
        with open(args.json, "w", encoding="utf-8") as out:
            json.dump(figures, out, indent=1)


if __name__ == "__main__":
    main()
