"""Retrieval evaluation: rank each query's items with the serving code and score the ranking."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ..catalog import Catalog
from ..errors import CatalogError, SearchInputError
from ..items import ItemRef
from ..metrics import completeness_at, mrr, ndcg_at, recall_at
from ..query_plan import check_intents
from ..search import SearchEngine

__all__ = [
    "EvalQuery",
    "EvalReport",
    "QueryMisses",
    "QueryResult",
    "evaluate",
    "load_queries",
    "query_misses",
]


@dataclass(frozen=True)
class EvalQuery:
    """One query and the keys of the items that should be found for it."""

    query: str
    gold: frozenset[str]
    intents: tuple[str, ...] = ()
    """The host's plan for the query, passed to search exactly as a host passes it."""


@dataclass(frozen=True)
class QueryMisses:
    """One query's gold items outside its top k: their rank (``None``: not ranked at all)
    and the items ranked in the top k instead."""

    query: str
    missing: dict[str, int | None]
    top: list[str]


@dataclass(frozen=True)
class QueryResult:
    """One query's outcome: its gold keys and the item keys search ranked for it, best
    first (as many as the report's largest cut-off)."""

    query: str
    gold: frozenset[str]
    ranked: list[str]


@dataclass(frozen=True)
class EvalReport:
    """Averaged metrics; ``missing_gold`` lists gold keys absent from the catalog;
    ``misses`` (when asked for) the queries whose gold items are not all in the top
    ``misses_at``; ``results`` each query's ranking, in query order (not in ``to_dict``)."""

    mode: str
    n_queries: int
    n_items: int
    metrics: dict[str, float]
    missing_gold: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    misses: list[QueryMisses] | None = None
    misses_at: int | None = None
    results: list[QueryResult] = field(default_factory=list)

    def to_dict(self, *, rankings: bool = False) -> dict[str, Any]:
        """The report as JSON; ``rankings`` adds each query's ranked keys."""
        out: dict[str, Any] = {
            "mode": self.mode,
            "n_queries": self.n_queries,
            "n_items": self.n_items,
            "metrics": self.metrics,
            "missing_gold": self.missing_gold,
            "warnings": self.warnings,
        }
        if self.misses is not None:
            out["misses_at"] = self.misses_at
            out["misses"] = [asdict(m) for m in self.misses]
        if rankings:
            out["rankings"] = [{"query": r.query, "ranked": r.ranked} for r in self.results]
        return out


def load_queries(path: Path) -> list[EvalQuery]:
    """Read ``{"query": ..., "gold": [keys]}`` lines; blank lines are skipped."""
    out: list[EvalQuery] = []
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise CatalogError(f"cannot read queries {str(path)!r}: {exc.strerror}") from exc
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise CatalogError(f"{path}:{number}: not valid JSON: {exc}") from exc
        query, gold = row.get("query"), row.get("gold")
        if not isinstance(query, str) or not query.strip():
            raise CatalogError(f"{path}:{number}: 'query' must be a non-empty string")
        if not isinstance(gold, list) or not gold or not all(isinstance(g, str) for g in gold):
            raise CatalogError(f"{path}:{number}: 'gold' must be a non-empty list of item keys")
        for key in gold:
            ItemRef.parse(key)
        try:
            intents = check_intents(row.get("intents"))
        except SearchInputError as exc:
            raise CatalogError(f"{path}:{number}: {exc.message}") from exc
        out.append(EvalQuery(query, frozenset(gold), intents))
    if not out:
        raise CatalogError(f"{path}: no queries found")
    return out


Progress = Callable[[str], None]


def _indexed(engine: SearchEngine, progress: Progress) -> int:
    """Load the model and index every item now, saying so; returns the number of chunks."""
    n_items = len(list(engine.catalog.enabled()))
    progress(f"indexing {n_items} items (loading the model, embedding what is not cached)")
    started = time.monotonic()
    stats = engine.index()
    progress(
        f"indexed {stats.items} items in {stats.chunks} chunks ({stats.embedded} embedded, "
        f"{stats.from_cache} from the cache) in {time.monotonic() - started:.1f} s"
    )
    return max(stats.chunks, 1)


