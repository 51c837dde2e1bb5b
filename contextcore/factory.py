"""Builds the domain objects from a config: items, embedder, search engine, broker."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from .catalog import Catalog
from .config import BrokerConfig, InlineItem
from .embedding import Embedder
from .embedding_cache import (
    EmbeddingCache,
    MemoryEmbeddingCache,
    SqliteEmbeddingCache,
    StoreEmbeddingCache,
)
from .items import ContextItem, Reference, Rule
from .learning import LearningSettings, UsageLearner
from .loaders import load_catalog_json, load_markdown_dir, load_markdown_file
from .memory_store import MemorySessionStore
from .profiles import build_profiles, unknown_items
from .query_adapter import ADAPTER_MODEL, load_query_adapter
from .reach import ReachSettings
from .search import SearchEngine, SearchSettings
from .services.broker import ContextBroker
from .store import SessionStore

__all__ = [
    "Parts",
    "build_cache",
    "build_learner",
    "build_parts",
    "build_search",
    "load_items",
    "search_settings",
]


_PRESET_KEYS = frozenset(
    {"top_k", "top_n", "include_score", "min_score", "min_score_tools", "conversation_weight"}
)


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
        part_share=s.part_share,
        feedback=s.feedback,
        conversation_weight=s.conversation_weight,
        conversation_turns=s.conversation_turns,
        query_adapter=s.query_adapter,
        small_talk=s.small_talk,
        reach=ReachSettings(
            tokens=s.reach_tokens,
            per_server=s.reach_per_server,
            ranked=s.reach_ranked,
            per_step=s.reach_per_step,
            min_score=s.reach_min_score,
            min_best=s.reach_min_best,
            directory_tokens=s.reach_directory_tokens,
            line_chars=s.reach_line_chars,
        ),
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
    # Loaded even when switched off, so a reload can switch it on; it was trained for
    # MiniLM's vectors and means nothing to another model's.
    fits = embedder is not None and embedder.model_name == ADAPTER_MODEL
    adapter = load_query_adapter() if fits else None
    return SearchEngine(catalog, embedder, cache=cache, settings=settings, adapter=adapter)


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
        reach_evidence=c.reach_evidence,
        companion_weight=c.companion_weight,
    )
    return UsageLearner(settings)


Config = TypeVar("Config", bound=BrokerConfig)


@dataclass
class Parts(Generic[Config]):
    """Everything built from one config."""

    config: Config
    catalog: Catalog
    embedder: Embedder | None
    search: SearchEngine
    broker: ContextBroker


def build_parts(
    config: Config,
    *,
    embedder: Embedder | None,
    store: SessionStore | None = None,
    max_message_chars: int = 1_000_000,
    trace: Callable[[str, Any], Any] | None = None,
) -> Parts[Config]:
    """Load the catalog and wire search and sessions (``embedder`` None: lexical search only).
    ``trace(kind, target)``, when given, wraps the session store (``"store"``) and the search
    engine (``"search"``) the broker calls, e.g. in spans; ``parts.search`` is the engine."""
    catalog = Catalog(load_items(config))
    search = build_search(config, catalog, embedder, store)
    search.learner = build_learner(config)
    store = store or MemorySessionStore()
    broker = ContextBroker(
        catalog,
        trace("search", search) if trace is not None else search,
        store=trace("store", store) if trace is not None else store,
        max_message_chars=max_message_chars,
        profiles=build_profiles(config.profiles),
    )
    unknown = unknown_items(broker.profiles, (i.ref for i in catalog.items()))
    if unknown is not None:
        raise unknown
    if search.learner is not None:
        broker.usage.rebuild()  # what earlier runs learned, from the stored events
    return Parts(config, catalog, embedder, search, broker)
