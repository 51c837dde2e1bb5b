from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from contextcore.catalog import Catalog
from contextcore.items import Reference, Rule, Tool
from contextcore.search import SearchEngine
from contextcore.services.broker import ContextBroker
from tests.support.hash_embedder import HashEmbedder


def sample_items() -> list[Rule | Reference | Tool]:
    return [
        Rule("tone", "Answer plainly.", "How to talk to the user", include="always", priority=5),
        Rule("commits", "Imperative subject lines.", "Commit messages", include="always"),
        Rule("python-style", "Type hints everywhere.", "Python coding style", include="agent"),
        Rule("testing", "Write a failing test first with pytest.", "How to test code"),
        Rule("release", "Tag and publish.", "Release steps", include="manual"),
        Reference("api", "GET /orders returns orders.", "Orders HTTP API", include="agent"),
        Reference("schema", "orders(id, status)", "Database schema", include="manual"),
        Tool(
            "time",
            "get_current_time",
            "Get the current time in a timezone",
            {"properties": {"timezone": {"description": "IANA timezone name"}}},
            server_include="agent",
        ),
        Tool("git", "git_status", "Show the working tree status", include="manual"),
        Tool("git", "git_log", "Show the commit log"),
    ]


@pytest.fixture
def catalog() -> Catalog:
    return Catalog(sample_items())


@pytest.fixture
def engine(catalog: Catalog) -> SearchEngine:
    return SearchEngine(catalog, HashEmbedder())


class FakeClock:
    def __init__(self) -> None:
        self.now = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)

    def __call__(self) -> datetime:
        self.now += timedelta(seconds=1)
        return self.now


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def broker(catalog: Catalog, engine: SearchEngine, clock: FakeClock) -> ContextBroker:
    return ContextBroker(catalog, engine, clock=clock, max_message_chars=10_000)
