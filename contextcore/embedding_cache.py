"""A persistent cache of chunk embeddings keyed by (model, text hash).

A restart re-embeds nothing whose text is unchanged: the index asks the cache first and
embeds only the misses, in one batch. A cache file found corrupt (not SQLite, or damaged) is
deleted and rebuilt, with a warning naming it: it only ever holds what can be recomputed.
"""

from __future__ import annotations

import hashlib
import logging
import sqlite3
import threading
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Protocol

import numpy as np

from .embedding import Embedder, Vectors, embed_by_length
from .errors import ContextCoreError
from .store_roles import EmbeddingRecords

__all__ = [
    "EmbeddingCache",
    "MemoryEmbeddingCache",
    "SqliteEmbeddingCache",
    "StoreEmbeddingCache",
    "embed_cached",
    "text_hash",
]

log = logging.getLogger(__name__)

_CORRUPT = ("SQLITE_NOTADB", "SQLITE_CORRUPT")


def text_hash(text: str) -> str:
    """The cache key of a chunk text."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def embed_cached(
    cache: EmbeddingCache, embedder: Embedder, texts: Mapping[str, str]
) -> tuple[dict[str, Vectors], int]:
    """The vector of every text of ``texts`` (by its :func:`text_hash`), read from ``cache``
    first; the misses are embedded in one batch, shortest first (similar lengths batched
    together: less padding, fewer tokens through the model), and put in the cache. Also
    returns how many were embedded."""
    model = embedder.model_name
    known = cache.get_many(model, list(texts)) if texts else {}
    todo = [h for h in texts if h not in known]
    if todo:
        fresh = embed_by_length(embedder, [texts[h] for h in todo])
        new = {h: fresh[i] for i, h in enumerate(todo)}
        cache.put_many(model, new)
        known.update(new)
    return known, len(todo)


class EmbeddingCache(Protocol):
    """Stores one vector per (model, text hash)."""

    def get_many(self, model: str, hashes: Iterable[str]) -> dict[str, Vectors]: ...

    def put_many(self, model: str, vectors: Mapping[str, Vectors]) -> None: ...


class MemoryEmbeddingCache:
    """An in-process cache (the default when no cache file is configured)."""

    def __init__(self) -> None:
        self._rows: dict[tuple[str, str], Vectors] = {}

    def get_many(self, model: str, hashes: Iterable[str]) -> dict[str, Vectors]:
        out: dict[str, Vectors] = {}
        for h in hashes:
            vec = self._rows.get((model, h))
            if vec is not None:
                out[h] = vec
        return out

    def put_many(self, model: str, vectors: Mapping[str, Vectors]) -> None:
        for h, vec in vectors.items():
            self._rows[(model, h)] = vec


class StoreEmbeddingCache:
    """The cache kept in a shared session store (PostgreSQL, Redis): what one replica embedded,
    every other replica reads instead of embedding it again. A store that cannot be reached
    costs re-embedding, never a search (logged)."""

    def __init__(self, store: EmbeddingRecords) -> None:
        self._store = store

    def get_many(self, model: str, hashes: Iterable[str]) -> dict[str, Vectors]:
        try:
            found = self._store.get_embeddings(model, list(hashes))
        except ContextCoreError as exc:
            log.warning("shared embedding cache unavailable, embedding again: %s", exc)
            return {}
        return {h: np.frombuffer(blob, dtype=np.float32) for h, blob in found.items()}

    def put_many(self, model: str, vectors: Mapping[str, Vectors]) -> None:
        blobs = {h: np.asarray(v, dtype=np.float32).tobytes() for h, v in vectors.items()}
        try:
            self._store.put_embeddings(model, blobs)
        except ContextCoreError as exc:
            log.warning("shared embedding cache unavailable, vectors not shared: %s", exc)


class SqliteEmbeddingCache:
    """A cache in one SQLite file; vectors are stored as raw float32 bytes."""

    _BATCH = 500

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self._path = path
        self._lock = threading.Lock()
        try:
            self._db = _open(path)
        except sqlite3.DatabaseError as exc:
            if not _is_corrupt(exc):
                raise
            self._db = self._rebuild(exc)

    def _rebuild(self, exc: sqlite3.DatabaseError) -> sqlite3.Connection:
        log.warning(
            "embedding cache %s is unusable (%s); deleting and rebuilding it, so chunks are "
            "embedded again as searches need them",
            self._path,
            exc,
        )
        for suffix in ("", "-wal", "-shm", "-journal"):
            self._path.with_name(self._path.name + suffix).unlink(missing_ok=True)
        return _open(self._path)

    def _recover(self, exc: sqlite3.DatabaseError) -> None:
        """Replace a connection whose file turned out damaged (lock held)."""
        if not _is_corrupt(exc):
            raise exc
        self._db.close()
        self._db = self._rebuild(exc)

    def get_many(self, model: str, hashes: Iterable[str]) -> dict[str, Vectors]:
        with self._lock:
            try:
                return self._get_many(model, hashes)
            except sqlite3.DatabaseError as exc:
                self._recover(exc)
                return {}

    def put_many(self, model: str, vectors: Mapping[str, Vectors]) -> None:
        with self._lock:
            try:
                self._put_many(model, vectors)
            except sqlite3.DatabaseError as exc:
                self._recover(exc)
                self._put_many(model, vectors)

    def _get_many(self, model: str, hashes: Iterable[str]) -> dict[str, Vectors]:
        wanted = list(dict.fromkeys(hashes))
        out: dict[str, Vectors] = {}
        for start in range(0, len(wanted), self._BATCH):
            part = wanted[start : start + self._BATCH]
            marks = ",".join("?" * len(part))
            rows = self._db.execute(
                f"SELECT hash, vector FROM embeddings WHERE model = ? AND hash IN ({marks})",
                [model, *part],
            )
            for h, blob in rows:
                out[h] = np.frombuffer(blob, dtype=np.float32)
        return out

    def _put_many(self, model: str, vectors: Mapping[str, Vectors]) -> None:
        items = list(vectors.items())
        for start in range(0, len(items), self._BATCH):  # bounded memory for big batches
            rows = [
                (model, h, np.asarray(v, dtype=np.float32).tobytes())
                for h, v in items[start : start + self._BATCH]
            ]
            self._db.executemany(
                "INSERT OR REPLACE INTO embeddings (model, hash, vector) VALUES (?, ?, ?)",
                rows,
            )
        self._db.commit()

    def close(self) -> None:
        with self._lock:
            self._db.close()


def _is_corrupt(exc: sqlite3.DatabaseError) -> bool:
    """Damage, not a busy or locked file (those must never cost the cache)."""
    name = getattr(exc, "sqlite_errorname", None)
    return name in _CORRUPT if name else type(exc) is sqlite3.DatabaseError


def _open(path: Path) -> sqlite3.Connection:
    db = sqlite3.connect(str(path), check_same_thread=False)
    try:
        db.execute("PRAGMA journal_mode=WAL")
        db.execute(
            "CREATE TABLE IF NOT EXISTS embeddings ("
            "model TEXT NOT NULL, hash TEXT NOT NULL, vector BLOB NOT NULL, "
            "PRIMARY KEY (model, hash))"
        )
        db.commit()
    except sqlite3.DatabaseError:
        db.close()
        raise
    return db
