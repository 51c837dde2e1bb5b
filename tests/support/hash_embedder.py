"""A deterministic bag-of-words embedder for tests: no model, no network."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence

import numpy as np

from contextcore.embedding import ModelStatus, Vectors
from contextcore.errors import ModelError

__all__ = ["HashEmbedder"]


def _normalise(vectors: Vectors) -> Vectors:
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return np.ascontiguousarray(vectors / norms, dtype=np.float32)


_TOKEN = re.compile(r"[a-z0-9]+")


class HashEmbedder:
    """A deterministic bag-of-words embedder for unit tests: no model, no network.

    Each lowercase word is hashed into one of ``dim`` signed buckets, so texts sharing words
    have a positive cosine similarity and identical texts have similarity 1.
    """

    def __init__(self, dim: int = 64, *, fail: bool = False) -> None:
        self.dim = dim
        self.fail = fail
        self.calls: list[int] = []

    @property
    def model_name(self) -> str:
        return f"hash-{self.dim}"

    def status(self) -> ModelStatus:
        if self.fail:
            return ModelStatus(self.model_name, "unavailable", False, "fake failure")
        return ModelStatus(self.model_name, "fake", True)

    def load(self) -> None:
        if self.fail:
            raise ModelError("fake embedder configured to fail")

    def embed(self, texts: Sequence[str]) -> Vectors:
        if self.fail:
            raise ModelError("fake embedder configured to fail")
        self.calls.append(len(texts))
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            for word in _TOKEN.findall(text.lower()):
                digest = hashlib.blake2b(word.encode(), digest_size=8).digest()
                bucket = int.from_bytes(digest[:4], "little") % self.dim
                out[row, bucket] += 1.0 if digest[4] & 1 else -1.0
        return _normalise(out)
