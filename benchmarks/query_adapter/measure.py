"""Dense nDCG@10 on the development sets with and without the query adapter.

    .venv/bin/python -m benchmarks.query_adapter.measure [--adapter FILE] [--cache FILE]

Each tool is ranked by its best chunk's cosine with the query (the broker's chunks, the
broker's embedder); the adapter maps the query vectors only. These sets were never used to
train the adapter or to choose its settings (see train.py): this is the final check.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from benchmarks._common import SHARED
from benchmarks.query_adapter._data import DEFAULT_CACHE, CachedEmbedder, chunk_matrix, mean_ndcg
from contextcore.catalog import Catalog
from contextcore.chunking import item_chunks
from contextcore.items import Tool
from contextcore.loaders import load_catalog_json
from contextcore.query_adapter import SHIPPED_ADAPTER, load_query_adapter
from contextcore.services.evaluation import load_queries

SETS = (
    "metatool/queries-single.jsonl",
    "metatool/queries-multi.jsonl",
    "mcp-bench/queries.jsonl",
)


def measure(name: str, embedder: CachedEmbedder, adapter_path: Path) -> tuple[float, float]:
    """(without, with) mean nDCG@10 of one query set against its catalog's tools."""
    path = SHARED / name
    items = Catalog(load_catalog_json(path.parent / "catalog.json")).items()
    tools = [t for t in items if isinstance(t, Tool)]
    keys = [t.ref.key for t in tools]
    chunks, owner = chunk_matrix(embedder, [item_chunks(t) for t in tools])
    queries = load_queries(path)
    vectors = embedder.embed([q.query for q in queries])
    gold = [q.gold for q in queries]
    adapter = load_query_adapter(adapter_path)
    assert adapter is not None
    plain = mean_ndcg(vectors, gold, chunks, owner, keys)
    return plain, mean_ndcg(adapter.apply(vectors), gold, chunks, owner, keys)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--adapter", type=Path, default=SHIPPED_ADAPTER)
    parser.add_argument("--cache", type=Path, default=DEFAULT_CACHE)
    args = parser.parse_args()
    args.cache.parent.mkdir(parents=True, exist_ok=True)
    embedder = CachedEmbedder(args.cache)
    print(f"{'set':<32} {'without':>8} {'with':>8} {'gain':>8}")
    for name in SETS:
        plain, mapped = measure(name, embedder, args.adapter)
        print(f"{name:<32} {plain:>8.4f} {mapped:>8.4f} {mapped - plain:>+8.4f}", flush=True)


if __name__ == "__main__":
    main()
