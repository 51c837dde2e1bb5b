"""``benchmarks/reach.py`` counts a needed tool as named only where a line names its server and
its tool (a full entry's heading or a candidate line), and measures that on the text
``build_request_context`` serves (a tiny catalog of two servers, the hash embedder)."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from types import ModuleType

import anyio
import pytest

from contextcore.services.evaluation import EvalQuery
from tests.support.hash_embedder import HashEmbedder

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"

CATALOG = {
    "servers": {
        "weather": {
            "tools": [
                {
                    "name": "get_forecast",
                    "description": "Weather forecast for a city: temperature and rain",
                    "inputSchema": {"type": "object", "properties": {"city": {"type": "string"}}},
                },
                {"name": "get_alerts", "description": "Storm alerts for a region"},
            ]
        },
        "files": {
            "tools": [
                {"name": "read_file", "description": "Read a text file from disk"},
                {"name": "write_file", "description": "Write a text file to disk"},
                {"name": "list_dir", "description": "List the entries of a directory"},
            ]
        },
    }
}


@pytest.fixture(scope="module")
def reach() -> ModuleType:
    sys.path.insert(0, str(BENCHMARKS))
    try:
        return importlib.import_module("reach")
    finally:
        sys.path.remove(str(BENCHMARKS))


def test_a_heading_and_a_candidate_line_name_a_tool_a_bare_name_does_not(
    reach: ModuleType,
) -> None:
    text = "\n".join(
        [
            "### weather__get_forecast (server weather, tool get_forecast) — agent, score 0.71",
            "Weather forecast for a city",
            "## Further candidates",
            "- files__read_file (server files, tool read_file): Read a text file from disk",
            "- list_dir: List the entries of a directory",
            "- tool:files/write_file (agent, score 0.30): get_context_items(keys=[...])",
            "Also see server files and the tool write_file.",
            "### files__read_file_lines (server files, tool read_file_lines) — agent",
        ]
    )
    assert reach.named(text, "tool:weather/get_forecast")  # heading
    assert reach.named(text, "tool:files/read_file")  # candidate line
    assert not reach.named(text, "tool:files/list_dir")  # no server on its line
    assert not reach.named(text, "tool:files/write_file")  # server and tool on no one line
    assert not reach.named(text, "tool:weather/read_file")  # another server's tool
    assert not reach.named(text, "tool:files/read_file_l")  # a prefix of a longer name
    assert reach.candidate_lines(text) == 1
    assert reach.named("### 010 sql-migrations — agent, score 0.50\nUse...", "rule:sql-migrations")
    assert not reach.named("### 010 sql-migrations-old — agent", "rule:sql-migrations")


def test_the_split_is_stable_and_halves_the_queries(reach: ModuleType) -> None:
    queries = [f"query number {i}" for i in range(200)]
    dev = {q for q in queries if reach.in_split(q, "dev")}
    holdout = {q for q in queries if reach.in_split(q, "holdout")}
    assert dev.isdisjoint(holdout) and dev | holdout == set(queries)
    assert 60 < len(dev) < 140
    assert dev == {q for q in queries if reach.in_split(q, "dev")}


def test_measure_reads_the_served_text(reach: ModuleType, tmp_path: Path) -> None:
    served = reach.serve(reach.config_of(CATALOG, tmp_path), HashEmbedder())
    text, out = anyio.run(reach.request_text, served, "weather forecast for a city")
    assert "### weather__get_forecast (server weather, tool get_forecast)" in text
    assert any(row["name"] == "get_forecast" for row in out["items"])
    queries = [
        EvalQuery("weather forecast for a city", frozenset({"tool:weather/get_forecast"})),
        # a tool no catalog has is never named: half of this query's gold
        EvalQuery(
            "weather forecast for a city",
            frozenset({"tool:weather/get_forecast", "tool:weather/get_radar"}),
        ),
    ]
    report = anyio.run(reach.measure, "tiny", served, queries, 100)
    assert report.queries == 2
    assert report.named == pytest.approx(0.75)
    assert report.all_named == pytest.approx(0.5)
    assert report.median_tokens > 0 and report.p90_tokens >= report.median_tokens
    assert report.listing_tokens == served.listing_tokens() > 0
    assert report.ratio == pytest.approx((report.median_tokens + 100) / report.listing_tokens)


def test_the_reference_set_is_each_conversations_opening_request(reach: ModuleType) -> None:
    queries = reach.set_queries(reach.SETS["reference"], "all", None)
    assert len(queries) == 60
    first = queries[0]
    assert first.query == "What time is it in Sydney?"
    assert first.gold == frozenset({"tool:time/get_current_time"})
    assert all(q.gold and all(k.startswith("tool:") for k in q.gold) for q in queries)
