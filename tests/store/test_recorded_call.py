"""A proxied call recorded in one write, on every backend of ``BACKENDS`` (conftest): the
call record, its history messages, its usage event and the history state's change land
together, or nothing does."""

from __future__ import annotations

from typing import Any

import pytest
from test_contract import msg, new_session

from contextcore.store import (
    DuplicateRecord,
    RecordedCall,
    SessionStore,
    UnknownSession,
)


def with_shape(current: dict[str, Any] | None) -> dict[str, Any]:
    return current if (current or {}).get("shape") else {**(current or {}), "shape": "openai"}


def test_a_recorded_call_writes_its_call_messages_usage_and_state_together(
    store: SessionStore,
) -> None:
    sid = new_session(store)
    store.append_messages(sid, [msg("earlier")])
    store.update_history_state(sid, lambda cur: {"clearedAt": 1})
    before = store.append_usage_event(None, {"kind": "log"})
    done = store.record_call(
        sid,
        {"server": "db", "tool": "query", "result": "2 rows"},
        [msg("use", "c1"), msg("result")],
        {"kind": "call", "used": ["tool:db/query"]},
        with_shape,
    )
    assert done == RecordedCall(0, (1, 2), done.usage) and done.usage is not None
    assert done.usage > before
    assert store.calls(sid) == [{"server": "db", "tool": "query", "result": "2 rows", "seq": 0}]
    assert [m.id for m in store.messages(sid)] == ["earlier", "use", "result"]
    assert store.message_totals(sid)[0] == 3 and store.used_ids(sid, [], ["c1"])[1] == {"c1"}
    assert store.history_state(sid) == {"clearedAt": 1, "shape": "openai"}
    events = store.usage_events(sid)
    assert [(e["kind"], e["seq"], e["session_id"]) for e in events] == [("call", done.usage, sid)]


def test_each_part_of_a_recorded_call_is_optional(store: SessionStore) -> None:
    sid = new_session(store)
    assert store.record_call(sid, None, usage={"kind": "call"}).call is None
    only_call = store.record_call(sid, {"tool": "t"})
    assert only_call == RecordedCall(0, (), None)
    assert store.messages(sid) == [] and store.history_state(sid) is None
    assert len(store.usage_events(sid)) == 1 and len(store.calls(sid)) == 1


def test_a_recorded_call_with_a_taken_id_stores_nothing(store: SessionStore) -> None:
    sid = new_session(store)
    store.append_messages(sid, [msg("a", "c1")])
    for messages in ([msg("b", "c1")], [msg("a")], [msg("b"), msg("b")]):
        with pytest.raises(DuplicateRecord):
            store.record_call(sid, {"tool": "t"}, messages, {"kind": "call"}, with_shape)
    assert store.calls(sid) == [] and store.usage_events(sid) == []
    assert [m.id for m in store.messages(sid)] == ["a"] and store.history_state(sid) is None
    assert store.record_call(sid, {"tool": "t"}, [msg("b")]).messages == (1,)


def test_a_recorded_call_in_an_unknown_session_is_refused(store: SessionStore) -> None:
    sid = "s_" + "u" * 32
    with pytest.raises(UnknownSession):
        store.record_call(sid, {"tool": "t"}, [msg("a")], {"kind": "call"}, with_shape)
    assert store.usage_events() == [] and store.calls(sid) == []


def test_a_store_that_can_write_says_so(store: SessionStore) -> None:
    store.check_writable()
