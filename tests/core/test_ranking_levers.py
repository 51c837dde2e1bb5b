"""Each lever the broker serves for a host that sends no plan earns its place: measured as
served (``evaluate(mode="served")``) with the real model, the lever on ranks the development
set better than the same ranking with only that lever off."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from context_broker.server.embedding import build_embedder
from context_broker.server.settings import AppConfig

from contextcore.catalog import Catalog
from contextcore.loaders import load_catalog_json
from contextcore.query_adapter import load_query_adapter
from contextcore.search import SearchEngine, SearchSettings
from contextcore.services.evaluation import EvalQuery, evaluate, load_queries

SHARED = Path(__file__).resolve().parents[3] / "shared" / "benchmarks"

pytestmark = pytest.mark.model


class _Remembered:
    """The real embedder, each text embedded once for the whole module."""

    def __init__(self) -> None:
        embedder = build_embedder(AppConfig())
        assert embedder is not None
        self._embedder = embedder
        self.model_name = embedder.model_name
        self._seen: dict[str, np.ndarray] = {}

    def __getattr__(self, name: str) -> Any:
        return getattr(self._embedder, name)

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        todo = [t for t in dict.fromkeys(texts) if t not in self._seen]
        if todo:
            self._seen.update(zip(todo, self._embedder.embed(todo), strict=True))
        return np.stack([self._seen[t] for t in texts]).astype(np.float32)


@pytest.fixture(scope="module")
def embedder() -> _Remembered:
    return _Remembered()


def _served(embedder: _Remembered, folder: str, queries: list[EvalQuery], **settings: Any) -> float:
    catalog = Catalog(load_catalog_json(SHARED / folder / "catalog.json"))
    engine = SearchEngine(catalog, embedder, adapter=load_query_adapter())  # type: ignore[arg-type]
    engine.settings = replace(SearchSettings(), **settings)
    return evaluate(engine, queries, ks=(10,), mode="served").metrics["ndcg@10"]


def _multi() -> list[EvalQuery]:
    return load_queries(SHARED / "metatool" / "queries-multi.jsonl")


def _mcp_bench() -> list[EvalQuery]:
    return load_queries(SHARED / "mcp-bench" / "queries.jsonl")


def test_splitting_the_message_into_its_parts_ranks_better(embedder: _Remembered) -> None:
    queries = _multi()
    on = _served(embedder, "metatool", queries, part_share=0.5, feedback=0.0, query_adapter=False)
    off = _served(embedder, "metatool", queries, part_share=0.0, feedback=0.0, query_adapter=False)
    assert on > off + 0.01, (on, off)


def test_pseudo_relevance_feedback_ranks_better(embedder: _Remembered) -> None:
    queries = _mcp_bench()
    on = _served(embedder, "mcp-bench", queries, feedback=0.5, query_adapter=False)
    off = _served(embedder, "mcp-bench", queries, feedback=0.0, query_adapter=False)
    assert on > off + 0.01, (on, off)


def test_the_query_adapter_ranks_better(embedder: _Remembered) -> None:
    for folder, queries in (("metatool", _multi()), ("mcp-bench", _mcp_bench())):
        on = _served(embedder, folder, queries, query_adapter=True)
        off = _served(embedder, folder, queries, query_adapter=False)
        assert on > off + 0.005, (folder, on, off)
