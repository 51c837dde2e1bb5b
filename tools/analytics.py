"""get_usage_stats: inclusion analytics per session or across sessions."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from contextcore.analytics import format_usage, load_sessions, usage_stats
from contextcore.broker import ContextBroker

from ._spec import Args, Out, ToolSpec

__all__ = ["GET_USAGE_STATS", "usage_payload"]


class UsageArgs(Args):
    session_id: str | None = Field(
        None, description="One session's analytics; all stored sessions when omitted."
    )


class UsageOut(Out):
    sessions: int
    turns: int
    items: list[dict[str, Any]]
    agent_score_histogram: list[dict[str, Any]]
    never_selected: list[str]
    never_included: list[str]
    searches_without_strong_match: int
    searches_without_agent_items: int
    searches_failed: int
    warnings: list[str] = Field(
        description="Stored sessions or turns left out because they could not be read, "
        "each naming the session and what was wrong."
    )
    report: str


def usage_payload(broker: ContextBroker, session_id: str | None = None) -> UsageOut:
    """The analytics as a result model (also the ``context://stats`` resource)."""
    if session_id is not None:
        broker.session(session_id)  # a clear error for an unknown or malformed id
    sessions, warnings = load_sessions(broker.store, session_id)
    stats = usage_stats(sessions, broker.catalog, warnings=warnings)
    return UsageOut(**stats.to_dict(), report=format_usage(stats))


def _usage(broker: ContextBroker, args: UsageArgs) -> UsageOut:
    return usage_payload(broker, args.session_id)


GET_USAGE_STATS = ToolSpec(
    "get_usage_stats",
    "How often each item was included and how (always, manual, agent), the distribution of "
    "agent selections' similarity scores, agent items never selected, and searches that "
    "selected nothing at or above include_score; for one session or across all sessions.",
    UsageArgs,
    UsageOut,
    _usage,
    lambda out: out.report,
    read_only=True,
)
