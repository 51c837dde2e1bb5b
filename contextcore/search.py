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
from collections import OrderedDict
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import Literal

import numpy as np
import numpy.typing as npt

from .catalog import Catalog
from .embedding import Embedder, Vectors, embed_by_length
from .embedding_cache import EmbeddingCache, MemoryEmbeddingCache
from .errors import ContextCoreError, SearchInputError
from .index import ChunkIndex, IndexStats, Layout
from .items import IncludeMode, ItemRef, ItemType, for_model, parse_item_type
from .learning import UsageLearner
from .presets import PresetName
from .query_adapter import QueryAdapter
from .query_plan import QueryPlan, check_intents, pieces
from .reach import Candidate, ReachSettings, reach_pools
from .small_talk import SmallTalk

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
    part_share: float = 0.5
    """Weight of the message's best part next to the whole (0: the whole message only)."""
    feedback: float = 0.5
    """How far each query moves toward its best three items before the final scoring
    (pseudo-relevance feedback; 0 turns it off)."""
    query_adapter: bool = True
    """Map query vectors with the engine's query adapter, when it has one."""
    conversation_weight: float = 1.0
    """How far a follow-up's items are lifted toward the score of the conversation said
    together (times how much the message depends on it; 0 turns it off)."""
    conversation_turns: int = 2
    """How many earlier turns (or a host's own user messages) a request reads."""
    small_talk: bool = True
    """Select nothing for a request closer to small talk than to any item (see
    :mod:`contextcore.small_talk`); it applies where relevance floors do."""
    reach: ReachSettings = field(default_factory=ReachSettings)
    """How many further tools a request context names one line each (see
    :mod:`contextcore.reach`)."""
    explicit: frozenset[str] = frozenset()
    """The names of the settings above that the config set itself (they override its preset)."""


