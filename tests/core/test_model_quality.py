"""Integration and quality tests with the real embedding model (prepared by scripts/setup.sh)."""

from __future__ import annotations

from pathlib import Path

import pytest

from contextcore.catalog import Catalog
from contextcore.config import BrokerConfig
from contextcore.evaluation import evaluate, load_queries
from contextcore.factory import build_embedder
from contextcore.loaders import load_catalog_json
from contextcore.search import SearchEngine

SETS = Path(__file__).resolve().parents[3] / "shared" / "benchmarks" / "metatool"

pytestmark = pytest.mark.model


@pytest.fixture(scope="module")
def metatool() -> SearchEngine:
    embedder = build_embedder(BrokerConfig())
    assert embedder is not None
    engine = SearchEngine(Catalog(load_catalog_json(SETS / "catalog.json")), embedder)
    engine.index()
    assert embedder.status().source == "local directory", embedder.status()
    return engine


def test_the_real_model_finds_the_obvious_tool(metatool: SearchEngine) -> None:
    result = metatool.search("What is the weather forecast for tomorrow in Paris?", top_n=5)
    assert result.mode == "hybrid" and not result.warnings
    assert any("weather" in h.ref.name.lower() for h in result.hits[:3])
    assert all(-1.0 <= (h.similarity or 0) <= 1.0 for h in result.hits)


@pytest.mark.parametrize(
    ("name", "limit"), [("queries-multi.jsonl", None), ("queries-single.jsonl", 600)]
)
def test_hybrid_is_at_least_as_good_as_dense_and_lexical(
    metatool: SearchEngine, name: str, limit: int | None
) -> None:
    queries = load_queries(SETS / name)[:limit]
    score = {
        mode: evaluate(metatool, queries, ks=(10,), mode=mode).metrics["ndcg@10"]
        for mode in ("dense", "lexical", "hybrid")
    }
    assert score["hybrid"] >= max(score["dense"], score["lexical"]), score
    if name == "queries-multi.jsonl":
        assert score["hybrid"] >= score["dense"] + 0.03, score
