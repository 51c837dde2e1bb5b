"""get_usage_stats: inclusion and usage analytics per session or across sessions, with
suggested include-mode changes."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from contextcore.errors import SessionError
from contextcore.services.analytics import format_usage, load_sessions, usage_stats
from contextcore.services.broker import ContextBroker

from ._spec import Args, Out, ToolContext, ToolSpec

__all__ = ["GET_USAGE_STATS", "usage_payload"]


class UsageArgs(Args):
    session_id: str | None = Field(
        None, description="One session's analytics; all stored sessions when omitted."
    )
    profile: str | None = Field(
        None,
        max_length=64,
        description="Only the sessions created under this profile (a host connected "
        "through a profile sees only its own).",
    )


class UsageOut(Out):
    sessions: int
    turns: int
    items: list[dict[str, Any]] = Field(
        description="Per item: included (= selected) by mode, agent scores, used (turns it "
        "was used in), missed (used without being selected), selected_with_usage (turns with "
        "recorded usage that selected it) and precision (the share of those that used it)."
    )
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
    turns_with_usage: int = Field(
        description="Turns with recorded usage: a tool called through the broker with the "
        "session_id, or record_usage."
    )
    selected_never_used: list[str]
    suggestions: list[dict[str, str]] = Field(
        description="Include-mode changes the usage argues for: key, include (today), "
        "suggested ('agent', 'always', or 'review' for items search never selects), reason."
    )
    report: str


def usage_payload(
    broker: ContextBroker, session_id: str | None = None, profile: str | None = None
) -> UsageOut:
    """The analytics as a result model (also the ``context://stats`` resource); with
    ``profile``, of the sessions created under it only, naming only the items it allows."""
    shown = broker.profile(profile)  # also a clear error for an unknown profile
    if session_id is not None:
        broker.session(session_id)  # a clear error for an unknown or malformed id
    sessions, warnings = load_sessions(broker.store, session_id, profile)
    events = broker.store.usage_events(session_id)
    if shown is not None:  # a profile's analytics read only its sessions' events
        ids = {s.session_id for s in sessions}
        events = [e for e in events if e.get("session_id") in ids]
    stats = usage_stats(
        sessions,
        broker.catalog,
        warnings=warnings,
        events=events,
        shown=shown.allows if shown is not None else None,
    )
    return UsageOut(**stats.to_dict(), report=format_usage(stats))


def _usage(ctx: ToolContext, args: UsageArgs) -> UsageOut:
    profile = args.profile if ctx.profile is None else ctx.profile
    if args.profile not in (None, profile):
        raise SessionError(
            f"this connection uses profile {ctx.profile!r}; it sees only that profile's analytics",
            field="profile",
        )
    return usage_payload(ctx.broker, args.session_id, profile)


GET_USAGE_STATS = ToolSpec(
    "get_usage_stats",
    "How often each item was included and how (always, manual, agent), how often it was "
    "used and its precision (used / selected), the distribution of agent selections' "
    "similarity scores, agent items never selected, searches that selected nothing at or "
    "above include_score, and suggested include-mode changes; for one session or across all "
    "sessions.",
    UsageArgs,
    UsageOut,
    _usage,
    lambda out: out.report,
    read_only=True,
)
