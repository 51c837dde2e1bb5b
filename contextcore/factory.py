"""Builds the domain objects from a config: items, embedder, search engine, broker."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

from .broker import ContextBroker
from .catalog import Catalog
from .config import BrokerConfig, InlineItem
from .embedding import Embedder, FastEmbedEmbedder
from .embedding_cache import (
    EmbeddingCache,
    MemoryEmbeddingCache,
    SqliteEmbeddingCache,
    StoreEmbeddingCache,
)
from .items import ContextItem, Reference, Rule
from .learning import LearningSettings, UsageLearner
from .loaders import load_catalog_json, load_markdown_dir, load_markdown_file
from .search import SearchEngine, SearchSettings
from .store import SessionStore

__all__ = [
    "BrokerParts",
    "build_broker",
    "build_cache",
    "build_embedder",
    "build_learner",
    "build_search",
    "default_model_dir",
    "load_items",
    "resolve_model_dir",
    "search_settings",
]


_PRESET_KEYS = frozenset({"top_k", "top_n", "include_score", "min_score", "min_score_tools"})


def _inline(row: InlineItem, cls: type[Rule] | type[Reference], source: str) -> ContextItem:
    return cls(
        name=row.name,
        text=row.text,
        description=row.description,
        include=row.include,
        priority=row.priority,
        enabled=row.enabled,
        source=source,
    )


def load_items(config: BrokerConfig) -> list[ContextItem]:
    """Every rule and reference the config names, inline and from files."""
    src = config.sources
    mode = src.default_include
    items: list[ContextItem] = [_inline(r, Rule, "config") for r in config.rules]
    items += [_inline(r, Reference, "config") for r in config.references]
    for folder in src.rule_dirs:
        items += load_markdown_dir(config.resolve(folder), "rule", default_include=mode)
    for folder in src.reference_dirs:
        items += load_markdown_dir(config.resolve(folder), "reference", default_include=mode)
    for path in src.rule_files:
        items.append(load_markdown_file(config.resolve(path), "rule", default_include=mode))
    for path in src.reference_files:
        items.append(load_markdown_file(config.resolve(path), "reference", default_include=mode))
    for path in src.catalog_files:
        items += load_catalog_json(config.resolve(path))
    return items


def default_model_dir(model: str) -> Path:
    """Where ``context-broker setup-model`` puts a model by default: inside the Python
    environment the broker is installed in, so it goes away with it."""
    return Path(sys.prefix) / "share" / "context-broker" / "models" / model.rsplit("/", 1)[-1]


def resolve_model_dir(config: BrokerConfig) -> Path | None:
    """The configured model directory, else the prepared default one if present, else None
    (fastembed then uses its cache or the hub)."""
    s = config.search
    if s.model_dir is not None:
        return config.resolve(s.model_dir)
    prepared = default_model_dir(s.model)
    return prepared if (prepared / "model.onnx").is_file() else None


def build_embedder(config: BrokerConfig) -> Embedder | None:
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


def build_cache(config: BrokerConfig) -> EmbeddingCache:
    """The on-disk embedding cache if configured, else an in-memory one."""
    path = config.search.embedding_cache
    return SqliteEmbeddingCache(config.resolve(path)) if path else MemoryEmbeddingCache()


def search_settings(config: BrokerConfig) -> SearchSettings:
    """The config's ranking defaults (what a reload can change without a restart)."""
    s = config.search
    return SearchSettings(
        top_k=s.top_k,
        top_n=s.top_n,
        include_score=s.include_score,
        mode=s.mode,
        lexical_weight=s.lexical_weight,
        max_query_chars=s.max_query_chars,
        preset=s.preset,
        min_score=s.min_score,
        min_score_tools=s.min_score_tools,
        max_context_tokens=s.max_context_tokens,
        explicit=frozenset(s.model_fields_set & _PRESET_KEYS),
    )


def build_search(
    config: BrokerConfig,
    catalog: Catalog,
    embedder: Embedder | None,
    store: SessionStore | None = None,
) -> SearchEngine:
    """A search engine over ``catalog`` with the config's defaults; on a shared store
    (postgres, redis) its embedding cache is the store's, shared by every replica."""
    settings = search_settings(config)
    if store is not None and config.persistence.backend in ("postgres", "redis"):
        cache: EmbeddingCache = StoreEmbeddingCache(store)
    else:
        cache = build_cache(config)
    return SearchEngine(catalog, embedder, cache=cache, settings=settings)


def build_learner(config: BrokerConfig) -> UsageLearner | None:
    """The usage learner of ``[learning]`` (None when learning is off)."""
    c = config.learning
    if not c.enabled:
        return None
    settings = LearningSettings(
        weight=c.weight,
        min_evidence=c.min_evidence,
        decay_days=c.decay,
        max_requests_per_item=c.max_requests_per_item,
    )
    return UsageLearner(settings)


@dataclass
class BrokerParts:
    """Everything built from one config."""

    config: BrokerConfig
    catalog: Catalog
    embedder: Embedder | None
    search: SearchEngine
    broker: ContextBroker


def build_broker(
    config: BrokerConfig,
    *,
    embedder: Embedder | None = None,
    use_config_embedder: bool = True,
    store: SessionStore | None = None,
) -> BrokerParts:
    """Load the catalog and wire search and sessions; ``embedder`` overrides the config's."""
    catalog = Catalog(load_items(config))
    if embedder is None and use_config_embedder:
        embedder = build_embedder(config)
    search = build_search(config, catalog, embedder, store)
    search.learner = build_learner(config)
    broker = ContextBroker(
        catalog, search, store=store, max_message_chars=config.server.max_message_chars
    )
    if search.learner is not None:
        from .usage import UsageRecorder

        UsageRecorder(broker).rebuild()  # what earlier runs learned, from the stored events
    return BrokerParts(config, catalog, embedder, search, broker)
