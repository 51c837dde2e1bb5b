"""History tools: append_messages, get_history, trim_messages, summarize_history,
collapse_messages, clear_history, update_snapshot, get_snapshot, get_context_stats."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pydantic import Field

from contextcore.errors import HistoryError
from contextcore.history import (
    ConversationHistory,
    HistoryStats,
    PipelineReport,
    Summary,
    SummaryOutcome,
    TaskSnapshot,
)
from contextcore.services.history import SummaryResult

from ._damage import SKIPPED_FIELD, skipped, skipped_lines
from ._spec import Args, Out, ToolContext, ToolSpec

__all__ = [
    "APPEND_MESSAGES",
    "CLEAR_HISTORY",
    "COLLAPSE_MESSAGES",
    "GET_CONTEXT_STATS",
    "GET_HISTORY",
    "GET_SNAPSHOT",
    "HISTORY_TOOLS",
    "SUMMARIZE_HISTORY",
    "TRIM_MESSAGES",
    "UPDATE_SNAPSHOT",
]

_SESSION_ID = Field(description="A session id returned by create_session.")
_MESSAGES = Field(
    description="Chat messages, OpenAI-style (role, content, tool_calls, tool_call_id) or "
    "Anthropic-style (content blocks text / tool_use / tool_result); one shape per list."
)
_PRESET = Field(None, description="A filter preset: 'general' (default) or 'topic'.")
_FILTERS = Field(
    None,
    description="An explicit ordered filter list instead of a preset: names or "
    '{"name": ..., "options": {...}} (e.g. sizeLimiter, pruneMiddle, importanceRetention, '
    "uiCompression, fileContentsLimiter, collapseGroupReplacer, toolCallBackfill).",
)
_MAX_TOKENS = Field(None, ge=1, description="Token budget of the window (caps the filters').")


# -- result rows -------------------------------------------------------------------------


class StepOut(Out):
    name: str
    messages_in: int
    messages_out: int


class ReportOut(Out):
    """What the filter pipeline did."""

    messages_in: int
    messages_out: int
    tokens_before: int
    tokens_after: int
    dropped: int
    truncated: int
    backfilled: int
    moved: int
    orphans_converted: int
    collapsed: int
    budget: int | None
    steps: list[StepOut]

    @classmethod
    def of(cls, report: PipelineReport) -> ReportOut:
        return cls.model_validate(report)


class SummaryOut(Out):
    text: str
    covered: int = Field(description="How many of the session's messages the summary covers.")
    provider: str | None

    @classmethod
    def of(cls, summary: Summary | None) -> SummaryOut | None:
        if summary is None:
            return None
        return cls.model_validate(summary)


class AttemptOut(Out):
    provider: str
    error: str | None


class SummaryUpdateOut(Out):
    """A summary attempt: why it ran, whether a summary was stored, who wrote it."""

    reason: str | None
    updated: bool
    provider: str | None
    attempts: list[AttemptOut]

    @classmethod
    def of(cls, result: SummaryResult | None) -> SummaryUpdateOut | None:
        if result is None:
            return None
        return cls(
            reason=result.plan.reason if result.plan else None,
            updated=result.stored,
            provider=result.outcome.provider if result.outcome and result.stored else None,
            attempts=_attempts(result.outcome),
        )


class SnapshotOut(Out):
    goal: str | None
    completed_actions: list[str]
    current_phase: str | None
    key_observations: list[str]

    @classmethod
    def of(cls, snapshot: TaskSnapshot | None) -> SnapshotOut | None:
        if snapshot is None:
            return None
        return cls.model_validate(snapshot)


def _attempts(outcome: SummaryOutcome | None) -> list[AttemptOut]:
    attempts = outcome.attempts if outcome else ()
    return [AttemptOut.model_validate(a) for a in attempts]


def _report_line(r: ReportOut) -> str:
    return (
        f"{r.messages_out} message(s), ~{r.tokens_after} tokens (from {r.messages_in}, "
        f"~{r.tokens_before}); dropped {r.dropped}, truncated {r.truncated}, "
        f"backfilled {r.backfilled}, orphans converted {r.orphans_converted}"
    )


# -- append_messages ---------------------------------------------------------------------


class AppendArgs(Args):
    session_id: str = _SESSION_ID
    messages: list[dict[str, Any]] = _MESSAGES


class AppendOut(Out):
    session_id: str
    ids: list[str] = Field(description="Ids of the appended messages (assigned if missing).")
    message_count: int = Field(description="Messages stored in the session now.")


def _append(ctx: ToolContext, args: AppendArgs) -> AppendOut:
    result = ctx.history.append_messages(args.session_id, args.messages)
    return AppendOut(
        session_id=args.session_id, ids=list(result.ids), message_count=result.message_count
    )


def _append_text(out: AppendOut) -> str:
    return f"Appended {len(out.ids)} message(s) to {out.session_id}; {out.message_count} stored."


# -- get_history -------------------------------------------------------------------------


class GetHistoryArgs(Args):
    session_id: str = _SESSION_ID
    max_tokens: int | None = _MAX_TOKENS
    preset: str | None = _PRESET
    filters: list[str | dict[str, Any]] | None = _FILTERS


class WindowOut(Out):
    session_id: str
    messages: list[dict[str, Any]] = Field(description="The window, ready to send.")
    report: ReportOut
    summary_used: bool
    snapshot_used: bool
    summary: SummaryOut | None
    snapshot: SnapshotOut | None
    summary_update: SummaryUpdateOut | None = Field(
        description="The automatic summary attempt made before building the window, if any."
    )
    skipped_records: list[str] = SKIPPED_FIELD


def _get_history(ctx: ToolContext, args: GetHistoryArgs) -> WindowOut:
    result = ctx.history.get_history(
        args.session_id,
        max_tokens=args.max_tokens,
        preset=args.preset,
        filters=args.filters,
        summarizer=ctx.summarizer,
    )
    window = result.window
    return WindowOut(
        session_id=args.session_id,
        messages=window.messages,
        report=ReportOut.of(window.report),
        summary_used=window.summary_used,
        snapshot_used=window.snapshot_used,
        summary=SummaryOut.of(result.summary),
        snapshot=SnapshotOut.of(result.snapshot),
        summary_update=SummaryUpdateOut.of(result.summary_update),
        skipped_records=skipped(ctx, args.session_id),
    )


def _window_text(out: WindowOut) -> str:
    extras = [
        n for n, used in (("summary", out.summary_used), ("snapshot", out.snapshot_used)) if used
    ]
    lines = [f"History of {out.session_id}: {_report_line(out.report)}"]
    if extras:
        lines.append(f"Includes the {' and the '.join(extras)}.")
    update = out.summary_update
    if update is not None:
        lines.append(
            f"Summary updated by {update.provider}."
            if update.updated
            else "Summary update failed; the previous summary was kept."
        )
    return "\n".join(lines + skipped_lines(out.skipped_records))


# -- trim_messages -----------------------------------------------------------------------


class TrimArgs(Args):
    messages: list[dict[str, Any]] = _MESSAGES
    preset: str | None = _PRESET
    filters: list[str | dict[str, Any]] | None = _FILTERS
    max_tokens: int | None = _MAX_TOKENS


class TrimOut(Out):
    messages: list[dict[str, Any]]
    report: ReportOut


def _trim(ctx: ToolContext, args: TrimArgs) -> TrimOut:
    result = ctx.history.trim_messages(
        args.messages, preset=args.preset, filters=args.filters, max_tokens=args.max_tokens
    )
    return TrimOut(messages=result.messages, report=ReportOut.of(result.report))


def _trim_text(out: TrimOut) -> str:
    return f"Trimmed: {_report_line(out.report)}"


# -- summarize_history -------------------------------------------------------------------


class SummarizeArgs(Args):
    session_id: str | None = Field(None, description="Summarize this session's history.")
    messages: list[dict[str, Any]] | None = Field(
        None, description="Or summarize these messages (stateless; nothing is stored)."
    )
    previous_summary: str | None = Field(
        None, description="With messages: an earlier summary to fold in."
    )
    force: bool = Field(
        False, description="With session_id: summarize now even if the policy says not yet."
    )


class SummarizeOut(Out):
    session_id: str | None
    updated: bool = Field(description="True when a new summary was produced (and stored).")
    reason: str | None = Field(description="first, threshold or forced; null: nothing was due.")
    provider: str | None = Field(description="Who wrote the new summary.")
    summary: SummaryOut | None = Field(description="The summary now in force.")
    attempts: list[AttemptOut]
    forced: bool = Field(False, description="True when force was given.")


def _summarize(ctx: ToolContext, args: SummarizeArgs) -> SummarizeOut:
    if (args.session_id is None) == (args.messages is None):
        raise HistoryError(
            "give exactly one of session_id (summarize a session) or messages (stateless)",
            field="session_id",
        )
    if args.session_id is None:
        return _summarize_messages(ctx, args)
    if args.previous_summary is not None:
        raise HistoryError(
            "previous_summary goes with messages; a session uses its own summary",
            field="previous_summary",
        )
    result = ctx.history.summarize(args.session_id, force=args.force, summarizer=ctx.summarizer)
    update = SummaryUpdateOut.of(result)
    assert update is not None
    return SummarizeOut(
        session_id=args.session_id,
        updated=update.updated,
        reason=update.reason,
        provider=update.provider,
        summary=SummaryOut.of(result.summary),
        attempts=update.attempts,
        forced=args.force,
    )


def _summarize_messages(ctx: ToolContext, args: SummarizeArgs) -> SummarizeOut:
    messages = args.messages or []
    outcome = ctx.history.summarize_messages(
        messages, args.previous_summary, summarizer=ctx.summarizer
    )
    summary = (
        SummaryOut(text=outcome.text, covered=len(messages), provider=outcome.provider)
        if outcome.text is not None
        else None
    )
    return SummarizeOut(
        session_id=None,
        updated=summary is not None,
        reason="forced",
        provider=outcome.provider,
        summary=summary,
        attempts=_attempts(outcome),
    )


def _summarize_text(out: SummarizeOut) -> str:
    if out.updated and out.summary is not None:
        return f"Summary by {out.provider} ({out.summary.covered} messages):\n{out.summary.text}"
    if out.reason is None and out.forced:
        return (
            "Nothing to summarize: no message lies between the summary and the most recent "
            "messages, which are kept as they are ([history] keep_recent)."
        )
    if out.reason is None:
        return "No summary due yet (pass force=true to summarize now)."
    failed = "; ".join(f"{a.provider}: {a.error}" for a in out.attempts if a.error)
    return f"Summary failed ({failed}); the previous summary was kept."


# -- collapse_messages / clear_history ---------------------------------------------------


class CollapseArgs(Args):
    session_id: str = _SESSION_ID
    message_ids: list[str] = Field(description="Ids of the messages to collapse.")
    name: str = Field(description="The group's name (an existing group of that name is replaced).")
    description: str | None = Field(None, description="Shown in the group's placeholder.")


class GroupOut(Out):
    name: str
    message_ids: list[str]
    description: str | None


class GroupsOut(Out):
    session_id: str
    groups: list[GroupOut]


def _collapse(ctx: ToolContext, args: CollapseArgs) -> GroupsOut:
    history = ctx.history.collapse_messages(
        args.session_id, args.message_ids, args.name, args.description
    )
    return _groups(args.session_id, history)


def _groups(session_id: str, history: ConversationHistory) -> GroupsOut:
    groups = [GroupOut.model_validate(g) for g in history.groups]
    return GroupsOut(session_id=session_id, groups=groups)


def _groups_text(out: GroupsOut) -> str:
    lines = [f"- {g.name}: {len(g.message_ids)} message(s)" for g in out.groups]
    return "\n".join([f"Session {out.session_id}: {len(out.groups)} collapsed group(s)", *lines])


class SessionArgs(Args):
    session_id: str = _SESSION_ID


class ClearOut(Out):
    session_id: str
    cleared: bool
    message_count: int = Field(description="Messages kept on record (no longer sent).")


def _clear(ctx: ToolContext, args: SessionArgs) -> ClearOut:
    history = ctx.history.clear_history(args.session_id)
    return ClearOut(
        session_id=args.session_id, cleared=history.cleared, message_count=len(history.messages)
    )


def _clear_text(out: ClearOut) -> str:
    return f"Cleared {out.session_id}: the next window carries no earlier history."


# -- snapshot and stats ------------------------------------------------------------------


class UpdateSnapshotArgs(Args):
    session_id: str = _SESSION_ID
    goal: str | None = Field(None, description="Replaces the goal.")
    completed_actions: list[str] | None = Field(None, description="Appended (no duplicates).")
    current_phase: str | None = Field(None, description="Replaces the current phase.")
    key_observations: list[str] | None = Field(None, description="Appended (no duplicates).")


class SnapshotResultOut(Out):
    session_id: str
    snapshot: SnapshotOut | None


def _update_snapshot(ctx: ToolContext, args: UpdateSnapshotArgs) -> SnapshotResultOut:
    update = {
        "goal": args.goal,
        "completedActions": args.completed_actions,
        "currentPhase": args.current_phase,
        "keyObservations": args.key_observations,
    }
    update = {k: v for k, v in update.items() if v is not None}
    snapshot = ctx.history.update_snapshot(args.session_id, update)
    return SnapshotResultOut(session_id=args.session_id, snapshot=SnapshotOut.of(snapshot))


def _get_snapshot(ctx: ToolContext, args: SessionArgs) -> SnapshotResultOut:
    snapshot = ctx.history.get_snapshot(args.session_id)
    return SnapshotResultOut(session_id=args.session_id, snapshot=SnapshotOut.of(snapshot))


def _snapshot_text(out: SnapshotResultOut) -> str:
    s = out.snapshot
    if s is None:
        return f"Session {out.session_id} has no task snapshot."
    lines = [f"Task snapshot of {out.session_id}:", f"Goal: {s.goal or '-'}"]
    lines.append(f"Phase: {s.current_phase or '-'}")
    lines += [f"Done: {a}" for a in s.completed_actions]
    lines += [f"Noted: {o}" for o in s.key_observations]
    return "\n".join(lines)


class StatsOut(Out):
    session_id: str
    message_count: int
    estimated_tokens: int
    has_summary: bool
    has_snapshot: bool
    summarized_messages: int
    groups: int
    cleared: bool
    skipped_records: list[str] = SKIPPED_FIELD

    @classmethod
    def of(cls, session_id: str, stats: HistoryStats, skipped: list[str]) -> StatsOut:
        names = set(cls.model_fields) - {"session_id", "skipped_records"}
        fields = {k: getattr(stats, k) for k in names}
        return cls(session_id=session_id, skipped_records=skipped, **fields)


def _stats(ctx: ToolContext, args: SessionArgs) -> StatsOut:
    stats = ctx.history.get_context_stats(args.session_id)
    return StatsOut.of(args.session_id, stats, skipped(ctx, args.session_id))


def _stats_text(out: StatsOut) -> str:
    line = (
        f"Session {out.session_id}: {out.message_count} message(s), ~{out.estimated_tokens} "
        f"tokens; summary: {'yes' if out.has_summary else 'no'}; "
        f"snapshot: {'yes' if out.has_snapshot else 'no'}"
    )
    return "\n".join([line, *skipped_lines(out.skipped_records)])


def _spec(
    name: str,
    description: str,
    args: type[Args],
    result: type[Out],
    run: Callable[[ToolContext, Any], Out],
    text: Callable[[Any], str],
    *,
    read_only: bool = False,
) -> ToolSpec:  # type: ignore[type-arg]
    return ToolSpec(name, description, args, result, run, text, read_only=read_only)


APPEND_MESSAGES = _spec(
    "append_messages",
    "Append chat messages (OpenAI or Anthropic shape) to a session's history. Returns the "
    "ids given to them (use them with collapse_messages).",
    AppendArgs,
    AppendOut,
    _append,
    _append_text,
)
GET_HISTORY = _spec(
    "get_history",
    "The session's history as a window ready to send: within max_tokens, every tool call "
    "answered right after it, with the running summary and task snapshot when there are "
    "any. Summarizes first when the summary policy says it is due. Includes a run report.",
    GetHistoryArgs,
    WindowOut,
    _get_history,
    _window_text,
)
TRIM_MESSAGES = _spec(
    "trim_messages",
    "Run the history filters over the given messages (no session involved): the same "
    "window guarantees as get_history, plus a report of what was dropped or repaired.",
    TrimArgs,
    TrimOut,
    _trim,
    _trim_text,
    read_only=True,
)
SUMMARIZE_HISTORY = _spec(
    "summarize_history",
    "Summarize a session's history now (session_id; force=true even if not yet due) or any "
    "messages statelessly (messages, previous_summary). Reports which provider wrote it; a "
    "failed attempt keeps the previous summary.",
    SummarizeArgs,
    SummarizeOut,
    _summarize,
    _summarize_text,
)
COLLAPSE_MESSAGES = _spec(
    "collapse_messages",
    "Collapse messages of a session into one named placeholder in windows built with the "
    "'topic' preset (or a filter list with collapseGroupReplacer).",
    CollapseArgs,
    GroupsOut,
    _collapse,
    _groups_text,
)
CLEAR_HISTORY = _spec(
    "clear_history",
    "Clear the context: the next get_history sends no earlier messages and no summary. "
    "Messages stay on record.",
    SessionArgs,
    ClearOut,
    _clear,
    _clear_text,
)
UPDATE_SNAPSHOT = _spec(
    "update_snapshot",
    "Update the session's task snapshot (goal, completed actions, current phase, key "
    "observations); lists append, the rest replaces. The snapshot leads every window.",
    UpdateSnapshotArgs,
    SnapshotResultOut,
    _update_snapshot,
    _snapshot_text,
)
GET_SNAPSHOT = _spec(
    "get_snapshot",
    "The session's task snapshot (null if none was set).",
    SessionArgs,
    SnapshotResultOut,
    _get_snapshot,
    _snapshot_text,
    read_only=True,
)
GET_CONTEXT_STATS = _spec(
    "get_context_stats",
    "A session's history stats: message count, estimated tokens, whether it has a summary "
    "and a task snapshot.",
    SessionArgs,
    StatsOut,
    _stats,
    _stats_text,
    read_only=True,
)

HISTORY_TOOLS: tuple[ToolSpec, ...] = (  # type: ignore[type-arg]
    APPEND_MESSAGES,
    GET_HISTORY,
    TRIM_MESSAGES,
    SUMMARIZE_HISTORY,
    COLLAPSE_MESSAGES,
    CLEAR_HISTORY,
    UPDATE_SNAPSHOT,
    GET_SNAPSHOT,
    GET_CONTEXT_STATS,
)
