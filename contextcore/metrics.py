"""Retrieval metrics over ranked item keys: recall@k, nDCG@k, comp@k and MRR."""

from __future__ import annotations

import math
from collections.abc import Sequence

__all__ = ["completeness_at", "mrr", "ndcg_at", "recall_at"]


def recall_at(ranked: Sequence[str], gold: set[str], k: int) -> float:
    """Share of the gold set found in the top ``k``."""
    if not gold:
        return 0.0
    return len(gold.intersection(ranked[:k])) / len(gold)


def ndcg_at(ranked: Sequence[str], gold: set[str], k: int) -> float:
    """Binary-relevance nDCG of the top ``k``."""
    if not gold:
        return 0.0
    dcg = sum(1.0 / math.log2(i + 2) for i, key in enumerate(ranked[:k]) if key in gold)
    ideal = sum(1.0 / math.log2(i + 2) for i in range(min(len(gold), k)))
    return dcg / ideal


def completeness_at(ranked: Sequence[str], gold: set[str], k: int) -> float:
    """1.0 when the whole gold set is in the top ``k``, else 0.0."""
    return 1.0 if gold and gold.issubset(ranked[:k]) else 0.0


def mrr(ranked: Sequence[str], gold: set[str]) -> float:
    """Reciprocal rank of the first gold item (0 when none is ranked)."""
    for i, key in enumerate(ranked):
        if key in gold:
            return 1.0 / (i + 1)
    return 0.0