def _rank_served(
    engine: SearchEngine, queries: Sequence[EvalQuery], *, top_n: int, progress: Progress
) -> tuple[list[list[str]], str, list[str]]:
    """Each query's items exactly as ``search_context_items`` serves them (its defaults,
    ``top_n`` items, the query's intents), the mode search used, and its warnings."""
    if engine.settings.mode != "lexical":
        _indexed(engine, progress)
    rankings: list[list[str]] = []
    used_mode = engine.settings.mode
    warnings: list[str] = []
    step = max(len(queries) // 10, 25)
    with engine.embedded_ahead((q.query, q.intents) for q in queries) as embedded:
        if embedded:
            progress(f"embedded the queries' {embedded} texts (messages, parts, intents)")
        for i, q in enumerate(queries):
            result = engine.search(q.query, top_n=top_n, intents=q.intents)
            used_mode = result.mode
            warnings.extend(w for w in result.warnings if w not in warnings)
            rankings.append([h.ref.key for h in result.hits])
            if (i + 1) % step == 0 or i + 1 == len(queries):
                progress(f"ranked {i + 1}/{len(queries)} queries")
    return rankings, "served" if used_mode == "hybrid" else f"served ({used_mode})", warnings


def _rank_all(
    engine: SearchEngine,
    queries: Sequence[EvalQuery],
    *,
    top_n: int,
    mode: str,
    progress: Progress,
) -> tuple[list[list[str]], str, list[str]]:
    """Each query's ranked item keys by one plain retriever (the message alone, every chunk
    considered, none of the serving levers), the mode search used, and its warnings."""
    if mode == "served":
        return _rank_served(engine, queries, top_n=top_n, progress=progress)
    chunks = max(len(list(engine.catalog.enabled())), 1) * 64
    if mode != "lexical":
        chunks = _indexed(engine, progress)
        progress(f"embedding {len(queries)} queries")
    vectors = engine.embed_queries([q.query for q in queries]) if mode != "lexical" else None
    rankings: list[list[str]] = []
    used_mode = mode
    warnings: list[str] = []
    step = max(len(queries) // 10, 25)  # small sets: one line at the end
    for i, q in enumerate(queries):
        result = engine.search(
            q.query,
            top_n=top_n,
            top_k=chunks,
            mode=mode,
            apply_include_score=False,
            query_vector=vectors[i] if vectors is not None else None,
            plain=True,
        )
        used_mode = result.mode
        warnings.extend(w for w in result.warnings if w not in warnings)
        rankings.append([h.ref.key for h in result.hits])
        if (i + 1) % step == 0 or i + 1 == len(queries):
            progress(f"ranked {i + 1}/{len(queries)} queries")
    return rankings, used_mode, warnings


def query_misses(results: Sequence[QueryResult], k: int) -> list[QueryMisses]:
    """The queries whose gold items are not all in their top ``k``, in query order; a
    missing item's rank is ``None`` when it was not ranked at all (or ranked past the
    report's largest cut-off)."""
    out: list[QueryMisses] = []
    for r in results:
        top = r.ranked[:k]
        missing = sorted(g for g in r.gold if g not in top)
        if missing:
            ranks = {key: r.ranked.index(key) + 1 if key in r.ranked else None for key in missing}
            out.append(QueryMisses(r.query, ranks, top))
    return out


def evaluate(
    engine: SearchEngine,
    queries: Sequence[EvalQuery],
    *,
    ks: Sequence[int] = (1, 5, 10),
    mode: str = "served",
    misses_at: int | None = None,
    rank_depth: int = 0,
    progress: Progress | None = None,
) -> EvalReport:
    """Rank each query's items and average recall@k, ndcg@k, comp@k and mrr.

    ``mode`` ``"served"`` ranks exactly as ``search_context_items`` serves (its defaults,
    ``top_n`` = the largest k, the query's intents); ``"hybrid"``, ``"dense"`` and
    ``"lexical"`` rank by that retriever alone (the message only, every chunk considered,
    no include_score cut-off, none of the serving levers), for comparison.

    ``misses_at`` lists, per query, the gold items not in its top ``misses_at``;
    ``rank_depth`` keeps at least that many ranked keys per query in ``results`` (the
    metrics stay computed on the top ``max(ks)``, mrr included);
    ``progress`` receives a line per step (indexing, embedding, every tenth of the queries).
    """
    if not ks or any(k < 1 for k in ks):
        raise CatalogError(f"k values must be integers >= 1, got {list(ks)!r}", field="k")
    if misses_at is not None and misses_at < 1:
        raise CatalogError(f"--misses must be >= 1, got {misses_at!r}", field="misses")
    catalog: Catalog = engine.catalog
    known = {item.ref.key for item in catalog.enabled()}
    missing = sorted({g for q in queries for g in q.gold if g not in known})
    top_n = max(*ks, misses_at or 1, rank_depth)
    cut = max(ks)
    rankings, used_mode, warnings = _rank_all(
        engine, queries, top_n=top_n, mode=mode, progress=progress or (lambda _line: None)
    )
    sums: dict[str, float] = {}
    for q, ranked in zip(queries, rankings, strict=True):
        gold = set(q.gold)
        for k in ks:
            sums[f"recall@{k}"] = sums.get(f"recall@{k}", 0.0) + recall_at(ranked, gold, k)
            sums[f"ndcg@{k}"] = sums.get(f"ndcg@{k}", 0.0) + ndcg_at(ranked, gold, k)
            sums[f"comp@{k}"] = sums.get(f"comp@{k}", 0.0) + completeness_at(ranked, gold, k)
        sums["mrr"] = sums.get("mrr", 0.0) + mrr(ranked[:cut], gold)
    metrics = {name: round(total / len(queries), 4) for name, total in sorted(sums.items())}
    results = [
        QueryResult(q.query, q.gold, ranked) for q, ranked in zip(queries, rankings, strict=True)
    ]
    misses = query_misses(results, misses_at) if misses_at is not None else None
    return EvalReport(
        used_mode,
        len(queries),
        len(known),
        metrics,
        missing,
        warnings,
        misses,
        misses_at,
        results,
    )