@dataclass(frozen=True)
class SearchHit:
    """One selected item: fused ranking score, cosine similarity, scaled lexical score."""

    ref: ItemRef
    score: float
    similarity: float | None
    lexical: float
    intent: int | None = None
    """The position of the intent that brought this item (None: the message)."""
    rank: float | None = None
    """What results are ordered by, when it is not ``score``: the score after
    pseudo-relevance feedback."""
    conversation: bool = False
    """Whether the conversation's earlier messages lifted this item to its score."""
    learned: bool = False
    """Whether usage learning lifted this item."""

    @property
    def order(self) -> float:
        return self.score if self.rank is None else self.rank

    def clears(self, floor: float) -> bool:
        """Whether this hit reaches a relevance floor: its score does, and (when there is a
        cosine) so does its cosine for its share of the floor, unless usage lifted it: then
        the requests that led to it are what it means."""
        meaning_ok = (
            self.similarity is None or self.similarity >= _MEANING_SHARE * floor or self.learned
        )
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
    reach: tuple[Candidate, ...] = ()
    """Further tools within reach, best source first (asked for with ``reach=True``)."""


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
        adapter: QueryAdapter | None = None,
    ) -> None:
        self.catalog = catalog
        self.adapter = adapter  # maps query vectors toward the tools that serve them
        self.learner = learner  # adds what usage taught to the fused score before selection
        self.embedder = embedder
        self.settings = settings or SearchSettings()
        cache = cache or MemoryEmbeddingCache()
        self._index = ChunkIndex(cache)
        self.small_talk = SmallTalk(cache=cache)
        self._synced_version = -1
        self._lock = threading.RLock()
        # Recent messages' vectors: a follow-up's earlier messages were embedded for their
        # own turn, so the conversation costs no extra embedding.
        self._recent: OrderedDict[str, npt.NDArray[np.float32]] = OrderedDict()
        # Texts embedded ahead for a run of searches (see :meth:`embedded_ahead`).
        self._ahead: dict[str, npt.NDArray[np.float32]] = {}

    def _sync(self) -> None:
        version = self.catalog.version  # read first: a change during sync is seen next time
        if self._synced_version != version or len(self._index) == 0:
            self._index.sync([i for i in self.catalog.enabled() if for_model(i)])
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
        intents: Sequence[str] | None = None,
        plain: bool = False,
    ) -> SearchResult:
        """Rank enabled items for ``query``; ``intents`` are the steps the host plans (each
        searched, an item scored by its best step); ``plain`` ranks by the message alone
        with none of the serving levers (parts, feedback, query adapter), for comparison;
        ``modes`` keeps only items of those effective
        include modes and ``exclude`` leaves out the given items; ``min_score`` (one floor, or
        one per item type) drops items scoring below it.

        Items whose cosine similarity reaches ``include_score`` are added past ``top_n``
        unless ``apply_include_score`` is false (evaluation ranks without that cut-off).
        ``query_vector`` is the query's embedding when the caller already has it.
        """
        s = self._validated(top_k, top_n, include_score, mode)
        if plain:
            s = replace(s, part_share=0.0, feedback=0.0, query_adapter=False)
        if not isinstance(query, str) or not query.strip():
            raise SearchInputError("query must be a non-empty text", field="query")
        steps = () if plain else check_intents(intents)
        return self.rank(
            query,
            s,
            types=_parse_types(types),
            modes=modes,
            exclude=exclude,
            apply_include_score=apply_include_score,
            query_vector=query_vector,
            min_score=min_score,
            intents=steps,
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
        intents: Sequence[str] = (),
        context: Sequence[str] = (),
        context_weight: float = 0.0,
        carried: Collection[ItemRef] = (),
        reach: bool = False,
    ) -> SearchResult:
        """:meth:`search` for a caller that has checked ``query`` (a non-empty text) and
        ``intents`` (see :func:`check_intents`) and built ``settings`` itself; a query over
        ``max_query_chars`` is still cut, with a warning. ``context`` holds the earlier
        messages a follow-up depends on and ``carried`` the items its earlier turns chose or
        called, counting ``context_weight`` (see :class:`QueryPlan`). ``reach``: also the
        further tools within reach of the hits (``SearchResult.reach``)."""
        query, warnings = _clipped(query, settings.max_query_chars)
        earlier = [m[: settings.max_query_chars] for m in context if m.strip()]
        plan = QueryPlan.of(
            query,
            intents,
            split=settings.part_share > 0,
            context=earlier,
            context_weight=context_weight,
            carried=carried,
        )
        with self._lock:
            return self._search(
                plan,
                settings,
                warnings,
                types,
                modes,
                exclude,
                apply_include_score,
                query_vector,
                min_score,
                reach,
            )

    def _search(
        self,
        plan: QueryPlan,
        s: SearchSettings,
        warnings: list[str],
        wanted: set[ItemType] | None,
        modes: Iterable[IncludeMode] | None,
        exclude: Collection[ItemRef],
        apply_include_score: bool,
        query_vector: Vectors | None,
        min_score: MinScore | None,
        reach: bool = False,
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
        hits, pools = self._rank(
            layout, plan, s, mask, apply_include_score, query_vector, min_score, reach
        )
        if requested != s.mode:
            log.warning("search fell back to %s mode: %s", s.mode, why)
        return SearchResult(tuple(hits), s.mode, tuple(warnings), tuple(pools))

    def embed_queries(self, queries: list[str]) -> Vectors | None:
        """Embed many queries in one batch, in query order (None when no model is
        available)."""
        if self.embedder is None:
            return None
        try:
            with self._lock:
                return embed_by_length(self.embedder, queries)
        except ContextCoreError:
            return None

    @contextmanager
    def embedded_ahead(self, queries: Iterable[tuple[str, Sequence[str]]]) -> Iterator[int]:
        """Within the block, the searches of ``queries`` (each a message and its checked
        intents, searched with the engine's settings) read their texts' vectors from one
        batch embedded here, shortest first, instead of embedding a batch each: a run of
        hundreds of searches (an evaluation) then costs the model a quarter as much. Yields
        how many texts were embedded (none without a model; the searches then embed as
        usual)."""
        s = self.settings
        texts: dict[str, None] = {}
        for message, intents in queries:
            query = _clipped(message, s.max_query_chars)[0]
            texts.update(dict.fromkeys(QueryPlan.of(query, intents, split=s.part_share > 0).texts))
        todo = [t for t in texts if t not in self._ahead]
        vectors = self.embed_queries(todo) if todo and s.mode != "lexical" else None
        if vectors is not None:
            self._ahead.update(zip(todo, np.asarray(vectors, dtype=np.float32), strict=True))
        try:
            yield 0 if vectors is None else len(todo)
        finally:
            self._ahead.clear()

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
        plan: QueryPlan,
        s: SearchSettings,
        mask: npt.NDArray[np.bool_] | None,
        apply_include_score: bool,
        query_vector: Vectors | None,
        min_score: MinScore | None,
        reach: bool = False,
    ) -> tuple[list[SearchHit], list[Candidate]]:
        view, order, raw = self._views(layout, plan, s, mask, query_vector)
        floored = min_score is not None and s.small_talk
        if floored and self._chatter(layout, plan, raw, view, s, mask):
            return [], []
        pool = None
        lifted: npt.NDArray[np.bool_] | None = None
        if self.learner is not None and raw is not None:
            before = order.fused.copy()
            pool = self.learner.adjust(plan.message, raw[0], order.fused, layout)
            lifted = order.fused > before  # masked chunks stay -inf, never lifted
            if order is not view:  # the lift counts in the score shown too
                view.fused[lifted] += order.fused[lifted] - before[lifted]
        chosen = _top_items(order.fused, layout.owner, s.top_k, s.top_n, pool)
        if view.dense is not None and apply_include_score:
            chosen = _with_include_score(
                chosen, view.dense, order.fused, layout.owner, s.include_score
            )
        hits = [_hit(layout, item, view, order, lifted) for item in chosen]
        if min_score is not None:
            hits = [h for h in hits if h.clears(_floor(min_score, h.ref.type))]
            hits += _uncovered_steps(layout, view, hits, min_score)
        hits.sort(key=lambda h: -h.order)
        if not reach:
            return hits, []
        first = view.first_intent
        steps = view.columns[:, first : first + view.steps] if view.steps else None
        given = [(h.ref, h.score) for h in hits]
        return hits, reach_pools(layout, order.fused, view.fused, steps, given, s.reach)

    def _chatter(
        self,
        layout: Layout,
        plan: QueryPlan,
        raw: Vectors | None,
        view: _View,
        s: SearchSettings,
        mask: npt.NDArray[np.bool_] | None,
    ) -> bool:
        """Whether the request is small talk: each of its own texts (not the earlier
        messages), and each sentence of the message however short, at least as close to
        small talk as to any item that may be selected ("hi! what time is it in Tokyo?" is
        not: its second sentence asks for a tool)."""
        if raw is None or self.embedder is None or layout.matrix is None:
            return False
        if plan.context:  # a follow-up that reads its conversation ("and in Oslo?")
            return False
        own = 1 + len(plan.parts) + len(plan.intents)
        if not self.small_talk.judge(self.embedder, raw[:own], view.columns[:, :own].max(0)):
            return False
        short = [p for p in pieces(plan.message) if p not in plan.parts and p != plan.message]
        if not short:
            return True
        vectors = self.embedder.embed(short)
        dense = layout.matrix @ self._adapted(vectors, s).T
        fused = _masked(_fused_columns(dense, _lexical_columns(layout, short), s), mask, layout)
        return self.small_talk.judge(self.embedder, vectors, fused.max(0))

    def _views(
        self,
        layout: Layout,
        plan: QueryPlan,
        s: SearchSettings,
        mask: npt.NDArray[np.bool_] | None,
        query_vector: Vectors | None,
    ) -> tuple[_View, _View, Vectors | None]:
        """The plan's scores as shown and floored, the scores items are ordered by (after
        feedback; the same view without it), and the plan's vectors before any adapter."""
        lexical = _lexical_columns(layout, plan.scored_texts)
        carry = _carry(layout, plan)
        if s.mode == "lexical":
            columns = _masked(_carried(lexical.copy(), carry), mask, layout)
            view = _combined(plan, columns, None, lexical, s)
            return view, view, None
        assert layout.matrix is not None
        raw = self._plan_vectors(plan, query_vector)
        vectors = _scored_vectors(plan, self._adapted(raw, s))
        dense = _carried(layout.matrix @ vectors.T, carry)
        columns = _masked(_fused_columns(dense, lexical, s), mask, layout)
        view = _combined(plan, columns, dense, lexical, s)
        # With the host's steps, feedback measured no gain (mcp-bench with plans 0.778 with
        # and without): it is not paid for there.
        if s.feedback <= 0 or plan.intents:
            return view, view, raw
        # Feedback orders the items; the score shown and floored stays the plan's own, so an
        # off-topic message (whose best items the feedback pulls closer) still selects nothing.
        moved = _carried(_with_feedback(layout, columns, vectors, s.feedback), carry)
        moved_columns = _fused_columns(moved, lexical, s)
        order = _combined(plan, _masked(moved_columns, mask, layout), moved, lexical, s)
        return view, order, raw

    def _plan_vectors(self, plan: QueryPlan, query_vector: Vectors | None) -> Vectors:
        """The plan's vectors in one batch (the message's is ``query_vector`` when given;
        earlier messages searched recently are not embedded again)."""
        assert self.embedder is not None
        texts = plan.texts
        known = {i: self._recent[t] for i, t in enumerate(texts) if i and t in self._recent}
        known |= {i: self._ahead[t] for i, t in enumerate(texts) if t in self._ahead}
        if query_vector is not None:
            known[0] = np.asarray(query_vector, dtype=np.float32)
        missing = [i for i in range(len(texts)) if i not in known]
        if missing:
            found = self.embedder.embed([texts[i] for i in missing])
            known |= {i: np.asarray(found[n], dtype=np.float32) for n, i in enumerate(missing)}
        out = np.vstack([known[i] for i in range(len(texts))]).astype(np.float32)
        self._remember(plan.message, out[0])
        return out

    def _remember(self, message: str, vector: npt.NDArray[np.float32]) -> None:
        self._recent[message] = vector
        self._recent.move_to_end(message)
        while len(self._recent) > _RECENT_VECTORS:
            self._recent.popitem(last=False)

    def _adapted(self, vectors: Vectors, s: SearchSettings) -> Vectors:
        if self.adapter is None or not s.query_adapter:
            return vectors
        return self.adapter.apply(vectors)

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


