"""The session-store contract, run against every backend of ``BACKENDS`` (conftest)."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from contextcore.errors import SessionError
from contextcore.items import ItemRef
from contextcore.sessions import RequestContext, RequestItem, SessionItem, new_session_id
from contextcore.store import (
    DuplicateRecord,
    MessageRecord,
    SessionHeader,
    SessionStore,
    UnknownSession,
    load_session,
)

RULE = ItemRef("rule", "style")
TOOL = ItemRef("tool", "query", "db")
REF = ItemRef("reference", "guide")


def new_session(store: SessionStore, *items: SessionItem, preset: str | None = None) -> str:
    sid = new_session_id()
    store.create_session(SessionHeader(sid, "agent", "2026-01-01T00:00:00.000Z", preset), items)
    return sid


def turn(sid: str, n: int) -> RequestContext:
    return RequestContext(
        f"r_{n:032x}",
        sid,
        "2026-01-01T00:00:00.000Z",
        f"héllo {n}",
        (RequestItem(TOOL, "agent", 0.5), RequestItem(RULE, "always")),
        "hybrid",
        ("a warning",),
        include_score=0.7,
        parameters={"preset": "balanced"},
    )


def msg(i: str, *calls: str) -> MessageRecord:
    raw: dict[str, Any] = {"id": i, "role": "user", "content": f"text {i}"}
    return MessageRecord(i, raw, calls)


def test_a_created_session_reads_back_its_header_and_items(store: SessionStore) -> None:
    sid = new_session(store, SessionItem(RULE, "always"), preset="precise")
    header = store.header(sid)
    assert header == SessionHeader(sid, "agent", "2026-01-01T00:00:00.000Z", "precise")
    assert store.items(sid) == (SessionItem(RULE, "always"),)
    assert store.list_session_ids() == [sid]
    assert store.header("s_" + "n" * 32) is None


def test_sessions_are_listed_oldest_first(store: SessionStore) -> None:
    ids = [new_session(store) for _ in range(5)]
    assert store.list_session_ids() == ids


def test_items_keep_their_order_and_removals_are_remembered(store: SessionStore) -> None:
    sid = new_session(store, SessionItem(RULE, "always"))
    added = store.add_items(sid, [SessionItem(TOOL, "manual"), SessionItem(RULE, "manual")])
    assert added == (SessionItem(TOOL, "manual"),)
    assert [i.ref for i in store.items(sid)] == [RULE, TOOL]
    assert store.remove_item(sid, RULE) is True
    assert store.remove_item(sid, REF) is False
    header = store.header(sid)
    assert header is not None and set(header.removed) == {RULE, REF}
    store.add_items(sid, [SessionItem(RULE, "manual")])
    header = store.header(sid)
    assert header is not None and header.removed == (REF,)
    assert [i.ref for i in store.items(sid)] == [TOOL, RULE]


def test_turns_are_appended_in_order_and_found_by_request_id(store: SessionStore) -> None:
    sid = new_session(store)
    seqs = [store.append_turn(sid, turn(sid, n)) for n in range(7)]
    assert seqs == list(range(7))
    assert store.turn(sid, turn(sid, 3).request_id) == turn(sid, 3)
    assert store.turn(sid, "r_missing") is None
    assert store.turns(sid) == [turn(sid, n) for n in range(7)]
    assert store.turns(sid, 2, 3) == [turn(sid, n) for n in (2, 3, 4)]
    assert store.turn_count(sid) == 7
    assert store.last_turn(sid) == turn(sid, 6)
    assert store.last_turn(new_session(store)) is None


def test_a_later_search_extends_a_recorded_turn_with_what_it_found_once(
    store: SessionStore,
) -> None:
    sid = new_session(store)
    for n in range(3):
        store.append_turn(sid, turn(sid, n))
    target = turn(sid, 1)
    found = RequestItem(REF, "agent", 0.5, "deploy the service", "search")
    again = RequestItem(REF, "agent", 0.9)
    extended = store.extend_turn(sid, target.request_id, [found])
    assert extended is not None and extended.items == (*target.items, found)
    assert store.extend_turn(sid, target.request_id, [again]) == extended  # held already
    assert store.turn(sid, target.request_id) == extended
    assert store.turns(sid) == [turn(sid, 0), extended, turn(sid, 2)]
    assert store.extend_turn(sid, "r_missing", [found]) is None


def test_messages_get_consecutive_sequence_numbers_and_read_back_as_stored(
    store: SessionStore,
) -> None:
    sid = new_session(store)
    assert store.append_messages(sid, [msg("a"), msg("b", "c1")]) == (0, 1)
    assert store.append_messages(sid, [msg("c")]) == (2,)
    assert store.message_count(sid) == 3
    read = store.messages(sid)
    assert [(m.seq, m.id, m.call_ids) for m in read] == [
        (0, "a", ()),
        (1, "b", ("c1",)),
        (2, "c", ()),
    ]
    assert dict(read[1].raw) == {"id": "b", "role": "user", "content": "text b"}
    assert [m.id for m in store.messages(sid, 1, 2)] == ["b"]
    assert [m.id for m in store.messages(sid, 1)] == ["b", "c"]
    assert store.used_ids(sid, ["a", "z"], ["c1", "c9"]) == (frozenset({"a"}), frozenset({"c1"}))


def test_a_reused_message_or_call_id_stores_nothing(store: SessionStore) -> None:
    sid = new_session(store)
    store.append_messages(sid, [msg("a", "c1")])
    with pytest.raises(DuplicateRecord):
        store.append_messages(sid, [msg("b"), msg("a")])
    with pytest.raises(DuplicateRecord):
        store.append_messages(sid, [msg("b", "c1")])
    with pytest.raises(DuplicateRecord):
        store.append_messages(sid, [msg("b"), msg("b")])
    assert [m.id for m in store.messages(sid)] == ["a"]
    assert store.append_messages(sid, [msg("b")]) == (1,)


def test_messages_can_be_rewritten_and_deleted_without_renumbering(store: SessionStore) -> None:
    sid = new_session(store)
    store.append_messages(sid, [msg(str(i)) for i in range(5)])
    short = MessageRecord("2", {"id": "2", "role": "user", "content": "[compacted]"}, (), 2)
    store.replace_messages(sid, [short])
    assert store.messages(sid, 2, 3)[0].raw["content"] == "[compacted]"
    assert store.delete_messages(sid, 0, 2) == 2
    assert [m.seq for m in store.messages(sid)] == [2, 3, 4]
    assert store.append_messages(sid, [msg("5")]) == (5,)
    assert store.used_ids(sid, ["0"], []) == (frozenset(), frozenset())


def test_history_state_and_snapshot_update_atomically(store: SessionStore) -> None:
    sid = new_session(store)
    assert store.history_state(sid) is None and store.snapshot(sid) is None
    store.update_history_state(sid, lambda cur: {**(cur or {}), "clearedAt": 3})
    store.update_history_state(sid, lambda cur: {**(cur or {}), "shape": "openai"})
    assert store.history_state(sid) == {"clearedAt": 3, "shape": "openai"}
    store.update_snapshot(sid, lambda cur: {"goal": "ship"})

    def refuse(cur: dict[str, Any] | None) -> dict[str, Any]:
        raise ValueError("refused")

    with pytest.raises(ValueError):
        store.update_snapshot(sid, refuse)
    assert store.snapshot(sid) == {"goal": "ship"}


def test_code_state_is_a_part_of_its_own_updated_atomically(store: SessionStore) -> None:
    a, b = new_session(store), new_session(store)
    assert store.code_state(a) is None
    store.update_code_state(a, lambda cur: {"state": "AAEC", "runs": [{"code": "x = 1"}]})
    store.update_code_state(a, lambda cur: {**(cur or {}), "runs": [*cur["runs"], {}]})  # type: ignore[index]
    assert store.code_state(a) == {"state": "AAEC", "runs": [{"code": "x = 1"}, {}]}
    assert store.code_state(b) is None and store.snapshot(a) is None
    with pytest.raises(UnknownSession):
        store.update_code_state(new_session_id(), lambda cur: {})


def test_calls_and_usage_events_get_sequence_numbers(store: SessionStore) -> None:
    a, b = new_session(store), new_session(store)
    assert store.append_call(a, {"tool": "db__query"}) == 0
    assert store.append_call(a, {"tool": "db__list"}) == 1
    assert store.calls(a) == [{"tool": "db__query", "seq": 0}, {"tool": "db__list", "seq": 1}]
    first = store.append_usage_event(a, {"kind": "used", "item": "tool:db/query"})
    second = store.append_usage_event(b, {"kind": "missed"})
    third = store.append_usage_event(a, {"kind": "used"})
    assert first < second < third
    events = store.usage_events()
    assert [(e["seq"], e["session_id"], e["kind"]) for e in events] == [
        (first, a, "used"),
        (second, b, "missed"),
        (third, a, "used"),
    ]
    assert [e["seq"] for e in store.usage_events(a)] == [first, third]


def test_deleting_usage_events_removes_one_sessions_or_all_and_keeps_numbering(
    store: SessionStore,
) -> None:
    a, b = new_session(store), new_session(store)
    first = store.append_usage_event(a, {"kind": "call"})
    second = store.append_usage_event(b, {"kind": "report"})
    store.append_usage_event(a, {"kind": "report"})
    store.append_usage_event(None, {"kind": "log"})
    assert store.delete_usage_events(a) == 2
    assert store.delete_usage_events(a) == 0
    rest = [(e["seq"], e["session_id"], e["kind"]) for e in store.usage_events()]
    assert rest[0] == (second, b, "report") and len(rest) == 2 and store.usage_events(a) == []
    later = store.append_usage_event(a, {"kind": "call"})
    assert later > second > first
    assert [e["seq"] for e in store.usage_events(a)] == [later]
    assert store.delete_usage_events() == 3
    assert store.usage_events() == [] and store.usage_events(b) == []
    assert store.append_usage_event(b, {"kind": "call"}) > later
    assert [e["kind"] for e in store.usage_events(b)] == ["call"]


def test_the_embedding_cache_keeps_the_first_vector_per_key(store: SessionStore) -> None:
    store.put_embeddings("m", {"h1": b"\x00\x01", "h2": b"\x02"})
    store.put_embeddings("m", {"h1": b"\xff"})
    assert store.get_embeddings("m", ["h1", "h2", "h3"]) == {"h1": b"\x00\x01", "h2": b"\x02"}
    assert store.get_embeddings("other", ["h1"]) == {}


def test_writes_to_an_unknown_session_are_refused_and_reads_are_empty(
    store: SessionStore,
) -> None:
    sid = "s_" + "u" * 32
    for write in (
        lambda: store.append_turn(sid, turn(sid, 0)),
        lambda: store.append_messages(sid, [msg("a")]),
        lambda: store.add_items(sid, [SessionItem(RULE, "manual")]),
        lambda: store.update_snapshot(sid, lambda cur: {}),
        lambda: store.append_call(sid, {}),
        lambda: store.append_usage_event(sid, {}),
    ):
        with pytest.raises(UnknownSession) as info:
            write()
        assert isinstance(info.value, SessionError) and sid in info.value.message
    assert store.items(sid) == () and store.turns(sid) == [] and store.messages(sid) == []
    assert store.message_count(sid) == 0 and load_session(store, sid) is None


def test_a_session_id_cannot_be_created_twice(store: SessionStore) -> None:
    sid = new_session(store, SessionItem(RULE, "always"))
    with pytest.raises(Exception, match=sid):
        store.create_session(SessionHeader(sid, None, "2026"), ())
    assert store.items(sid) == (SessionItem(RULE, "always"),)


def test_concurrent_appends_from_threads_all_land_in_one_order(store: SessionStore) -> None:
    sid = new_session(store)
    threads, per_thread = 6, 40
    errors: list[BaseException] = []

    def work(t: int) -> None:
        try:
            for i in range(per_thread):
                store.append_messages(sid, [msg(f"t{t}-{i}")])
                store.append_turn(sid, turn(sid, t * 1000 + i))
        except BaseException as exc:  # reported below, on the test's thread
            errors.append(exc)

    workers = [threading.Thread(target=work, args=(t,)) for t in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(timeout=120)
    assert not errors and not any(w.is_alive() for w in workers)
    read = store.messages(sid)
    assert [m.seq for m in read] == list(range(threads * per_thread))
    for t in range(threads):
        mine = [m.id for m in read if m.id.startswith(f"t{t}-")]
        assert mine == [f"t{t}-{i}" for i in range(per_thread)]
    assert store.turn_count(sid) == threads * per_thread


def test_load_session_puts_header_items_and_turns_together(store: SessionStore) -> None:
    sid = new_session(store, SessionItem(RULE, "always"))
    store.append_turn(sid, turn(sid, 1))
    store.remove_item(sid, REF)
    session = load_session(store, sid)
    assert session is not None
    assert session.items == (SessionItem(RULE, "always"),) and session.turns == (turn(sid, 1),)
    assert session.removed == (REF,) and session.agent == "agent"


def test_a_session_header_keeps_the_profile_it_was_created_under(store: SessionStore) -> None:
    sid = new_session_id()
    header = SessionHeader(sid, None, "2026-01-01T00:00:00.000Z", "conservative", profile="cursor")
    store.create_session(header, ())
    assert store.header(sid) == header
    plain = new_session(store)
    assert store.header(plain).profile is None  # type: ignore[union-attr]
    found = load_session(store, sid)
    assert found is not None and found.profile == "cursor"
