"""What training and measuring the query adapter share: the pairs, embeddings with the broker's
own embedder (cached on disk by text), and nDCG@10 of a dense ranking over a tool pool."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt
from context_broker.server.embedding import FastEmbedEmbedder, resolve_model_dir
from context_broker.server.settings import AppConfig

from contextcore.chunking import chunk_text
from contextcore.metrics import ndcg_at

Matrix = npt.NDArray[np.float32]
DEFAULT_CACHE = Path(".cache/query-adapter-embeddings.npz")


@dataclass(frozen=True)
class Pairs:
    """Tools (id, source, text) and queries (source, text, gold tool ids) of the pair files."""

    tool_ids: list[str]
    tool_sources: list[str]
    tool_texts: list[str]
    query_sources: list[str]
    query_texts: list[str]
    query_gold: list[frozenset[str]]


def load_pairs(folder: Path) -> Pairs:
    """Read ``tools.jsonl`` and ``queries.jsonl`` written by ``pairs.py``."""
    tools = [json.loads(x) for x in (folder / "tools.jsonl").read_text().splitlines()]
    queries = [json.loads(x) for x in (folder / "queries.jsonl").read_text().splitlines()]
    return Pairs(
        [t["id"] for t in tools],
        [t["source"] for t in tools],
        [t["text"] for t in tools],
        [q["source"] for q in queries],
        [q["query"] for q in queries],
        [frozenset(q["tools"]) for q in queries],
    )


def tool_chunks(tool_id: str, text: str) -> list[str]:
    """The chunks the broker indexes for a pair file's tool (as ``item_chunks``: chunks after
    the first carry the tool's name)."""
    name = tool_id.split(":", 1)[-1].split("#", 1)[0]
    chunks = chunk_text(text) or [name]
    return [chunks[0], *(f"{name}: {c}" for c in chunks[1:])]


class CachedEmbedder:
    """The broker's default model (from its prepared directory), with every vector kept in one
    ``.npz`` by text hash, so training runs and measurements embed each text once."""

    def __init__(self, cache: Path) -> None:
        self._cache = cache
        self._vectors: dict[str, Matrix] = {}
        if cache.is_file():
            with np.load(cache) as data:
                self._vectors = {k: data[k] for k in data.files}
        config = AppConfig()
        # In this process: on a busy machine the bulk child's deadline can pass mid-batch.
        self._embedder = FastEmbedEmbedder(
            config.search.model, model_dir=resolve_model_dir(config), bulk_threshold=None
        )

    def embed(self, texts: Sequence[str]) -> Matrix:
        """Rows L2-normalized, shape ``(len(texts), dim)``."""
        keys = [hashlib.sha1(t.encode()).hexdigest() for t in texts]
        missing = sorted(
            {k: t for k, t in zip(keys, texts, strict=True) if k not in self._vectors}.items()
        )
        for start in range(0, len(missing), 500):
            batch = missing[start : start + 500]
            vectors = self._embedder.embed([t for _, t in batch])
            self._vectors.update((k, v) for (k, _), v in zip(batch, vectors, strict=True))
            np.savez(self._cache, **self._vectors)
            print(f"  embedded {start + len(batch)}/{len(missing)} texts", flush=True)
        return np.stack([self._vectors[k] for k in keys]).astype(np.float32)


def chunk_matrix(
    embedder: CachedEmbedder, chunks: Sequence[Sequence[str]]
) -> tuple[Matrix, npt.NDArray[np.int64]]:
    """Every tool's chunk vectors (``chunks``: each tool's chunk texts), and for each chunk
    the index of its tool."""
    owner = np.array([n for n, cs in enumerate(chunks) for _ in cs], dtype=np.int64)
    return embedder.embed([c for cs in chunks for c in cs]), owner


def mean_ndcg(
    queries: Matrix,
    gold: Sequence[frozenset[str]],
    chunks: Matrix,
    owner: npt.NDArray[np.int64],
    ids: Sequence[str],
) -> float:
    """Mean nDCG@10 of ranking the tools by their best chunk's cosine with each query."""
    # A tool's chunks are contiguous (chunk_matrix lists them tool by tool).
    starts = np.flatnonzero(np.r_[True, owner[1:] != owner[:-1]])
    best = np.maximum.reduceat(queries @ chunks.T, starts, axis=1)
    k = min(10, best.shape[1])
    top = np.argpartition(-best, k - 1, axis=1)[:, :k]
    top = np.take_along_axis(top, np.argsort(-np.take_along_axis(best, top, 1), 1), 1)
    scores = [ndcg_at([ids[j] for j in row], set(g), 10) for row, g in zip(top, gold, strict=True)]
    return float(np.mean(scores))