_RECENT_VECTORS = 256


# What an item the earlier turns chose or called gains under the conversation's column: a
# follow-up ("same for Oslo") most often wants the tool it just had.
_CARRY_BONUS = 0.2
# A follow-up most often stays with the server it was using ("read it" then "now write").
_SERVER_BONUS = 0.1
# The earlier messages' share in the conversation's vector (the message itself counts 1):
# the message leads, the past says what it is about.
_EARLIER_SHARE = 0.5


def _carry(layout: Layout, plan: QueryPlan) -> npt.NDArray[np.float32] | None:
    """What each chunk gains under the conversation: its item was carried, or is a tool of
    a carried tool's server (None: no conversation, or nothing carried)."""
    if not plan.context or not plan.carried:
        return None
    items = [layout.position[r] for r in plan.carried if r in layout.position]
    if not items:
        return None
    servers = {r.server for r in plan.carried if r.server is not None}
    per_item = np.zeros(len(layout.refs), dtype=np.float32)
    if servers and _SERVER_BONUS > 0:
        near = np.fromiter((r.server in servers for r in layout.refs), np.bool_, len(layout.refs))
        per_item[near] = _SERVER_BONUS
    per_item[items] = _CARRY_BONUS
    return per_item[layout.owner]


def _carried(columns: Columns, carry: npt.NDArray[np.float32] | None) -> Columns:
    """``columns`` with the carried chunks' score under the conversation raised (in place;
    the cosine, so the lift counts as closeness in meaning where floors ask for it)."""
    if carry is not None:
        columns[:, -1] += carry
    return columns


