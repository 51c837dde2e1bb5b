from __future__ import annotations

from contextcore.services.analytics import format_usage, sessions_of, usage_stats
from contextcore.services.broker import ContextBroker


def test_usage_counts_inclusions_by_mode_scores_and_gaps(broker: ContextBroker) -> None:
    a = broker.create_session().session_id
    b = broker.create_session().session_id
    broker.add_item(a, "reference", "schema")
    broker.build_request_context(a, "current time in a timezone", include_score=0.0, top_n=1)
    broker.build_request_context(a, "zzzz qqqq", include_score=0.9, top_n=1)
    broker.build_request_context(b, "write a failing test first with pytest", include_score=0.0)

    stats = usage_stats(sessions_of(broker.store), broker.catalog)
    assert (stats.sessions, stats.turns) == (2, 3)
    rows = {u.ref.key: u for u in stats.items}
    assert rows["rule:tone"].by_mode == {"always": 3, "manual": 0, "agent": 0}
    assert rows["reference:schema"].by_mode == {"always": 0, "manual": 2, "agent": 0}
    time_tool = rows["tool:time/get_current_time"]
    assert time_tool.by_mode["agent"] >= 1 and len(time_tool.scores) == time_tool.by_mode["agent"]
    assert sum(stats.histogram) == sum(len(u.scores) for u in stats.items)
    assert stats.searches_without_strong_match >= 1  # "zzzz qqqq" reached no 0.9 match
    agent_keys = {
        "rule:python-style",
        "rule:testing",
        "reference:api",
        "tool:time/get_current_time",
    }
    selected = {k for k, u in rows.items() if u.by_mode["agent"]}
    assert set(stats.never_selected) == agent_keys - selected
    assert "rule:release" in stats.never_included and "tool:git/git_status" in stats.never_included


def test_usage_of_one_session_and_the_report(broker: ContextBroker) -> None:
    a = broker.create_session().session_id
    broker.create_session()
    broker.build_request_context(a, "commit log", include_score=0.0)
    one = usage_stats(sessions_of(broker.store, a), broker.catalog)
    assert (one.sessions, one.turns) == (1, 1)
    text = format_usage(one)
    assert "1 session(s), 1 request context(s)" in text and "rule:tone: 1 (1 / 0 / 0" in text
    data = one.to_dict()
    assert len(data["agent_score_histogram"]) == 10 and data["items"][0]["included"] == 1
