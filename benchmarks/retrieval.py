"""Retrieval quality on the development sets, in every search mode, with the serving code.

    .venv/bin/python benchmarks/retrieval.py [--sets metatool/queries-single.jsonl,...]

Prints nDCG@10 / Recall@5 / Comp@10 / MRR per set and mode (the same figures as
``context-broker eval --catalog ... --queries ... --mode MODE``).
"""

from __future__ import annotations

import argparse

from _common import SHARED

from contextcore.catalog import Catalog
from contextcore.loaders import load_catalog_json
from contextcore.search import SearchEngine
from contextcore.services.evaluation import evaluate, load_queries
from server.embedding import build_embedder
from server.settings import AppConfig

SETS = "metatool/queries-single.jsonl,metatool/queries-multi.jsonl"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sets", default=SETS)
    args = parser.parse_args()
    embedder = build_embedder(AppConfig())
    print(f"{'set':<30} {'mode':<8} {'nDCG@10':>8} {'R@5':>6} {'Comp@10':>8} {'MRR':>6}")
    for name in args.sets.split(","):
        path = SHARED / name
        engine = SearchEngine(Catalog(load_catalog_json(path.parent / "catalog.json")), embedder)
        queries = load_queries(path)
        for mode in ("lexical", "dense", "hybrid"):
            m = evaluate(engine, queries, ks=(5, 10), mode=mode).metrics
            print(
                f"{name:<30} {mode:<8} {m['ndcg@10'] * 100:>8.1f} {m['recall@5'] * 100:>6.1f} "
                f"{m['comp@10'] * 100:>8.1f} {m['mrr'] * 100:>6.1f}",
                flush=True,
            )


if __name__ == "__main__":
    main()
