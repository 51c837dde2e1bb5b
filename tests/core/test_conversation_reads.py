"""What the conversation costs and how it is recorded: a follow-up reads only the last few
turns and the history's tail, whatever the session's age; request contexts recorded before
the conversation counted read back unchanged."""

from __future__ import annotations

from typing import Any

from contextcore.catalog import Catalog
from contextcore.conversation import dependence
from contextcore.memory_store import MemorySessionStore
from contextcore.search import SearchEngine
from contextcore.services.broker import ContextBroker
from contextcore.sessions import RequestContext
from contextcore.store import MessageRecord
from tests.support.hash_embedder import HashEmbedder


class ReadLog(MemorySessionStore):
    """The in-memory store, noting every read of turns and messages."""

    def __init__(self) -> None:
        super().__init__()
        self.reads: list[tuple[str, Any, Any]] = []

    def turns(self, session_id: str, offset: int = 0, limit: int | None = None) -> list[Any]:
        self.reads.append(("turns", offset, limit))
        return super().turns(session_id, offset, limit)

    def messages(self, session_id: str, start: int = 0, end: int | None = None) -> list[Any]:
        self.reads.append(("messages", start, end))
        return super().messages(session_id, start, end)


def test_a_follow_up_reads_the_last_turns_and_the_history_tail_only(catalog: Catalog) -> None:
    store = ReadLog()
    broker = ContextBroker(catalog, SearchEngine(catalog, HashEmbedder()), store=store)
    sid = broker.create_session().session_id
    for n in range(40):
        broker.build_request_context(sid, f"what time is it in timezone {n}")
        raw = {"role": "user", "content": f"what time is it in timezone {n}"}
        store.append_messages(sid, [MessageRecord(f"m{n}", raw)])
    store.reads.clear()
    follow = broker.build_request_context(sid, "and in Oslo?")
    assert ("turns", 38, 2) in store.reads
    assert all(r[0] != "turns" or (r[1], r[2]) == (38, 2) for r in store.reads)
    assert all(r[0] != "messages" or r[1] >= 40 - 18 for r in store.reads)
    # The time tool came from the earlier turns' messages; none of them chose an item, so
    # none is named as the turn it was carried from.
    assert any(i.via == "conversation" for i in follow.items)
    assert not follow.context_turns
    assert all(i.turn is None for i in follow.items if i.via == "conversation")

    store.reads.clear()
    broker.build_request_context(sid, "and in Oslo?", conversation=0)
    assert store.reads == []  # at 0 nothing of the past is read


def test_a_topic_switch_and_a_standalone_message_do_not_depend_on_the_past() -> None:
    assert dependence("ok, new thing: list what is in the downloads folder") == 0
    assert dependence("Unrelated: which branches exist in the repo?") == 0
    assert dependence("What time is it in Honolulu?") == 0
    assert dependence("and in Oslo?") > 0.5
    assert dependence("now put a summary of it in notes/summary.md") == 1


def test_request_contexts_recorded_before_the_conversation_counted_read_back_unchanged() -> None:
    old = {
        "request_id": "r_1",
        "session_id": "s_1",
        "timestamp": "2026-01-01T00:00:00.000Z",
        "message": "hello",
        "items": [
            {
                "type": "tool",
                "name": "t",
                "server": "s",
                "include_mode": "agent",
                "similarity_score": 0.5,
            }
        ],
    }
    context = RequestContext.from_dict(old)
    assert context.context_turns == () and context.items[0].turn is None
    assert "context_turns" not in context.to_dict()
    assert "turn" not in context.to_dict()["items"][0]
    assert RequestContext.from_dict(context.to_dict()) == context
