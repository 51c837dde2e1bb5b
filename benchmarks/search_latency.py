"""Search latency over 100 / 1,000 / 10,000 / 100,000 indexed chunks, query embedding
excluded, against a bare numpy matrix product + argpartition on the same data in the same run.

    .venv/bin/python benchmarks/search_latency.py [--queries 200] [--sizes 100,1000,10000,100000]

Target: p50 at 10,000 chunks <= 2 ms and <= 3x the bare baseline. Vectors are random unit
vectors of the model's 384 dimensions (the cost of search does not depend on their values);
texts are drawn from the mcp-registry catalog's vocabulary so BM25 postings are realistic.
"""

from __future__ import annotations

import argparse
import random
import time
from collections.abc import Sequence

import numpy as np
from _common import SHARED, median, percentile

from contextcore.catalog import Catalog
from contextcore.embedding import ModelStatus, Vectors
from contextcore.items import Tool
from contextcore.loaders import load_catalog_json
from contextcore.search import SearchEngine

DIM = 384


class RandomEmbedder:
    """Unit vectors seeded by the text, so runs are repeatable."""

    model_name = "random-384"

    def status(self) -> ModelStatus:
        return ModelStatus(self.model_name, "fake", True)

    def load(self) -> None:
        pass

    def embed(self, texts: Sequence[str]) -> Vectors:
        out = np.empty((len(texts), DIM), dtype=np.float32)
        for i, text in enumerate(texts):
            rng = np.random.default_rng(abs(hash(text)) % (2**32))
            row = rng.standard_normal(DIM).astype(np.float32)
            out[i] = row / np.linalg.norm(row)
        return out


def synthetic_tools(count: int, vocabulary: list[str], rng: random.Random) -> list[Tool]:
    return [
        Tool(f"s{i % 50}", f"tool_{i}", " ".join(rng.choices(vocabulary, k=rng.randint(8, 30))))
        for i in range(count)
    ]


def measure(size: int, queries: list[str], vocabulary: list[str]) -> dict[str, float]:
    rng = random.Random(size)
    engine = SearchEngine(Catalog(synthetic_tools(size, vocabulary, rng)), RandomEmbedder())
    engine.index()
    layout = engine._index.layout()
    matrix = layout.matrix
    assert matrix is not None and matrix.shape[0] == size
    vectors = RandomEmbedder().embed(queries)
    ours: list[float] = []
    bare: list[float] = []
    for text, vec in zip(queries, vectors, strict=True):
        start = time.perf_counter()
        scores = matrix @ vec
        np.argpartition(-scores, 19)[:20]
        bare.append(time.perf_counter() - start)
        start = time.perf_counter()
        engine.search(text, query_vector=vec, top_k=20, top_n=5)
        ours.append(time.perf_counter() - start)
    return {
        "p50": median(ours) * 1000,
        "p95": percentile(ours, 95) * 1000,
        "bare_p50": median(bare) * 1000,
        "ratio": median(ours) / median(bare),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--sizes", default="100,1000,10000,100000")
    args = parser.parse_args()
    registry = load_catalog_json(SHARED / "mcp-registry" / "catalog.json")
    vocabulary = sorted({w for t in registry for w in t.description.split() if w.isalpha()})
    rng = random.Random(0)
    queries = [" ".join(rng.choices(vocabulary, k=rng.randint(5, 15))) for _ in range(args.queries)]
    print(f"{'chunks':>8} {'p50 ms':>8} {'p95 ms':>8} {'bare p50 ms':>12} {'ratio':>6}")
    for size in (int(s) for s in args.sizes.split(",")):
        m = measure(size, queries, vocabulary)
        print(
            f"{size:>8} {m['p50']:>8.3f} {m['p95']:>8.3f} {m['bare_p50']:>12.3f} {m['ratio']:>6.2f}"
        )
    print("targets at 10,000 chunks: p50 <= 2 ms, ratio <= 3")


if __name__ == "__main__":
    main()
