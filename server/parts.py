"""The domain's parts built from the server's settings: catalog, search and the context broker,
with the configured fastembed embedder and the server's message cap."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from contextcore import factory
from contextcore.embedding import Embedder
from contextcore.store import SessionStore

from .embedding import build_embedder
from .settings import AppConfig

AppParts = factory.Parts[AppConfig]
"""Everything the server builds from its settings."""

__all__ = ["AppParts", "build_parts"]


def build_parts(
    config: AppConfig,
    *,
    embedder: Embedder | None = None,
    use_config_embedder: bool = True,
    store: SessionStore | None = None,
    trace: Callable[[str, Any], Any] | None = None,
) -> AppParts:
    """The domain's parts with ``embedder``, else the config's (unless
    ``use_config_embedder`` is false: lexical only), ``[server] max_message_chars`` and
    ``trace`` (see :func:`contextcore.factory.build_parts`)."""
    if embedder is None and use_config_embedder:
        embedder = build_embedder(config)
    return factory.build_parts(
        config,
        embedder=embedder,
        store=store,
        max_message_chars=config.server.max_message_chars,
        trace=trace,
    )