def _scored_vectors(plan: QueryPlan, vectors: Vectors) -> Vectors:
    """One vector per score column: the earlier messages' vectors and the message's,
    averaged into the conversation's (said together, as :attr:`QueryPlan.scored_texts`)."""
    if not plan.context:
        return vectors
    own = len(plan.texts) - len(plan.context)
    together = _EARLIER_SHARE * vectors[own:].mean(axis=0) + vectors[0]
    norm = float(np.linalg.norm(together))
    together = together / norm if norm > 0 else together
    return np.vstack([vectors[:own], together[None, :]]).astype(np.float32)


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


Columns = npt.NDArray[np.float32]
"""One score per chunk (rows) and plan text (columns)."""


def _lexical_columns(layout: Layout, texts: list[str]) -> Columns:
    """BM25 per chunk and text, each text's column scaled to [0, 1] by its best match."""
    out = np.zeros((len(layout.chunks), len(texts)), dtype=np.float32)
    for j, text in enumerate(texts):
        column = layout.lexical.scores(text)
        peak = float(column.max()) if column.size else 0.0
        out[:, j] = column / peak if peak > 0 else column
    return out


def _masked(columns: Columns, mask: npt.NDArray[np.bool_] | None, layout: Layout) -> Columns:
    if mask is not None:
        columns[~mask[layout.owner]] = -np.inf
    return columns


