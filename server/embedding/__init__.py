"""The fastembed adapter: the embedder, its bulk child process and the model's place."""

from __future__ import annotations

from .fastembed import DEFAULT_MODEL, MODEL_FILES, FastEmbedEmbedder
from .model import build_embedder, default_model_dir, resolve_model_dir

__all__ = [
    "DEFAULT_MODEL",
    "MODEL_FILES",
    "FastEmbedEmbedder",
    "build_embedder",
    "default_model_dir",
    "resolve_model_dir",
]
