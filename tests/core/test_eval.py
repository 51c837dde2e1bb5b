from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from contextcore.catalog import Catalog
from contextcore.errors import CatalogError
from contextcore.items import Rule, Tool
from contextcore.metrics import completeness_at, mrr, ndcg_at, recall_at
from contextcore.search import SearchEngine
from contextcore.services.evaluation import EvalQuery, evaluate, load_queries
from tests.support.hash_embedder import HashEmbedder


def test_metrics_on_a_known_ranking() -> None:
    ranked = ["a", "x", "b", "y"]
    gold = {"a", "b"}
    assert recall_at(ranked, gold, 1) == 0.5
    assert completeness_at(ranked, gold, 2) == 0.0 and completeness_at(ranked, gold, 3) == 1.0
    assert mrr(["x", "a"], gold) == 0.5 and mrr(["x"], gold) == 0.0
    ideal = 1 + 1 / math.log2(3)
    assert ndcg_at(ranked, gold, 3) == pytest.approx((1 + 1 / math.log2(4)) / ideal)


def engine() -> SearchEngine:
    catalog = Catalog(
        [
            Tool("time", "get_current_time", "Get the current time in a timezone"),
            Tool("git", "git_log", "Show the commit log"),
            Rule("testing", "Write tests with pytest"),
        ]
    )
    return SearchEngine(catalog, HashEmbedder())


def test_evaluate_reports_every_k_and_missing_gold_keys() -> None:
    queries = [
        EvalQuery("current time", frozenset({"tool:time/get_current_time"})),
        EvalQuery("commit log", frozenset({"tool:git/git_log", "tool:git/ghost"})),
    ]
    report = evaluate(engine(), queries, ks=(1, 2))
    assert set(report.metrics) == {
        "recall@1",
        "recall@2",
        "ndcg@1",
        "ndcg@2",
        "comp@1",
        "comp@2",
        "mrr",
    }
    assert report.metrics["mrr"] == 1.0
    assert report.metrics["recall@1"] == 0.75
    assert report.missing_gold == ["tool:git/ghost"]
    assert report.n_queries == 2 and report.n_items == 3


def test_query_files_are_validated(tmp_path: Path) -> None:
    path = tmp_path / "q.jsonl"
    path.write_text('{"query": "x", "gold": []}\n')
    with pytest.raises(CatalogError, match="q.jsonl:1: 'gold'"):
        load_queries(path)
    path.write_text('{"query": "x", "gold": ["nonsense"]}\n')
    with pytest.raises(CatalogError, match="malformed item key"):
        load_queries(path)


def test_the_eval_command_prints_one_json_object(tmp_path: Path) -> None:
    catalog = {
        "servers": {
            "time": {
                "tools": [
                    {"name": "get_current_time", "description": "Get the current time"},
                    {"name": "convert_time", "description": "Convert between timezones"},
                ]
            }
        }
    }
    (tmp_path / "c.json").write_text(json.dumps(catalog))
    (tmp_path / "q.jsonl").write_text(
        json.dumps({"query": "convert timezones", "gold": ["tool:time/convert_time"]}) + "\n"
    )
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "context_broker.server.cli",
            "eval",
            "--catalog",
            str(tmp_path / "c.json"),
            "--queries",
            str(tmp_path / "q.jsonl"),
            "--mode",
            "lexical",
            "--k",
            "1,2",
            "--json",
        ],
        capture_output=True,
        text=True,
        check=True,
        cwd=Path(__file__).resolve().parents[2],
    )
    report = json.loads(out.stdout)
    assert report["mode"] == "lexical" and report["n_queries"] == 1 and report["n_items"] == 2
    assert report["metrics"]["recall@1"] == 1.0 and set(report["metrics"]) >= {
        "ndcg@2",
        "comp@2",
        "mrr",
    }


def test_a_served_evaluation_embeds_its_queries_in_one_batch_and_ranks_as_search_serves() -> None:
    queries = [
        EvalQuery(
            "what time is it in Tokyo, and show me the commit log", frozenset({"tool:git/git_log"})
        ),
        EvalQuery("current time", frozenset({"tool:time/get_current_time"})),
        EvalQuery("log", frozenset({"tool:git/git_log"}), ("show the commit log", "write tests")),
    ]
    served, one_by_one = engine(), engine()
    served.index()
    one_by_one.index()
    before = len(served.embedder.calls), len(one_by_one.embedder.calls)  # type: ignore[union-attr]
    report = evaluate(served, queries, ks=(3,), rank_depth=3)
    batches = served.embedder.calls[before[0] :]  # type: ignore[union-attr]
    for q, result in zip(queries, report.results, strict=True):
        hits = one_by_one.search(q.query, top_n=3, intents=q.intents).hits
        assert result.ranked == [h.ref.key for h in hits]
    each = one_by_one.embedder.calls[before[1] :]  # type: ignore[union-attr]
    assert len(each) == len(queries) and batches == [sum(each)]
    with served.embedded_ahead([("current time", ())]) as count:
        assert count == 1
    assert served.search("current time").hits  # what was embedded ahead is gone after the block


def test_queries_embedded_together_come_back_in_the_order_given() -> None:
    texts = ["a much longer text about the commit log of a repository", "time", "commit log"]
    search = engine()
    together = search.embed_queries(texts)
    assert together is not None
    for row, text in zip(together, texts, strict=True):
        assert (row == search.embed_queries([text])[0]).all()  # type: ignore[index]
