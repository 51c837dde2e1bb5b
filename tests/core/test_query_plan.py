"""The texts one search embeds: the message's parts and the host's planned steps."""

from __future__ import annotations

import pytest

from contextcore.catalog import Catalog
from contextcore.errors import SearchInputError
from contextcore.items import Tool
from contextcore.query_plan import MAX_INTENTS, QueryPlan, check_intents, split_parts
from contextcore.search import SearchEngine, SearchSettings
from tests.support.hash_embedder import HashEmbedder


def test_a_request_of_several_sentences_and_chained_actions_splits_into_its_parts() -> None:
    message = (
        "Find the latest papers on protein folding. Then plot the citation counts per year, "
        "and then email the chart to my team"
    )
    assert split_parts(message) == [
        "Find the latest papers on protein folding.",
        "plot the citation counts per year",
        "email the chart to my team",
    ]


def test_a_one_part_request_and_fragments_too_short_to_mean_anything_give_no_parts() -> None:
    assert split_parts("What time is it in Tokyo?") == []
    assert split_parts("Thanks. Bye.") == []


def test_intents_are_checked_where_they_enter() -> None:
    assert check_intents(None) == ()
    assert check_intents(["  read a file ", "", "read a file", "write a file"]) == (
        "read a file",
        "write a file",
    )
    with pytest.raises(SearchInputError, match="list of short texts"):
        check_intents("read a file")
    with pytest.raises(SearchInputError, match="list of short texts"):
        check_intents([1, 2])
    with pytest.raises(SearchInputError, match="at most"):
        check_intents([f"step {i}" for i in range(MAX_INTENTS + 1)])
    with pytest.raises(SearchInputError, match="one short sentence"):
        check_intents(["x" * 501])


def test_with_intents_the_message_is_not_split_and_each_step_is_a_text() -> None:
    plan = QueryPlan.of("Read it. Then write it down somewhere.", ["read a file"])
    assert plan.texts == ["Read it. Then write it down somewhere.", "read a file"]
    assert QueryPlan.of("Read the plan file. Then write the summary file.").parts


def _tools() -> Catalog:
    return Catalog(
        [
            Tool("fs", "read_file", "Read the contents of a file from disk"),
            Tool("fs", "write_file", "Write text content to a file on disk"),
            Tool("time", "get_current_time", "Current time in a timezone"),
            Tool("mail", "send_email", "Send an email message to recipients"),
        ]
    )


def test_each_step_brings_its_own_tool_and_names_itself() -> None:
    engine = SearchEngine(_tools(), HashEmbedder(), settings=SearchSettings(feedback=0.0))
    intents = ["read contents of a file", "current time in a timezone", "send an email message"]
    result = engine.search("do my morning routine", intents=intents, top_n=3, min_score=0.2)
    by_key = {h.ref.key: h.intent for h in result.hits}
    assert by_key == {
        "tool:fs/read_file": 0,
        "tool:time/get_current_time": 1,
        "tool:mail/send_email": 2,
    }


def test_a_step_with_a_tool_above_its_floor_is_never_left_with_nothing() -> None:
    engine = SearchEngine(_tools(), HashEmbedder(), settings=SearchSettings(feedback=0.0))
    intents = ["read contents of a file", "send an email message"]
    # top_n 1 leaves room for one item only; the second step still gets its tool.
    result = engine.search("morning", intents=intents, top_n=1, min_score=0.2)
    assert {h.ref.key for h in result.hits} == {"tool:fs/read_file", "tool:mail/send_email"}


def test_an_off_topic_step_adds_nothing() -> None:
    engine = SearchEngine(_tools(), HashEmbedder(), settings=SearchSettings(feedback=0.0))
    on_topic = engine.search("x", intents=["send an email message"], min_score=0.2)
    with_noise = engine.search(
        "x", intents=["send an email message", "bake chocolate cake"], min_score=0.2
    )
    assert [h.ref for h in with_noise.hits] == [h.ref for h in on_topic.hits]
