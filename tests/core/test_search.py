from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from contextcore.catalog import Catalog
from contextcore.embedding import Vectors
from contextcore.embedding_cache import SqliteEmbeddingCache
from contextcore.errors import CatalogError, SearchInputError
from contextcore.items import Reference, Rule, Tool
from contextcore.search import SearchEngine, SearchResult, SearchSettings
from tests.support.hash_embedder import HashEmbedder


def test_the_item_sharing_the_query_words_ranks_first(engine: SearchEngine) -> None:
    result = engine.search("current time in a timezone")
    assert result.mode == "hybrid"
    assert result.hits[0].ref.key == "tool:time/get_current_time"


def test_similarity_score_is_the_cosine_and_score_adds_the_lexical_part() -> None:
    catalog = Catalog([Rule("alpha", "alpha beta"), Rule("gamma", "delta epsilon")])
    engine = SearchEngine(catalog, HashEmbedder(), settings=SearchSettings(lexical_weight=0.5))
    hit = engine.search("alpha beta", top_n=1).hits[0]
    embedder = HashEmbedder()
    expected = float(embedder.embed(["alpha\n\nalpha beta"])[0] @ embedder.embed(["alpha beta"])[0])
    assert hit.similarity == pytest.approx(expected, abs=1e-5)
    assert hit.score == pytest.approx(hit.similarity + 0.5 * hit.lexical, abs=1e-5)
    assert hit.lexical == pytest.approx(1.0)


def test_top_n_limits_items_and_include_score_adds_strong_matches_past_it() -> None:
    catalog = Catalog([Rule(f"r{i}", "shared words here") for i in range(6)])
    engine = SearchEngine(catalog, HashEmbedder())
    assert len(engine.search("shared words here", top_n=2, include_score=1.0).hits) == 2
    assert len(engine.search("shared words here", top_n=2, include_score=0.5).hits) == 6


def test_top_k_counts_chunks_so_items_with_many_matching_chunks_crowd_out_others() -> None:
    long_text = "\n\n".join("deploy rollback " + "y" * 480 for _ in range(5))
    catalog = Catalog([Reference("long", long_text), Rule("short", "deploy")])
    engine = SearchEngine(catalog, HashEmbedder())
    few = engine.search("deploy rollback", top_k=2, top_n=5, include_score=1.0)
    many = engine.search("deploy rollback", top_k=20, top_n=5, include_score=1.0)
    assert len(few.hits) < len(many.hits) == 2


def test_type_filters_and_unknown_types(engine: SearchEngine) -> None:
    hits = engine.search("orders", types=["reference"], include_score=1.0).hits
    assert hits and all(h.ref.type == "reference" for h in hits)
    with pytest.raises(CatalogError, match="unknown item type 'widget'") as err:
        engine.search("orders", types=["widget"])
    assert err.value.field == "types"


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"query": ""}, "query"),
        ({"query": "   "}, "query"),
        ({"query": "x", "top_n": 0}, "top_n"),
        ({"query": "x", "top_k": 0}, "top_k"),
        ({"query": "x", "include_score": 1.2}, "include_score"),
        ({"query": "x", "include_score": -0.1}, "include_score"),
        ({"query": "x", "mode": "fuzzy"}, "mode"),
    ],
)
def test_bad_search_input_names_the_field(engine: SearchEngine, kwargs: dict, field: str) -> None:
    with pytest.raises(SearchInputError) as err:
        engine.search(**kwargs)
    assert err.value.field == field


def test_overlong_queries_are_truncated_with_a_warning(engine: SearchEngine) -> None:
    result = engine.search("time " * 30_000)
    assert result.hits and "truncated to the first 100000" in result.warnings[0]


def test_indexing_is_just_in_time_in_one_batch_and_only_for_changes(catalog: Catalog) -> None:
    embedder = HashEmbedder()
    engine = SearchEngine(catalog, embedder)
    assert embedder.calls == []
    engine.search("time")
    assert len(embedder.calls) == 2  # one batch for all items, one for the query
    engine.search("git")
    assert len(embedder.calls) == 3
    catalog.upsert(Rule("testing", "Use hypothesis for properties.", "How to test code"))
    engine.search("hypothesis")
    assert embedder.calls[3] == 1  # only the changed item's single chunk is re-embedded
    assert engine.search("hypothesis", types=["rule"]).hits[0].ref.name == "testing"


def test_the_disk_cache_spares_a_restart_any_embedding(tmp_path: Path, catalog: Catalog) -> None:
    path = tmp_path / "emb.sqlite3"
    first = SearchEngine(catalog, HashEmbedder(), cache=SqliteEmbeddingCache(path))
    assert first.index().embedded > 0
    embedder = HashEmbedder()
    second = SearchEngine(catalog, embedder, cache=SqliteEmbeddingCache(path))
    stats = second.index()
    assert stats.embedded == 0 and stats.from_cache == stats.chunks
    assert embedder.calls == []
    a, b = first.search("time"), second.search("time")
    assert [h.ref for h in a.hits] == [h.ref for h in b.hits]