def _fused_columns(dense: Columns | None, lexical: Columns, s: SearchSettings) -> Columns:
    if dense is None or s.mode == "lexical":
        return lexical.copy()
    if s.mode == "dense":
        return dense.copy()
    return dense + s.lexical_weight * lexical


def _with_feedback(layout: Layout, columns: Columns, vectors: Vectors, share: float) -> Columns:
    """Pseudo-relevance feedback: each text's cosines recomputed with its vector moved
    ``share`` of the way toward the mean of its best three items' best chunks."""
    assert layout.matrix is not None
    moved = np.array(vectors, dtype=np.float32, copy=True)
    for j in range(columns.shape[1]):
        best = _best_item_chunks(columns[:, j], layout.owner, _FEEDBACK_ITEMS)
        if not best:
            continue
        toward = (1.0 - share) * vectors[j] + share * layout.matrix[best].mean(axis=0)
        norm = float(np.linalg.norm(toward))
        if norm > 0:
            moved[j] = toward / norm
    return (layout.matrix @ moved.T).astype(np.float32)


def _best_item_chunks(
    column: npt.NDArray[np.float32], owner: npt.NDArray[np.int64], count: int
) -> list[int]:
    """The best chunk of each of the ``count`` best items (allowed ones only)."""
    k = min(column.size, 32 * count)
    part = np.argpartition(-column, k - 1)[:k] if k < column.size else np.arange(column.size)
    chosen: list[int] = []
    seen: set[int] = set()
    for chunk in part[np.argsort(-column[part], kind="stable")]:
        if not np.isfinite(column[chunk]) or len(chosen) == count:
            break
        if int(owner[chunk]) not in seen:
            seen.add(int(owner[chunk]))
            chosen.append(int(chunk))
    return chosen


_FEEDBACK_ITEMS = 3


@dataclass(frozen=True)
class _View:
    """The plan's columns combined into one score per chunk, and which text gave it (-1:
    the message, ``_CONVERSATION``: the conversation's lift, else the intent's position)."""

    fused: npt.NDArray[np.float32]
    dense: npt.NDArray[np.float32] | None
    lexical: npt.NDArray[np.float32]
    source: npt.NDArray[np.int64]
    columns: Columns
    dense_columns: Columns | None
    first_intent: int
    steps: int = 0


_CONVERSATION = -2


def _combined(
    plan: QueryPlan,
    columns: Columns,
    dense: Columns | None,
    lexical: Columns,
    s: SearchSettings,
) -> _View:
    view = _own_view(plan, columns, dense, lexical, s.part_share)
    return _with_conversation(plan, view) if plan.context else view


def _own_view(
    plan: QueryPlan,
    columns: Columns,
    dense: Columns | None,
    lexical: Columns,
    part_share: float,
) -> _View:
    """The message's own score per chunk: its best intent, or the whole with its parts."""
    first = 1 + len(plan.parts)
    steps = len(plan.intents)
    rows = np.arange(columns.shape[0])
    if plan.intents:
        pick = first + np.argmax(columns[:, first : first + steps], axis=1)
        return _View(
            columns[rows, pick],
            dense[rows, pick] if dense is not None else None,
            lexical[rows, pick],
            (pick - first).astype(np.int64),
            columns,
            dense,
            first,
            steps,
        )
    source = np.full(columns.shape[0], -1, dtype=np.int64)
    if not plan.parts:
        whole_dense = dense[:, 0] if dense is not None else None
        return _View(columns[:, 0], whole_dense, lexical[:, 0], source, columns, dense, first)

    def mix(values: Columns) -> npt.NDArray[np.float32]:
        best_part: npt.NDArray[np.float32] = values[:, 1:first].max(axis=1)
        mixed = (values[:, 0] + part_share * best_part) / (1.0 + part_share)
        return np.asarray(mixed, dtype=np.float32)

    return _View(
        mix(columns),
        mix(dense) if dense is not None else None,
        mix(lexical),
        source,
        columns,
        dense,
        first,
    )


