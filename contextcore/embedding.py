"""The embedder protocol and what it reports; the fastembed adapter lives in
``server.embedding``, a deterministic fake for tests in ``tests/support``."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

import numpy as np
import numpy.typing as npt

__all__ = [
    "Embedder",
    "ModelSource",
    "ModelStatus",
    "Vectors",
    "embed_by_length",
]

Vectors = npt.NDArray[np.float32]
ModelSource = Literal["local directory", "hub or fastembed cache", "fake", "unavailable"]


@dataclass(frozen=True)
class ModelStatus:
    """Where the model comes from and whether it loaded."""

    model: str
    source: ModelSource
    loaded: bool
    error: str | None = None


class Embedder(Protocol):
    """Turns texts into L2-normalised float32 vectors."""

    @property
    def model_name(self) -> str: ...

    def load(self) -> None:
        """Make the model ready now; raise ``ModelError`` if it cannot be loaded."""
        ...

    def embed(self, texts: Sequence[str]) -> Vectors:
        """Embed a batch of texts: shape ``(len(texts), dim)``, rows L2-normalised."""
        ...

    def status(self) -> ModelStatus: ...


def embed_by_length(embedder: Embedder, texts: Sequence[str]) -> Vectors:
    """``embedder.embed(texts)`` run shortest first (similar lengths batched together:
    less padding through the model), rows back in the order given."""
    order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
    vectors = embedder.embed([texts[i] for i in order])
    out = np.empty_like(vectors)
    out[order] = vectors
    return out
