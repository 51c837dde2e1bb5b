"""The fastembed adapter: the embedder, its bulk child process and the model's place."""

from __future__ import annotations

from .build import AppParts, build_broker, build_embedder, default_model_dir, resolve_model_dir
from .fastembed import DEFAULT_MODEL, MODEL_FILES, FastEmbedEmbedder

__all__ = [
    "DEFAULT_MODEL",
    "MODEL_FILES",
    "AppParts",
    "FastEmbedEmbedder",
    "build_broker",
    "build_embedder",
    "default_model_dir",
    "resolve_model_dir",
]
