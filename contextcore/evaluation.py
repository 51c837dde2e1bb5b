"""Retrieval evaluation: rank each query's items with the serving code and score the ranking."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .catalog import Catalog
from .errors import CatalogError
from .items import ItemRef
from .metrics import completeness_at, mrr, ndcg_at, recall_at
from .search import SearchEngine

__all__ = ["EvalQuery", "EvalReport", "evaluate", "load_queries"]


@dataclass(frozen=True)
class EvalQuery:
    """One query and the keys of the items that should be found for it."""

    query: str
    gold: frozenset[str]


@dataclass(frozen=True)
class EvalReport:
    """Averaged metrics; ``missing_gold`` lists gold keys absent from the catalog."""

    mode: str
    n_queries: int
    n_items: int
    metrics: dict[str, float]
    missing_gold: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "mode": self.mode,
            "n_queries": self.n_queries,
            "n_items": self.n_items,
            "metrics": self.metrics,
            "missing_gold": self.missing_gold,
            "warnings": self.warnings,
        }


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
        out.append(EvalQuery(query, frozenset(gold)))
    if not out:
        raise CatalogError(f"{path}: no queries found")
    return out


def evaluate(
    engine: SearchEngine,
    queries: Sequence[EvalQuery],
    *,
    ks: Sequence[int] = (1, 5, 10),
    mode: str = "hybrid",
) -> EvalReport:
    """Rank every enabled catalog item for each query (top_n = largest k, no include_score
    cut-off, every chunk considered) and average recall@k, ndcg@k, comp@k and mrr."""
    if not ks or any(k < 1 for k in ks):
        raise CatalogError(f"k values must be integers >= 1, got {list(ks)!r}", field="k")
    catalog: Catalog = engine.catalog
    known = {item.ref.key for item in catalog.enabled()}
    missing = sorted({g for q in queries for g in q.gold if g not in known})
    top_n = max(ks)
    chunks = max(engine.index().chunks, 1) if mode != "lexical" else max(len(known), 1) * 64
    sums: dict[str, float] = {}
    used_mode = mode
    warnings: list[str] = []
    vectors = engine.embed_queries([q.query for q in queries]) if mode != "lexical" else None
    for i, q in enumerate(queries):
        result = engine.search(
            q.query,
            top_n=top_n,
            top_k=chunks,
            mode=mode,
            apply_include_score=False,
            query_vector=vectors[i] if vectors is not None else None,
        )
        used_mode = result.mode
        warnings.extend(w for w in result.warnings if w not in warnings)
        ranked = [h.ref.key for h in result.hits]
        gold = set(q.gold)
        for k in ks:
            sums[f"recall@{k}"] = sums.get(f"recall@{k}", 0.0) + recall_at(ranked, gold, k)
            sums[f"ndcg@{k}"] = sums.get(f"ndcg@{k}", 0.0) + ndcg_at(ranked, gold, k)
            sums[f"comp@{k}"] = sums.get(f"comp@{k}", 0.0) + completeness_at(ranked, gold, k)
        sums["mrr"] = sums.get("mrr", 0.0) + mrr(ranked, gold)
    metrics = {name: round(total / len(queries), 4) for name, total in sorted(sums.items())}
    return EvalReport(used_mode, len(queries), len(known), metrics, missing, warnings)
