from __future__ import annotations

import re

import pytest

from contextcore.catalog import Catalog
from contextcore.errors import CatalogError, SearchInputError, SessionError
from contextcore.items import ItemRef
from contextcore.search import SearchEngine
from contextcore.services.broker import ContextBroker
from tests.support.hash_embedder import HashEmbedder


def keys(items) -> list[str]:
    return [i.ref.key for i in items]


def test_a_new_session_holds_every_always_item_as_always(broker: ContextBroker) -> None:
    session = broker.create_session()
    assert sorted(keys(session.items)) == ["rule:commits", "rule:tone", "tool:git/git_log"]
    assert {i.include_mode for i in session.items} == {"always"}


def test_session_ids_are_unguessable_and_distinct(broker: ContextBroker) -> None:
    ids = {broker.create_session().session_id for _ in range(50)}
    assert len(ids) == 50 and all(len(i) >= 34 for i in ids)


def test_any_item_can_be_added_by_hand_once(broker: ContextBroker) -> None:
    sid = broker.create_session().session_id
    session, changed = broker.add_item(sid, "reference", "schema")
    assert changed and session.items[-1].include_mode == "manual"
    session, changed = broker.add_item(sid, "rule", "python-style")  # an agent item, by hand
    assert changed and session.items[-1].include_mode == "manual"
    _, again = broker.add_item(sid, "reference", "schema")
    assert not again
    _, always_again = broker.add_item(sid, "rule", "tone")
    assert not always_again and broker.session(sid).items[0].include_mode == "always"


def test_any_item_can_be_removed_whatever_its_mode(broker: ContextBroker) -> None:
    sid = broker.create_session().session_id
    session, changed = broker.remove_item(sid, "rule", "tone")
    assert changed and "rule:tone" not in keys(session.items)
    _, changed = broker.remove_item(sid, "rule", "tone")
    assert not changed


def test_session_context_persists_across_requests(broker: ContextBroker) -> None:
    sid = broker.create_session().session_id
    broker.add_item(sid, "tool", "git_status", "git")
    before = broker.session(sid).items
    broker.build_request_context(sid, "how do I write a test")
    broker.build_request_context(sid, "what time is it in Tokyo")
    assert broker.session(sid).items == before


def test_request_context_is_session_items_plus_agent_items_search_selects(
    broker: ContextBroker,
) -> None:
    sid = broker.create_session().session_id
    broker.add_item(sid, "reference", "schema")
    ctx = broker.build_request_context(
        sid, "current time in a timezone", top_n=2, include_score=1.0
    )
    session_part = [i for i in ctx.items if i.include_mode != "agent"]
    agent_part = [i for i in ctx.items if i.include_mode == "agent"]
    assert keys(session_part) == keys(broker.session(sid).items)
    assert all(i.similarity_score is None for i in session_part)
    assert agent_part[0].ref.key == "tool:time/get_current_time"
    assert all(i.similarity_score is not None for i in agent_part) and len(agent_part) <= 2


def test_only_agent_items_outside_the_session_are_searched(broker: ContextBroker) -> None:
    sid = broker.create_session().session_id
    broker.add_item(sid, "rule", "testing")
    ctx = broker.build_request_context(
        sid, "write a failing test first with pytest", include_score=0.0
    )
    agent = [i for i in ctx.items if i.include_mode == "agent"]
    assert "rule:testing" not in keys(agent)
    catalog = broker.catalog
    assert all(catalog.require(i.ref).effective_include == "agent" for i in agent)
    assert keys(ctx.items).count("rule:testing") == 1


def test_request_contexts_are_stored_in_the_turn_log(broker: ContextBroker) -> None:
    sid = broker.create_session().session_id
    first = broker.build_request_context(sid, "time in Tokyo")
    second = broker.build_request_context(sid, "git log")
    assert [t.request_id for t in broker.turns(sid)] == [
        first.request_id,
        second.request_id,
    ]
    assert broker.request(sid, first.request_id) == first
    assert first.timestamp < second.timestamp and first.timestamp.endswith("Z")
    with pytest.raises(SessionError, match="no request 'r_nope'"):
        broker.request(sid, "r_nope")