# A message whose own best item already scores this high is understood on its own: the
# conversation counts less (half at _SURE_SCORE, linearly from _UNSURE_SCORE).
_UNSURE_SCORE = 0.45
_SURE_SCORE = 0.65


def _with_conversation(plan: QueryPlan, view: _View) -> _View:
    """Each chunk lifted toward its score under the conversation (the last column) by the
    plan's weight, where that is higher than its own; never lowered, so what the message
    itself asks for keeps its place and floors judge the lifted score."""
    own = view.fused[np.isfinite(view.fused)]
    best = float(own.max()) if own.size else 0.0
    sure = min(1.0, max(0.0, (best - _UNSURE_SCORE) / (_SURE_SCORE - _UNSURE_SCORE)))
    w = plan.context_weight * (1.0 - 0.5 * sure)
    last = view.columns.shape[1] - 1

    def lift(base: npt.NDArray[np.float32], values: Columns) -> npt.NDArray[np.float32]:
        out = np.array(base, dtype=np.float32, copy=True)
        ok = np.isfinite(base)  # chunks of items left out stay -inf
        out[ok] = (1.0 - w) * base[ok] + w * values[ok, last]
        return out

    lifted = lift(view.fused, view.columns)
    pick = lifted > view.fused
    dense = None
    if view.dense is not None and view.dense_columns is not None:
        dense = np.where(pick, lift(view.dense, view.dense_columns), view.dense)
    return replace(
        view,
        fused=np.where(pick, lifted, view.fused).astype(np.float32),
        dense=dense,
        source=np.where(pick, _CONVERSATION, view.source).astype(np.int64),
    )


def _uncovered_steps(
    layout: Layout, view: _View, hits: list[SearchHit], min_score: MinScore
) -> list[SearchHit]:
    """For each intent none of ``hits`` came from, its best item when that clears the floor
    under the intent alone: no step with a relevant item is left with nothing."""
    covered = {h.intent for h in hits} | {None}
    chosen = {h.ref for h in hits}
    extra: list[SearchHit] = []
    for step in range(view.steps):
        if step in covered:
            continue
        column = view.columns[:, view.first_intent + step]
        best = _best_item_chunks(column, layout.owner, 1)
        if not best:
            continue
        item = int(layout.owner[best[0]])
        hit = _step_hit(layout, item, view, step)
        if hit.ref not in chosen and hit.clears(_floor(min_score, hit.ref.type)):
            extra.append(hit)
            chosen.add(hit.ref)
    return extra


def _step_hit(layout: Layout, item: int, view: _View, step: int) -> SearchHit:
    start, end = _span(layout, item, view.fused.size)
    col = view.first_intent + step
    dense = view.dense_columns
    return SearchHit(
        ref=layout.refs[item],
        score=float(view.columns[start:end, col].max()),
        similarity=float(dense[start:end, col].max()) if dense is not None else None,
        lexical=float(view.lexical[start:end].max()),
        intent=step,
    )


def _span(layout: Layout, item: int, size: int) -> tuple[int, int]:
    start = int(layout.starts[item])
    return start, int(layout.starts[item + 1]) if item + 1 < len(layout.starts) else size


def _hit(
    layout: Layout,
    item: int,
    view: _View,
    order: _View,
    lifted: npt.NDArray[np.bool_] | None = None,
) -> SearchHit:
    start, end = _span(layout, item, view.fused.size)
    best = start + int(np.argmax(order.fused[start:end]))
    source = int(order.source[best])
    return SearchHit(
        ref=layout.refs[item],
        score=float(view.fused[start:end].max()),
        similarity=float(view.dense[start:end].max()) if view.dense is not None else None,
        lexical=float(view.lexical[start:end].max()),
        intent=None if source < 0 else source,
        rank=float(order.fused[best]),
        conversation=source == _CONVERSATION,
        learned=bool(lifted is not None and lifted[start:end].any()),
    )
