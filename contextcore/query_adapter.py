"""A learned linear map on query embeddings: ``q' = normalize(W q)``.

Requests are written the way people talk and tool descriptions the way documentation is, so
the nearest tool to a request's embedding is often not the one it needs. ``W`` (384 x 384, for
all-MiniLM-L6-v2) was trained contrastively on public query-tool pairs to move a query toward
the tools such queries call; tool vectors are left as they are, which measured better than
mapping both. The shipped file is ``contextcore/data/query_adapter.npy`` (float16); its training
script, sources and licences are in ``benchmarks/query_adapter/``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt

from .embedding import Vectors
from .errors import ModelError

__all__ = ["ADAPTER_MODEL", "SHIPPED_ADAPTER", "QueryAdapter", "load_query_adapter"]

SHIPPED_ADAPTER = Path(__file__).parent / "data" / "query_adapter.npy"
ADAPTER_MODEL = "sentence-transformers/all-MiniLM-L6-v2"
"""The embedding model the shipped adapter was trained for."""
_DTYPES = (np.float16, np.float32)


@dataclass(frozen=True)
class QueryAdapter:
    """A square map applied to a batch of query vectors, rows re-normalized."""

    weights: npt.NDArray[np.float32]

    @property
    def dim(self) -> int:
        """The embedding dimension the map expects and returns."""
        return int(self.weights.shape[0])

    def apply(self, vectors: Vectors) -> Vectors:
        """Map ``(n, dim)`` query vectors; each row comes back with unit length (zero rows
        stay zero). Raise ``ModelError`` for vectors of another shape: they come from a model
        the map was not trained for, which the caller must not pair with it (the factory
        attaches the map only to its own model's engine)."""
        if vectors.ndim != 2 or vectors.shape[1] != self.dim:
            raise ModelError(
                f"query adapter maps {self.dim}-dimensional vectors, got shape "
                f"{vectors.shape!r}; it only fits the embedding model it was trained for"
            )
        mapped = np.asarray(vectors, dtype=np.float32) @ self.weights.T
        norms = np.linalg.norm(mapped, axis=1, keepdims=True)
        norms[norms == 0] = 1.0
        out: Vectors = (mapped / norms).astype(np.float32, copy=False)
        return out


def load_query_adapter(path: Path | None = None) -> QueryAdapter | None:
    """Load the adapter at ``path``, else the shipped one (None if the package has none).

    Raise ``ModelError`` naming the file when it cannot be read or is not a finite square
    float16/float32 matrix saved with ``numpy.save``.
    """
    if path is None:
        if not SHIPPED_ADAPTER.is_file():
            return None
        path = SHIPPED_ADAPTER
    weights = _read_matrix(path)
    return QueryAdapter(weights.astype(np.float32))


def _read_matrix(path: Path) -> npt.NDArray[np.floating]:
    try:
        data = np.load(path, allow_pickle=False)
    except (OSError, ValueError, EOFError) as exc:
        raise ModelError(
            f"query adapter {str(path)!r} cannot be read as a .npy matrix ({exc}); "
            "point to a file written by benchmarks/query_adapter/train.py"
        ) from exc
    if not isinstance(data, np.ndarray) or data.dtype not in _DTYPES:
        kind = getattr(data, "dtype", type(data).__name__)
        raise ModelError(f"query adapter {str(path)!r} holds {kind!s}, not float16 or float32")
    if data.ndim != 2 or data.shape[0] != data.shape[1] or data.shape[0] == 0:
        raise ModelError(
            f"query adapter {str(path)!r} has shape {data.shape!r}; expected a square "
            "(dim, dim) matrix for the embedding model's dimension"
        )
    if not np.isfinite(data).all():
        raise ModelError(f"query adapter {str(path)!r} holds NaN or infinite values")
    return data
