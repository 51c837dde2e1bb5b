"""Indexing the mcp-registry catalog (755 tools): cold, against raw fastembed on the same
chunks in the same run, and a warm restart from the disk cache.

    .venv/bin/python benchmarks/indexing.py [--repeats 5]

Targets: cold / raw <= 1.15; warm / cold <= 0.10.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from _common import SHARED, median, timed
from context_broker.server.embedding import FastEmbedEmbedder, resolve_model_dir
from context_broker.server.settings import AppConfig

from contextcore.catalog import Catalog
from contextcore.chunking import item_chunks
from contextcore.embedding_cache import SqliteEmbeddingCache
from contextcore.loaders import load_catalog_json
from contextcore.search import SearchEngine


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    items = load_catalog_json(SHARED / "mcp-registry" / "catalog.json")
    chunks = [c for item in items for c in item_chunks(item)]
    config = AppConfig()
    embedder = FastEmbedEmbedder(config.search.model, model_dir=resolve_model_dir(config))
    load = timed(embedder.load)
    model = embedder._model  # the raw fastembed TextEmbedding, for the baseline
    list(model.embed(chunks[:64]))  # warm the runtime once for both sides
    raw, raw_default, cold, warm = [], [], [], []
    with tempfile.TemporaryDirectory() as tmp:
        for run in range(args.repeats):
            raw.append(timed(lambda: list(model.embed(chunks, batch_size=embedder.batch_size))))
            if run == 0:  # slow, and only for context: once
                raw_default.append(timed(lambda: list(model.embed(chunks))))
            path = Path(tmp) / f"cache-{run}.sqlite3"
            engine = SearchEngine(Catalog(items), embedder, cache=SqliteEmbeddingCache(path))
            cold.append(timed(engine.index))
            fresh = FastEmbedEmbedder(config.search.model, model_dir=resolve_model_dir(config))
            restarted = SearchEngine(Catalog(items), fresh, cache=SqliteEmbeddingCache(path))
            warm.append(timed(restarted.index))
    r, c, w = median(raw), median(cold), median(warm)
    rd = median(raw_default)
    print(f"catalog: {len(items)} tools, {len(chunks)} chunks; model load {load:.2f} s")
    print(
        f"raw fastembed   median {r:.3f} s  runs {[round(x, 3) for x in raw]}"
        f"  (batch {embedder.batch_size}, as the broker embeds)"
    )
    print(
        f"raw fastembed   median {rd:.3f} s  runs {[round(x, 3) for x in raw_default]}"
        "  (fastembed's default batch size)"
    )
    print(f"cold index      median {c:.3f} s  runs {[round(x, 3) for x in cold]}")
    print(f"warm restart    median {w:.3f} s  runs {[round(x, 3) for x in warm]}")
    print(
        f"cold / raw  = {c / r:.3f}  (target <= 1.15; against the default batch size {c / rd:.3f})"
    )
    print(f"warm / cold = {w / c:.3f}  (target <= 0.10)")


if __name__ == "__main__":
    main()
