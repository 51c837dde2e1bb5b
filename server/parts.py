"""The broker built from the server's settings: the domain's broker with the configured
fastembed embedder and the server's message cap."""

from __future__ import annotations

from contextcore import factory
from contextcore.embedding import Embedder
from contextcore.store import SessionStore

from .embedding import build_embedder
from .settings import AppConfig

AppParts = factory.BrokerParts[AppConfig]
"""Everything the server builds from its settings."""

__all__ = ["AppParts", "build_broker"]


def build_broker(
    config: AppConfig,
    *,
    embedder: Embedder | None = None,
    use_config_embedder: bool = True,
    store: SessionStore | None = None,
) -> AppParts:
    """The domain's broker with ``embedder``, else the config's (unless
    ``use_config_embedder`` is false: lexical only), and ``[server] max_message_chars``."""
    if embedder is None and use_config_embedder:
        embedder = build_embedder(config)
    return factory.build_broker(
        config, embedder=embedder, store=store, max_message_chars=config.server.max_message_chars
    )
