"""Session lists a page at a time, on every backend: newest first, bounded by ``limit``,
after ``offset``, so a list of many sessions is never read whole."""

from __future__ import annotations

from contextcore.sessions import new_session_id
from contextcore.store import SessionHeader, SessionStore


def _sessions(store: SessionStore, count: int) -> list[str]:
    ids = []
    for _ in range(count):
        sid = new_session_id()
        store.create_session(SessionHeader(sid, "agent", "2026-01-01T00:00:00.000Z", None), ())
        ids.append(sid)
    return ids


def test_session_pages_go_newest_first_without_gaps_or_repeats(store: SessionStore) -> None:
    newest_first = _sessions(store, 7)[::-1]
    pages = [store.session_ids_page(offset, 3) for offset in (0, 3, 6, 9)]
    assert pages == [newest_first[0:3], newest_first[3:6], newest_first[6:], []]


def test_an_empty_store_or_an_empty_page_lists_nothing(store: SessionStore) -> None:
    assert store.session_ids_page(0, 50) == []
    _sessions(store, 2)
    assert store.session_ids_page(0, 0) == []