def test_messages_are_built_from_the_record_references_then_rules_then_user(
    broker: ContextBroker,
) -> None:
    sid = broker.create_session().session_id
    broker.add_item(sid, "reference", "schema")
    ctx = broker.build_request_context(sid, "How should I answer?", include_score=1.0, top_n=1)
    messages = broker.messages_for(ctx)
    assert [m["role"] for m in messages] == ["system", "system", "user"]
    assert (
        messages[0]["content"].startswith("## References")
        and "orders(id, status)" in messages[0]["content"]
    )
    assert messages[1]["content"].startswith("## Rules")
    rules_in_record = [i.ref.name for i in ctx.items if i.ref.type == "rule"]
    for name in rules_in_record:
        assert re.search(rf"^### \d{{3}} {name} — ", messages[1]["content"], flags=re.M)
    assert messages[1]["content"].index(" tone — ") < messages[1]["content"].index(" commits — ")
    assert messages[-1] == {"role": "user", "content": "How should I answer?"}


def test_a_failing_search_never_fails_the_request(catalog: Catalog, clock) -> None:
    class Broken(SearchEngine):
        def rank(self, *args, **kwargs):  # type: ignore[override]
            raise RuntimeError("index exploded")

    broker = ContextBroker(catalog, Broken(catalog, HashEmbedder()), clock=clock)
    sid = broker.create_session().session_id
    ctx = broker.build_request_context(sid, "anything")
    assert all(i.include_mode == "always" for i in ctx.items)
    assert ctx.search_mode is None and "index exploded" in ctx.warnings[0]


def test_a_missing_model_still_selects_agent_items_lexically(catalog: Catalog) -> None:
    broker = ContextBroker(catalog, SearchEngine(catalog, HashEmbedder(fail=True)))
    sid = broker.create_session().session_id
    ctx = broker.build_request_context(sid, "current time timezone")
    assert ctx.search_mode == "lexical" and "semantic search unavailable" in ctx.warnings[0]
    assert any(i.include_mode == "agent" for i in ctx.items)


@pytest.mark.parametrize("sid", ["", "nope", "s_" + "x" * 10, 42, None, "s_" + "a" * 31 + "/"])
def test_malformed_session_ids_are_clear_errors(broker: ContextBroker, sid: object) -> None:
    with pytest.raises(SessionError, match="malformed session_id") as err:
        broker.session(sid)
    assert err.value.field == "session_id"


def test_unknown_session_ids_are_clear_errors(broker: ContextBroker) -> None:
    with pytest.raises(SessionError, match="unknown session_id"):
        broker.build_request_context("s_" + "A" * 32, "hello")


def test_bad_item_arguments_name_the_field(broker: ContextBroker) -> None:
    sid = broker.create_session().session_id
    with pytest.raises(CatalogError) as err:
        broker.add_item(sid, "widget", "x")
    assert err.value.field == "type"
    with pytest.raises(SessionError) as err2:
        broker.add_item(sid, "tool", "git_log")
    assert err2.value.field == "server"
    with pytest.raises(CatalogError, match="no rule named 'nope'"):
        broker.add_item(sid, "rule", "nope")


def test_messages_over_the_limit_are_refused_and_nothing_is_recorded(
    broker: ContextBroker,
) -> None:
    sid = broker.create_session().session_id
    with pytest.raises(SearchInputError, match="exceeds the limit of 10000") as err:
        broker.build_request_context(sid, "x" * 10_001)
    assert err.value.field == "message"
    assert broker.turns(sid) == []


def test_sessions_are_isolated(broker: ContextBroker) -> None:
    a = broker.create_session().session_id
    b = broker.create_session().session_id
    broker.add_item(a, "reference", "schema")
    broker.build_request_context(a, "time")
    assert not broker.session(b).has(ItemRef("reference", "schema"))
    assert broker.turns(b) == []
