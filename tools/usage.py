"""record_usage and forget_usage: what a turn used, and removing what was learned."""

from __future__ import annotations

from pydantic import Field

from ._spec import Args, Out, ToolContext, ToolSpec

__all__ = ["FORGET_USAGE", "RECORD_USAGE", "USAGE_TOOLS"]


class RecordUsageArgs(Args):
    session_id: str = Field(description="The session the turn belongs to.")
    request_id: str = Field(description="The turn (request context) the items were used for.")
    used: list[str] = Field(
        description="Keys of the items the answer used: rules followed, references cited, "
        "tools called ('tool:<server>/<tool>', 'rule:<name>', 'reference:<name>')."
    )
    unused: list[str] = Field(
        default_factory=list, description="Keys of items of the turn that were not used."
    )


class RecordUsageOut(Out):
    session_id: str
    request_id: str
    used: list[str]
    unused: list[str]
    selected: list[str]
    missed: list[str] = Field(description="Used items the turn had not selected.")
    learned: bool


class ForgetArgs(Args):
    session_id: str | None = Field(
        None,
        description="Forget what one session taught; when omitted, everything (under a "
        "profile: every session of that profile, no other's).",
    )


class ForgetOut(Out):
    session_id: str | None
    profile: str | None = None
    events_deleted: int
    items_changed: int


def _record(ctx: ToolContext, args: RecordUsageArgs) -> RecordUsageOut:
    broker = ctx.broker
    turn = broker.request(args.session_id, args.request_id)
    event = broker.usage.record_usage(turn, args.used, args.unused, broker.profile(ctx.profile))
    selected = set(event["selected"])
    return RecordUsageOut(
        session_id=args.session_id,
        request_id=args.request_id,
        used=event["used"],
        unused=event["unused"],
        selected=event["selected"],
        missed=[k for k in event["used"] if k not in selected],
        # A profile's usage is kept for its analytics, not taught to the shared ranking.
        learned=broker.search.learner is not None and bool(event["used"]) and ctx.profile is None,
    )


def _record_text(out: RecordUsageOut) -> str:
    text = f"recorded for {out.request_id}: {len(out.used)} used, {len(out.unused)} unused"
    if out.missed:
        text += f"; used but not selected: {', '.join(out.missed)}"
    return text


def _forget(ctx: ToolContext, args: ForgetArgs) -> ForgetOut:
    broker = ctx.broker
    if args.session_id is not None:
        broker.require_session(args.session_id)
        if ctx.profile is not None:
            broker.require_profile(args.session_id, ctx.profile)
    if args.session_id is None and ctx.profile is not None:
        result = broker.usage.forget_profile(ctx.profile)
    else:
        result = broker.usage.forget(args.session_id)
    return ForgetOut(
        session_id=args.session_id,
        profile=ctx.profile,
        events_deleted=result.events,
        items_changed=result.items,
    )


def _forget_text(out: ForgetOut) -> str:
    if out.session_id:
        scope = f"session {out.session_id}"
    elif out.profile is not None:
        scope = f"the sessions of profile {out.profile!r}"
    else:
        scope = "all sessions"
    return (
        f"forgot {out.events_deleted} usage event(s) of {scope}; "
        f"{out.items_changed} item(s) rank as before"
    )


RECORD_USAGE = ToolSpec(
    "record_usage",
    "Report which items a turn used (rules followed, references cited, tools called) and, "
    "optionally, which it did not; the broker learns from it to select better next time. "
    "Tools called through the broker with the session_id are recorded without this.",
    RecordUsageArgs,
    RecordUsageOut,
    _record,
    _record_text,
)
FORGET_USAGE = ToolSpec(
    "forget_usage",
    "Delete the recorded usage (requests and what they used) of one session, or of all "
    "(through a profile: all of that profile's), and what the broker learned from it; "
    "rankings go back to what they were without it.",
    ForgetArgs,
    ForgetOut,
    _forget,
    _forget_text,
)
USAGE_TOOLS = (RECORD_USAGE, FORGET_USAGE)
