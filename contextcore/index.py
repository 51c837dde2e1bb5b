"""The chunk index: chunks and vectors per item, laid out as one matrix for search.

Entries are keyed by item reference. An item whose searchable text changes loses its vectors;
``embed_missing`` embeds every entry that has none in one batch, asking the persistent cache
first. The matrix is rebuilt lazily after any change; chunks of one item stay contiguous so
per-item maxima are cheap.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from .chunking import item_chunks
from .embedding import Embedder, Vectors
from .embedding_cache import EmbeddingCache, embed_cached, text_hash
from .items import ContextItem, ItemRef
from .lexical import Bm25Index

__all__ = ["ChunkIndex", "IndexStats", "Layout"]

log = logging.getLogger(__name__)


@dataclass
class _Entry:
    chunks: list[str]
    hashes: list[str]
    mode: str
    vectors: Vectors | None = None


@dataclass(frozen=True)
class IndexStats:
    """What one ``embed_missing`` call did."""

    items: int
    chunks: int
    embedded: int
    from_cache: int


@dataclass
class Layout:
    """The searchable arrays: one row per chunk, owners in item order."""

    refs: list[ItemRef]
    types: npt.NDArray[np.str_]
    modes: npt.NDArray[np.str_]
    servers: npt.NDArray[np.str_]
    """Each item's server ("" for rules and references)."""
    starts: npt.NDArray[np.int64]
    owner: npt.NDArray[np.int64]
    chunks: list[str]
    matrix: Vectors | None
    lexical: Bm25Index
    position: dict[ItemRef, int] = field(default_factory=dict)


class ChunkIndex:
    """Chunks, their vectors, and the lexical index, for a changing set of items."""

    def __init__(self, cache: EmbeddingCache) -> None:
        self._cache = cache
        self._entries: dict[ItemRef, _Entry] = {}
        self._pending: set[ItemRef] = set()
        self._layout: Layout | None = None

    def __len__(self) -> int:
        return len(self._entries)

    def sync(self, items: Iterable[ContextItem]) -> None:
        """Make the index hold exactly ``items``; changed texts lose their vectors."""
        seen: set[ItemRef] = set()
        for item in items:
            ref = item.ref
            seen.add(ref)
            chunks = item_chunks(item)
            mode = item.effective_include
            entry = self._entries.get(ref)
            if entry is not None and entry.chunks == chunks:
                if entry.mode != mode:  # same text, new include mode: vectors stay
                    entry.mode = mode
                    self._layout = None
                continue
            self._entries[ref] = _Entry(chunks, [text_hash(c) for c in chunks], mode)
            self._pending.add(ref)
            self._layout = None
        for ref in [r for r in self._entries if r not in seen]:
            del self._entries[ref]
            self._pending.discard(ref)
            self._layout = None

    def missing(self) -> int:
        """How many items have no vectors yet."""
        return len(self._pending)

    def embed_missing(self, embedder: Embedder) -> IndexStats | None:
        """Embed every chunk of every entry without vectors, in one batch, cache first;
        None when nothing was missing."""
        if not self._pending:
            return None
        pending = [self._entries[r] for r in sorted(self._pending)]
        texts = {h: c for e in pending for h, c in zip(e.hashes, e.chunks, strict=True)}
        known, embedded = embed_cached(self._cache, embedder, texts)
        for entry in pending:
            entry.vectors = np.stack([known[h] for h in entry.hashes]).astype(np.float32)
        self._pending.clear()
        self._layout = None
        log.debug("embedded %d chunks (%d cached)", embedded, len(texts) - embedded)
        chunk_count = sum(len(e.chunks) for e in self._entries.values())
        return IndexStats(len(self._entries), chunk_count, embedded, len(texts) - embedded)

    def layout(self) -> Layout:
        """The arrays searched; dense rows only when every entry has vectors."""
        if self._layout is None:
            self._layout = self._build()
        return self._layout

    def _build(self) -> Layout:
        refs = sorted(self._entries)
        chunks: list[str] = []
        owner: list[int] = []
        starts: list[int] = []
        vectors: list[Vectors] = []
        complete = True
        for position, ref in enumerate(refs):
            entry = self._entries[ref]
            starts.append(len(chunks))
            chunks.extend(entry.chunks)
            owner.extend([position] * len(entry.chunks))
            if entry.vectors is None:
                complete = False
            else:
                vectors.append(entry.vectors)
        matrix = None
        if complete and vectors:
            matrix = np.ascontiguousarray(np.concatenate(vectors), dtype=np.float32)
            del vectors
            # Entries keep views into the matrix, so each vector is held once.
            for ref, start in zip(refs, starts, strict=True):
                entry = self._entries[ref]
                entry.vectors = matrix[start : start + len(entry.chunks)]
        return Layout(
            refs=refs,
            types=np.array([r.type for r in refs], dtype=np.str_),
            modes=np.array([self._entries[r].mode for r in refs], dtype=np.str_),
            servers=np.array([r.server or "" for r in refs], dtype=np.str_),
            starts=np.asarray(starts, dtype=np.int64),
            owner=np.asarray(owner, dtype=np.int64),
            chunks=chunks,
            matrix=matrix,
            lexical=Bm25Index(chunks),
            position={r: i for i, r in enumerate(refs)},
        )
