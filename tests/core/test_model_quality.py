"""Integration and quality tests with the real embedding model (prepared by scripts/setup.sh)."""

from __future__ import annotations

from pathlib import Path

import pytest
from context_broker.server.embedding import build_embedder
from context_broker.server.settings import AppConfig

from contextcore.catalog import Catalog
from contextcore.loaders import load_catalog_json
from contextcore.search import SearchEngine
from contextcore.services.evaluation import evaluate, load_queries

SETS = Path(__file__).resolve().parents[3] / "shared" / "benchmarks" / "metatool"

pytestmark = pytest.mark.model


@pytest.fixture(scope="module")
def metatool() -> SearchEngine:
    embedder = build_embedder(AppConfig())
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


def test_big_batches_are_embedded_in_a_child_process_with_identical_vectors(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    import numpy as np
    from context_broker.server.embedding import FastEmbedEmbedder, resolve_model_dir
    from context_broker.server.embedding import child as bulk_embed

    model_dir = resolve_model_dir(AppConfig())
    texts = [f"roll back deploy number {i} of the orders service" for i in range(40)]
    in_child = FastEmbedEmbedder(model_dir=model_dir, bulk_threshold=10)
    here = FastEmbedEmbedder(model_dir=model_dir, bulk_threshold=None)
    calls: list[int] = []
    real = bulk_embed.embed_in_child

    def spy(settings: dict, batch: list[str], *, timeout: float) -> np.ndarray:
        calls.append(len(batch))
        return real(settings, batch, timeout=timeout)

    monkeypatch.setattr(bulk_embed, "embed_in_child", spy)
    assert np.allclose(in_child.embed(texts), here.embed(texts), atol=1e-6)
    assert calls == [40]
    assert "embedding in this process instead" not in caplog.text  # the child did the work
    in_child.embed(texts[:5])  # small batches stay in this process
    assert calls == [40]

    monkeypatch.setattr(bulk_embed, "embed_in_child", real)
    monkeypatch.setattr(bulk_embed.sys, "executable", "/nonexistent/python")
    with caplog.at_level("WARNING"):
        vectors = in_child.embed(texts)
    assert np.allclose(vectors, here.embed(texts), atol=1e-6)
    assert "embedding in this process instead" in caplog.text
