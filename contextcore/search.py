"""Hybrid search over the catalog: dense cosine fused with BM25, grouped per item.

Ranking score per chunk: ``cosine + lexical_weight * bm25 / max(bm25)`` (the lexical part is
scaled to [0, 1] per query). An item's score is its best chunk's; it is the score users see
(``similarity_score``), results are ordered by it, and ``min_score`` compares against it (an
item must also reach 0.6 of the floor with its cosine alone, so a keyword hit cannot carry an
unrelated item).
``include_score`` compares against the item's best cosine alone (``similarity``): items that
close in meaning are included even past ``top_n``.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Literal

import numpy as np
import numpy.typing as npt

from .catalog import Catalog
from .embedding import Embedder, Vectors
from .embedding_cache import EmbeddingCache, MemoryEmbeddingCache
from .errors import ContextCoreError, SearchInputError
from .index import ChunkIndex, IndexStats, Layout
from .items import IncludeMode, ItemRef, ItemType, parse_item_type
from .learning import UsageLearner
from .presets import PresetName

__all__ = ["MinScore", "SearchEngine", "SearchHit", "SearchMode", "SearchResult", "SearchSettings"]

log = logging.getLogger(__name__)

SearchMode = Literal["hybrid", "dense", "lexical"]
_MODES: tuple[SearchMode, ...] = ("hybrid", "dense", "lexical")
MinScore = float | Mapping[ItemType, float]


@dataclass(frozen=True)
class SearchSettings:
    """Defaults for every search; each may be overridden per call."""

    top_k: int = 20
    top_n: int = 5
    include_score: float = 0.7
    mode: SearchMode = "hybrid"
    lexical_weight: float = 0.15
    max_query_chars: int = 100_000
    preset: PresetName = "normal"
    min_score: float = 0.25
    min_score_tools: float = 0.22
    max_context_tokens: int = 4000
    explicit: frozenset[str] = frozenset()
    """The names of the settings above that the config set itself (they override its preset)."""


@dataclass(frozen=True)
class SearchHit:
    """One selected item: fused ranking score, cosine similarity, scaled lexical score."""

    ref: ItemRef
    score: float
    similarity: float | None
    lexical: float

    def clears(self, floor: float) -> bool:
        """Whether this hit reaches a relevance floor: its score does, and (when there is a
        cosine) so does its cosine for its share of the floor."""
        meaning_ok = self.similarity is None or self.similarity >= _MEANING_SHARE * floor
        return self.score >= floor and meaning_ok

    @property
    def similarity_score(self) -> float:
        """The score users see and results are ordered by: the fused relevance (in dense mode
        the cosine, in lexical mode the scaled BM25 score)."""
        return self.score


@dataclass(frozen=True)
class SearchResult:
    """Hits best first, the mode actually used, and anything the user should know."""

    hits: tuple[SearchHit, ...]
    mode: SearchMode
    warnings: tuple[str, ...] = ()


class SearchEngine:
    """Searches a catalog's enabled items; indexes just in time, shares one embedder.

    Safe to call from several threads: indexing, searching and embedding queries take turns
    (the index is built lazily and the embedder's runtime is not shared across threads)."""

    def __init__(
        self,
        catalog: Catalog,
        embedder: Embedder | None,
        *,
        cache: EmbeddingCache | None = None,
        settings: SearchSettings | None = None,
        learner: UsageLearner | None = None,
    ) -> None:
        self.catalog = catalog
        self.learner = learner  # adds what usage taught to the fused score before selection
        self.embedder = embedder
        self.settings = settings or SearchSettings()
        self._index = ChunkIndex(cache or MemoryEmbeddingCache())
        self._synced_version = -1
        self._lock = threading.RLock()

    def _sync(self) -> None:
        version = self.catalog.version  # read first: a change during sync is seen next time
        if self._synced_version != version or len(self._index) == 0:
            self._index.sync(self.catalog.enabled())
            self._synced_version = version

    def index(self) -> IndexStats:
        """Load the model, embed everything not yet embedded and build the search arrays now
        (search does this on demand)."""
        with self._lock:
            return self._index_now()

    def _index_now(self) -> IndexStats:
        self._sync()
        if self.embedder is None:
            return IndexStats(len(self._index), len(self._index.layout().chunks), 0, 0)
        self.embedder.load()
        stats = self._index.embed_missing(self.embedder)
        layout = self._index.layout()
        return stats or IndexStats(len(self._index), len(layout.chunks), 0, 0)

    def search(
        self,
        query: str,
        *,
        types: Iterable[str] | None = None,
        top_k: int | None = None,
        top_n: int | None = None,
        include_score: float | None = None,
        mode: str | None = None,
        modes: Iterable[IncludeMode] | None = None,
        exclude: Collection[ItemRef] = (),
        apply_include_score: bool = True,
        query_vector: Vectors | None = None,
        min_score: MinScore | None = None,
    ) -> SearchResult:
        """Rank enabled items for ``query``; ``modes`` keeps only items of those effective
        include modes and ``exclude`` leaves out the given items; ``min_score`` (one floor, or
        one per item type) drops items scoring below it.

        Items whose cosine similarity reaches ``include_score`` are added past ``top_n``
        unless ``apply_include_score`` is false (evaluation ranks without that cut-off).
        ``query_vector`` is the query's embedding when the caller already has it.
        """
        s = self._validated(top_k, top_n, include_score, mode)
        if not isinstance(query, str) or not query.strip():
            raise SearchInputError("query must be a non-empty text", field="query")
        return self.rank(
            query,
            s,
            types=_parse_types(types),
            modes=modes,
            exclude=exclude,
            apply_include_score=apply_include_score,
            query_vector=query_vector,
            min_score=min_score,
        )

    def rank(
        self,
        query: str,
        settings: SearchSettings,
        *,
        types: set[ItemType] | None = None,
        modes: Iterable[IncludeMode] | None = None,
        exclude: Collection[ItemRef] = (),
        apply_include_score: bool = True,
        query_vector: Vectors | None = None,
        min_score: MinScore | None = None,
    ) -> SearchResult:
        """:meth:`search` for a caller that has checked ``query`` (a non-empty text) and built
        ``settings`` itself; a query over ``max_query_chars`` is still cut, with a warning."""
        query, warnings = _clipped(query, settings.max_query_chars)
        with self._lock:
            return self._search(
                query,
                settings,
                warnings,
                types,
                modes,
                exclude,
                apply_include_score,
                query_vector,
                min_score,
            )

    def _search(
        self,
        query: str,
        s: SearchSettings,
        warnings: list[str],
        wanted: set[ItemType] | None,
        modes: Iterable[IncludeMode] | None,
        exclude: Collection[ItemRef],
        apply_include_score: bool,
        query_vector: Vectors | None,
        min_score: MinScore | None,
    ) -> SearchResult:
        self._sync()
        requested = s.mode
        dense_ok, why = self._prepare_dense(s.mode)
        if not dense_ok:
            s = replace(s, mode="lexical")
            warnings.append(
                f"semantic search unavailable ({why}); results use lexical (BM25) search only"
            )
        layout = self._index.layout()
        if not layout.refs:
            return SearchResult((), s.mode, tuple(warnings))
        mask = _item_mask(layout, wanted, modes, exclude)
        hits = self._rank(layout, query, s, mask, apply_include_score, query_vector)
        if min_score is not None:
            hits = [h for h in hits if h.clears(_floor(min_score, h.ref.type))]
        if requested != s.mode:
            log.warning("search fell back to %s mode: %s", s.mode, why)
        return SearchResult(tuple(hits), s.mode, tuple(warnings))

    def embed_queries(self, queries: list[str]) -> Vectors | None:
        """Embed many queries in one batch (None when no model is available)."""
        if self.embedder is None:
            return None
        try:
            with self._lock:
                return self.embedder.embed(queries)
        except ContextCoreError:
            return None

    def _prepare_dense(self, mode: SearchMode) -> tuple[bool, str]:
        if mode == "lexical":
            return True, ""
        if self.embedder is None:
            return False, "no embedding model is configured"
        try:
            # The model first: its load-time peak then never stacks on a freshly built index.
            self.embedder.load()
            self._index.embed_missing(self.embedder)
        except ContextCoreError as exc:
            return False, exc.message
        return True, ""

    def _rank(
        self,
        layout: Layout,
        query: str,
        s: SearchSettings,
        mask: npt.NDArray[np.bool_] | None,
        apply_include_score: bool,
        query_vector: Vectors | None,
    ) -> list[SearchHit]:
        lexical = layout.lexical.scores(query)
        peak = float(lexical.max()) if lexical.size else 0.0
        if peak > 0:
            lexical /= peak
        dense: npt.NDArray[np.float32] | None = None
        if s.mode == "lexical":
            fused = lexical.copy()
        else:
            assert self.embedder is not None and layout.matrix is not None
            if query_vector is None:
                query_vector = self.embedder.embed([query])[0]
            dense = layout.matrix @ query_vector
            fused = dense + s.lexical_weight * lexical if s.mode == "hybrid" else dense.copy()
        if mask is not None:
            fused[~mask[layout.owner]] = -np.inf
        pool = None
        if self.learner is not None and dense is not None and query_vector is not None:
            pool = self.learner.adjust(query, query_vector, fused, layout)
        chosen = _top_items(fused, layout.owner, s.top_k, s.top_n, pool)
        if dense is not None and apply_include_score:
            chosen = _with_include_score(chosen, dense, fused, layout.owner, s.include_score)
        hits = [_hit(layout, item, fused, dense, lexical) for item in chosen]
        return sorted(hits, key=lambda h: -h.score)

    def _validated(
        self, top_k: int | None, top_n: int | None, include_score: float | None, mode: str | None
    ) -> SearchSettings:
        s = self.settings
        if top_k is not None:
            if isinstance(top_k, bool) or not isinstance(top_k, int) or top_k < 1:
                raise SearchInputError(
                    f"top_k must be an integer >= 1, got {top_k!r}", field="top_k"
                )
            s = replace(s, top_k=top_k)
        if top_n is not None:
            if isinstance(top_n, bool) or not isinstance(top_n, int) or top_n < 1:
                raise SearchInputError(
                    f"top_n must be an integer >= 1, got {top_n!r}", field="top_n"
                )
            s = replace(s, top_n=top_n)
        if include_score is not None:
            if not isinstance(include_score, int | float) or not 0.0 <= include_score <= 1.0:
                raise SearchInputError(
                    f"include_score must be between 0 and 1, got {include_score!r}",
                    field="include_score",
                )
            s = replace(s, include_score=float(include_score))
        if mode is not None:
            if mode not in _MODES:
                raise SearchInputError(
                    f"mode must be one of {', '.join(_MODES)}, got {mode!r}", field="mode"
                )
            s = replace(s, mode=mode)
        return s


def _clipped(query: str, limit: int) -> tuple[str, list[str]]:
    if len(query) <= limit:
        return query, []
    warning = f"query of {len(query)} characters truncated to the first {limit} for search"
    return query[:limit], [warning]


# Share of the floor an item's cosine must reach on its own. The lexical part is scaled per
# query by its best match, so even a weak keyword hit ("all" in "thanks, that's all") gets the
# full boost; an item must also be somewhat close in meaning to clear a floor.
_MEANING_SHARE = 0.6


def _floor(min_score: MinScore, item_type: ItemType) -> float:
    if isinstance(min_score, int | float):
        return float(min_score)
    return float(min_score.get(item_type, 0.0))


def _parse_types(types: Iterable[str] | None) -> set[ItemType] | None:
    if types is None:
        return None
    if isinstance(types, str):
        types = [types]
    return {parse_item_type(t, field="types") for t in types}


def _item_mask(
    layout: Layout,
    wanted: set[ItemType] | None,
    modes: Iterable[IncludeMode] | None,
    exclude: Collection[ItemRef],
) -> npt.NDArray[np.bool_] | None:
    """Which items may be returned (None: all), as vector operations over the layout."""
    if wanted is None and modes is None and not exclude:
        return None
    mask = np.ones(len(layout.refs), dtype=np.bool_)
    if wanted is not None:
        mask &= np.isin(layout.types, sorted(wanted))
    if modes is not None:
        mask &= np.isin(layout.modes, sorted(set(modes)))
    for ref in exclude:
        position = layout.position.get(ref)
        if position is not None:
            mask[position] = False
    return mask


def _top_items(
    fused: npt.NDArray[np.float32],
    owner: npt.NDArray[np.int64],
    top_k: int,
    top_n: int,
    pool: npt.NDArray[np.int64] | None = None,
) -> list[int]:
    """Best ``top_k`` chunks, grouped by item (best chunk first), cut to ``top_n`` items;
    ``pool``, when given, holds at least the best ``top_k`` chunks (the learner's)."""
    k = min(top_k, fused.size)
    if pool is not None and k <= pool.size:
        part = pool
    else:
        part = np.argpartition(-fused, k - 1)[:k] if k < fused.size else np.arange(fused.size)
    order = part[np.argsort(-fused[part], kind="stable")][:k]
    items: list[int] = []
    for chunk in order:
        if not np.isfinite(fused[chunk]):
            break
        item = int(owner[chunk])
        if item not in items:
            items.append(item)
            if len(items) == top_n:
                break
    return items


def _with_include_score(
    chosen: list[int],
    dense: npt.NDArray[np.float32],
    fused: npt.NDArray[np.float32],
    owner: npt.NDArray[np.int64],
    threshold: float,
) -> list[int]:
    """Add every allowed item whose best cosine reaches ``threshold``, even past top_n."""
    strong = np.nonzero((dense >= threshold) & np.isfinite(fused))[0]
    extra = [int(i) for i in dict.fromkeys(owner[strong].tolist()) if int(i) not in chosen]
    if not extra:
        return chosen
    best = {i: float(fused[owner == i].max()) for i in extra}
    return chosen + sorted(extra, key=lambda i: -best[i])


def _hit(
    layout: Layout,
    item: int,
    fused: npt.NDArray[np.float32],
    dense: npt.NDArray[np.float32] | None,
    lexical: npt.NDArray[np.float32],
) -> SearchHit:
    start = int(layout.starts[item])
    end = int(layout.starts[item + 1]) if item + 1 < len(layout.starts) else fused.size
    return SearchHit(
        ref=layout.refs[item],
        score=float(fused[start:end].max()),
        similarity=float(dense[start:end].max()) if dense is not None else None,
        lexical=float(lexical[start:end].max()),
    )
