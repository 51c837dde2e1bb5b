"""The fastembed embedder the server's settings describe, and where its model lives."""

from __future__ import annotations

import sys
from pathlib import Path

from contextcore.embedding import Embedder

from ..settings import AppConfig
from .fastembed import FastEmbedEmbedder

__all__ = ["build_embedder", "default_model_dir", "resolve_model_dir"]


def default_model_dir(model: str) -> Path:
    """Where ``context-broker setup-model`` puts a model by default: inside the Python
    environment the broker is installed in, so it goes away with it."""
    return Path(sys.prefix) / "share" / "context-broker" / "models" / model.rsplit("/", 1)[-1]


def resolve_model_dir(config: AppConfig) -> Path | None:
    """The configured model directory, else the prepared default one if present, else None
    (fastembed then uses its cache or the hub)."""
    s = config.search
    if s.model_dir is not None:
        return config.resolve(s.model_dir)
    prepared = default_model_dir(s.model)
    return prepared if (prepared / "model.onnx").is_file() else None


def build_embedder(config: AppConfig) -> Embedder | None:
    """The configured fastembed embedder (not loaded yet), or None when semantic search is off."""
    s = config.search
    if not s.semantic:
        return None
    return FastEmbedEmbedder(
        s.model,
        model_dir=resolve_model_dir(config),
        cache_dir=config.resolve(s.cache_dir) if s.cache_dir else None,
        threads=s.threads,
    )
