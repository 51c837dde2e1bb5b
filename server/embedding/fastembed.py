"""The fastembed embedder: the ``Embedder`` the broker serves with."""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from contextcore.embedding import ModelSource, ModelStatus, Vectors
from contextcore.errors import ModelError

__all__ = ["DEFAULT_MODEL", "MODEL_FILES", "FastEmbedEmbedder"]

log = logging.getLogger(__name__)

DEFAULT_MODEL = "sentence-transformers/all-MiniLM-L6-v2"
MODEL_FILES = (
    "model.onnx",
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "config.json",
)


class FastEmbedEmbedder:
    """fastembed's ``TextEmbedding``, loaded lazily on first use and then shared.

    With ``model_dir`` the model is read from that local directory (see
    ``context-broker setup-model``); without it fastembed uses its cache or downloads from the hub.
    Batches of ``bulk_threshold`` texts or more are embedded in a child process (see
    ``server.embedding.child``), so the serving process never holds the runtime memory a
    whole catalog's embedding grows; ``None`` embeds everything in this process.
    """

    def __init__(
        self,
        model_name: str = DEFAULT_MODEL,
        *,
        model_dir: Path | None = None,
        cache_dir: Path | None = None,
        threads: int | None = None,
        batch_size: int = 8,
        bulk_threshold: int | None = 256,
    ) -> None:
        self._model_name = model_name
        self._model_dir = model_dir
        self._cache_dir = cache_dir
        self._threads = threads
        self._batch_size = batch_size
        self._bulk_threshold = bulk_threshold
        self._model: Any = None
        self._error: str | None = None
        self._lock = threading.Lock()

    @property
    def model_name(self) -> str:
        return self._model_name

    @property
    def batch_size(self) -> int:
        """Texts per model run: small batches keep the runtime's memory arena small."""
        return self._batch_size

    def _source(self) -> ModelSource:
        return "local directory" if self._model_dir is not None else "hub or fastembed cache"

    def status(self) -> ModelStatus:
        if self._error is not None:
            return ModelStatus(self._model_name, "unavailable", False, self._error)
        return ModelStatus(self._model_name, self._source(), self._model is not None)

    def load(self) -> None:
        """Load the model now; raise ``ModelError`` (and remember why) if it cannot be loaded."""
        with self._lock:
            if self._model is not None:
                return
            if self._error is not None:
                raise ModelError(self._error)
            try:
                self._model = self._create()
            except ModelError as exc:
                self._error = exc.message
                raise
            except Exception as exc:  # fastembed raises many kinds; all mean "no model"
                self._error = f"embedding model {self._model_name!r} could not be loaded: {exc}"
                raise ModelError(self._error) from exc

    def _create(self) -> Any:
        kwargs: dict[str, Any] = {}
        if self._model_dir is not None:
            missing = [f for f in MODEL_FILES if not (self._model_dir / f).is_file()]
            if missing:
                raise ModelError(
                    f"model directory {str(self._model_dir)!r} lacks {', '.join(missing)}; "
                    "run 'context-broker setup-model' to prepare it"
                )
            optimized = self._model_dir / "optimized"
            use = optimized if (optimized / "SOURCE").is_file() else self._model_dir
            kwargs["specific_model_path"] = str(use)
        if self._cache_dir is not None:
            kwargs["cache_dir"] = str(self._cache_dir)
        from fastembed import TextEmbedding

        log.info("loading embedding model %s from %s", self._model_name, self._source())
        return TextEmbedding(model_name=self._model_name, threads=self._threads, **kwargs)

    def embed(self, texts: Sequence[str]) -> Vectors:
        if not texts:
            return np.zeros((0, 0), dtype=np.float32)
        self.load()
        if self._bulk_threshold is not None and len(texts) >= self._bulk_threshold:
            try:
                return self._embed_in_child(texts)
            except ModelError as exc:
                log.warning("embedding in this process instead: %s", exc)
        out: Vectors | None = None
        # Rows go straight into one preallocated matrix: no list of rows, no extra copies.
        for i, row in enumerate(self._model.embed(list(texts), batch_size=self._batch_size)):
            if out is None:
                out = np.empty((len(texts), len(row)), dtype=np.float32)
            out[i] = row
        assert out is not None
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        norms[norms == 0] = 1.0
        out /= norms
        return out

    def _embed_in_child(self, texts: Sequence[str]) -> Vectors:
        from .child import embed_in_child

        settings = {
            "model_name": self._model_name,
            "model_dir": str(self._model_dir) if self._model_dir else None,
            "cache_dir": str(self._cache_dir) if self._cache_dir else None,
            "threads": self._threads,
            "batch_size": self._batch_size,
        }
        # Generous: about 50 ms a text on a slow machine, plus start-up.
        return embed_in_child(settings, texts, timeout=60 + 0.05 * len(texts))
