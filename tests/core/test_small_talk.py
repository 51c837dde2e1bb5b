"""Small talk selects nothing: on a 199-tool catalog where the relevance floors alone let a
"thanks, that's all" select tools, a request every text of which is closer to small talk
than to any item selects none, while the catalog's own requests keep their tools (real
model, MetaTool's catalog and requests from ../shared/benchmarks)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from contextcore.catalog import Catalog
from contextcore.items import Tool
from contextcore.loaders import load_catalog_json
from contextcore.search import SearchEngine, SearchSettings
from contextcore.services.evaluation import load_queries
from contextcore.small_talk import load_phrases
from tests.core.test_ranking_levers import SHARED, _Remembered

pytestmark = pytest.mark.model

FLOORS = {"tool": 0.22, "rule": 0.25, "reference": 0.25}
CHATTER = ("thanks, that's all", "what's a good name for a cat?")


@pytest.fixture(scope="module")
def model() -> _Remembered:
    return _Remembered()


def _engine(embedder: _Remembered, items: list[Tool], small_talk: bool) -> SearchEngine:
    engine = SearchEngine(Catalog(items), embedder)  # type: ignore[arg-type]
    engine.settings = replace(SearchSettings(), small_talk=small_talk)
    return engine


def _metatool() -> list[Tool]:
    items = load_catalog_json(SHARED / "metatool" / "catalog.json")
    return [replace(i, include="agent") for i in items if isinstance(i, Tool)]


def _selected(engine: SearchEngine, message: str, intents: tuple[str, ...] = ()) -> list[str]:
    found = engine.search(message, min_score=FLOORS, intents=intents, modes=("agent",))
    return [h.ref.name for h in found.hits]


def test_the_phrases_are_small_talk_only() -> None:
    phrases = load_phrases()
    assert 20 <= len(phrases) <= 60
    assert not any(p.startswith("#") for p in phrases)


def test_small_talk_selects_nothing_where_the_floors_alone_select_tools(
    model: _Remembered,
) -> None:
    items = _metatool()
    off, on = _engine(model, items, False), _engine(model, items, True)
    for message in CHATTER:
        assert _selected(off, message), message  # the floors alone let tools through
        assert _selected(on, message) == [], message


def test_the_catalogs_own_requests_keep_their_tools(model: _Remembered) -> None:
    items = _metatool()
    off, on = _engine(model, items, False), _engine(model, items, True)
    queries = load_queries(SHARED / "metatool" / "queries-multi.jsonl")
    with off.embedded_ahead((q.query, ()) for q in queries):  # the model remembers them for both
        lost = [q.query for q in queries if _selected(off, q.query) and not _selected(on, q.query)]
    assert len(lost) <= 0.01 * len(queries), lost


def test_a_greeting_with_a_request_or_a_step_that_asks_still_selects(
    model: _Remembered,
) -> None:
    on = _engine(model, _metatool(), True)
    assert "WeatherTool" in _selected(on, "hi! what's the weather like in Paris tomorrow?")
    steps = ("say thanks", "get the weather forecast for Paris")
    assert "WeatherTool" in _selected(on, "thanks, that's all", steps)


def test_a_catalog_that_serves_greetings_still_gets_them(model: _Remembered) -> None:
    cards = Tool(
        "cards",
        "send_greeting",
        "Send a greeting to a contact: say hello, good morning or thank you",
        include="agent",
    )
    on = _engine(model, [*_metatool(), cards], True)
    assert "send_greeting" in _selected(on, "say good morning to Alice")
