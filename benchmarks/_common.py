"""Helpers shared by the benchmark scripts (run them from the repository root)."""

from __future__ import annotations

import os

# The broker runs numpy's BLAS single-threaded (see server/cli.py); measure it the same way.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" / "benchmarks"
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


def timed(fn: Callable[[], object]) -> float:
    """Seconds one call of ``fn`` takes."""
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def percentile(values: list[float], q: float) -> float:
    """The q-th percentile (0-100) of ``values``."""
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))
    return ordered[index]


def median(values: list[float]) -> float:
    return statistics.median(values)


class CachedEmbedder:
    """An embedder with every text it embeds kept in an embedding cache keyed by (model,
    text hash), the product's own (in memory by default; a ``SqliteEmbeddingCache`` keeps it
    between runs): a benchmark embeds each query once, and the vectors stay the model's own.
    ``warm`` embeds many texts ahead in batches under the child-process threshold."""

    def __init__(self, inner: Any, cache: Any = None) -> None:
        from contextcore.embedding_cache import MemoryEmbeddingCache

        self.inner = inner
        self.cache = cache if cache is not None else MemoryEmbeddingCache()

    @property
    def model_name(self) -> str:
        return str(self.inner.model_name)

    def load(self) -> None:
        self.inner.load()

    def status(self) -> Any:
        return self.inner.status()

    def warm(self, texts: Sequence[str], batch: int = 200) -> None:
        todo = list(dict.fromkeys(texts))
        for start in range(0, len(todo), batch):
            self.embed(todo[start : start + batch])

    def embed(self, texts: Sequence[str]) -> Any:
        import numpy as np

        from contextcore.embedding_cache import text_hash

        if not texts:
            return self.inner.embed(texts)
        hashes = [text_hash(t) for t in texts]
        known = self.cache.get_many(self.model_name, set(hashes))
        todo = {h: t for h, t in zip(hashes, texts, strict=True) if h not in known}
        if todo:
            fresh = dict(zip(todo, self.inner.embed(list(todo.values())), strict=True))
            self.cache.put_many(self.model_name, fresh)
            known.update(fresh)
        return np.stack([known[h] for h in hashes]).astype(np.float32)