def test_a_missing_model_falls_back_to_lexical_search_and_says_so(catalog: Catalog) -> None:
    engine = SearchEngine(catalog, HashEmbedder(fail=True))
    result = engine.search("current time timezone")
    assert result.mode == "lexical"
    assert "semantic search unavailable" in result.warnings[0]
    assert result.hits[0].ref.name == "get_current_time"
    assert result.hits[0].similarity is None and 0 < result.hits[0].similarity_score <= 1


def test_no_embedder_configured_is_lexical_only(catalog: Catalog) -> None:
    result = SearchEngine(catalog, None).search("commit log")
    assert result.mode == "lexical" and result.hits[0].ref.name == "git_log"


def test_disabled_items_are_never_found() -> None:
    catalog = Catalog([Rule("hidden", "secret sauce", enabled=False), Rule("shown", "other")])
    hits = SearchEngine(catalog, HashEmbedder()).search("secret sauce", include_score=0.0).hits
    assert [h.ref.name for h in hits] == ["shown"]


def test_hybrid_ranking_is_deterministic(engine: SearchEngine) -> None:
    runs = [
        [(h.ref, h.score) for h in engine.search("show commit log status").hits] for _ in range(3)
    ]
    assert runs[0] == runs[1] == runs[2]


def test_an_empty_catalog_returns_no_hits() -> None:
    assert SearchEngine(Catalog(), HashEmbedder()).search("anything").hits == ()


def test_query_vector_can_be_supplied(engine: SearchEngine) -> None:
    vec = HashEmbedder().embed(["git status"])[0]
    a = engine.search("git status", query_vector=vec)
    b = engine.search("git status")
    assert [h.ref for h in a.hits] == [h.ref for h in b.hits]
    assert np.isclose(a.hits[0].score, b.hits[0].score)


def test_tools_are_searched_by_parameter_descriptions() -> None:
    catalog = Catalog(
        [
            Tool(
                "t",
                "convert",
                "Convert",
                {"properties": {"zone": {"description": "IANA timezone"}}},
            ),
            Tool("t", "other", "Unrelated thing"),
        ]
    )
    assert (
        SearchEngine(catalog, HashEmbedder()).search("IANA timezone").hits[0].ref.name == "convert"
    )


def test_mode_filters_follow_include_changes_without_re_embedding() -> None:
    catalog = Catalog([Rule("deploy", "roll back a deploy", include="agent"), Rule("x", "other")])
    embedder = HashEmbedder()
    engine = SearchEngine(catalog, embedder)
    assert engine.search("roll back", modes=["agent"]).hits[0].ref.name == "deploy"
    calls = len(embedder.calls)
    catalog.upsert(Rule("deploy", "roll back a deploy", include="manual"))
    hits = engine.search("roll back", modes=["agent"], include_score=0.0).hits
    assert "deploy" not in [h.ref.name for h in hits]
    assert len(embedder.calls) == calls + 1  # only the query: the item kept its vectors


def test_excluded_items_are_never_returned(engine: SearchEngine) -> None:
    first = engine.search("current time in a timezone").hits[0].ref
    again = engine.search("current time in a timezone", exclude={first}, include_score=0.0)
    assert first not in [h.ref for h in again.hits]


def test_a_refreshed_server_tool_list_re_embeds_only_the_changed_tools() -> None:
    tools = [Tool("srv", f"t{i}", f"tool number {i} does thing {i}") for i in range(5)]
    catalog = Catalog(tools)
    embedder = HashEmbedder()
    engine = SearchEngine(catalog, embedder)
    engine.index()
    assert embedder.calls == [5]
    changed = [*tools[:4], Tool("srv", "t4", "tool number 4 now does something else")]
    catalog.replace_server_tools("srv", changed)
    engine.index()
    assert embedder.calls == [5, 1]
    catalog.replace_server_tools("srv", changed)  # same list again: nothing to embed
    engine.index()
    assert embedder.calls == [5, 1]


class _MeetingEmbedder(HashEmbedder):
    """Embeds only after meeting a second embedding thread (or giving up): two embeddings
    running at once both get through the barrier."""

    def __init__(self) -> None:
        super().__init__()
        self.barrier = threading.Barrier(2, timeout=0.5)
        self.met = 0

    def embed(self, texts: Sequence[str]) -> Vectors:
        try:
            self.barrier.wait()
            self.met += 1
        except threading.BrokenBarrierError:
            pass
        return super().embed(texts)


def test_searches_from_several_threads_never_embed_at_the_same_time(catalog: Catalog) -> None:
    embedder = _MeetingEmbedder()
    engine = SearchEngine(catalog, embedder)
    results: list[SearchResult] = []
    threads = [
        threading.Thread(target=lambda q=q: results.append(engine.search(q)))
        for q in ("how to test code", "commit messages")
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=10)
    assert not any(t.is_alive() for t in threads)
    assert embedder.met == 0
    assert len(results) == 2 and all(r.hits for r in results)
