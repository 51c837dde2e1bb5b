"""Session-bound history operations over the session store's records.

Messages are validated once, when they enter, and appended as records with store-assigned
sequence numbers: an append reads neither the history nor the turn log (only the message
count, the small history state and whether the new ids are taken). The summary, collapsed
groups, clear point and shape form a small state updated atomically by the store, and the
task snapshot is its own record, so concurrent writers (threads, processes, replicas) never
overwrite each other's changes.

Summaries are computed outside any transaction (a provider may take seconds) and applied
only if the history they were planned from has not been summarized or cleared meanwhile.
Automatic summarization (``[history] auto_summarize``) runs in :meth:`get_history`, right
before the window is built, so the window carries the freshest summary; appends stay fast.
Errors are ``HistoryError`` / ``SessionError`` naming the bad field.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any

from ..call_record import ProxiedCall, call_messages
from ..config import HistoryConfig, LimitsConfig
from ..errors import HistoryError
from ..history import (
    CollapseGroup,
    ConversationHistory,
    FilterRegistry,
    FilterSpec,
    HistoryStats,
    HistoryWindow,
    Message,
    PipelineResult,
    RunContext,
    Shape,
    SummarizerChain,
    Summary,
    SummaryOutcome,
    SummaryPlan,
    SummaryPolicy,
    TaskSnapshot,
    build_pipeline,
    default_registry,
    get_window,
    parse_messages,
    plan_summary,
    stats_from_totals,
)
from ..history.conversation import check_group, check_shape, with_group
from ..history.limits import check_append, check_label, check_snapshot, check_text
from ..history.messages import check_ids
from ..history.summaries.extractive import extractive_chain
from ..history.summaries.policy import clip_to_tokens
from ..history.tokens import message_cost
from ..items import ItemRef
from ..sessions import check_session_id
from ..store import DamagedRecord, DuplicateRecord, JsonChange, MessageRecord, RecordedCall
from .broker import ContextBroker

__all__ = [
    "AppendResult",
    "HistoryResult",
    "HistoryService",
    "SummaryResult",
    "policy_from_config",
]

log = logging.getLogger(__name__)


def policy_from_config(config: HistoryConfig) -> SummaryPolicy:
    """The summary policy the ``[history]`` section describes."""
    return SummaryPolicy(
        first_after=config.summarize_after,
        threshold=config.summary_threshold,
        keep_recent=config.keep_recent,
        max_tokens=config.summary_max_tokens,
        window_without_summary=config.window_without_summary,
    )


@dataclass(frozen=True)
class AppendResult:
    """The ids given to the appended messages and the session's message count afterwards."""

    ids: tuple[str, ...]
    message_count: int


@dataclass(frozen=True)
class SummaryResult:
    """A summary attempt: the plan (``None``: nothing was due), the providers' outcome
    (``None`` when nothing ran), whether it was stored, and the summary now in force."""

    plan: SummaryPlan | None
    outcome: SummaryOutcome | None
    stored: bool
    summary: Summary | None


@dataclass(frozen=True)
class HistoryResult:
    """A window ready to send, the automatic summary attempt (if any) and the state used."""

    window: HistoryWindow
    summary_update: SummaryResult | None
    summary: Summary | None
    snapshot: TaskSnapshot | None


ChainFactory = Callable[[], SummarizerChain]


class HistoryService:
    """History operations on the broker's sessions, durable when they return."""

    def __init__(
        self,
        broker: ContextBroker,
        config: HistoryConfig,
        *,
        registry: FilterRegistry | None = None,
        summarizer: ChainFactory = extractive_chain,
        limits: LimitsConfig | None = None,
    ) -> None:
        self.broker = broker
        self.config = config
        self.limits = limits or LimitsConfig()
        self.registry = registry or default_registry()
        self.policy = policy_from_config(config)
        self._default_chain = summarizer

    # -- reading and writing ------------------------------------------------------------

    def history(self, session_id: str) -> ConversationHistory:
        """The session's history (empty for a session that has none yet); reads every
        message, as stored."""
        sid = self.broker.require_session(session_id)
        store = self.broker.store
        raws = [m.raw for m in store.messages(sid)]
        return ConversationHistory.from_records(raws, store.history_state(sid), store.snapshot(sid))

    def shape(self, session_id: str) -> Shape | None:
        """The message shape the session uses, if known (reads the small state only)."""
        sid = self.broker.require_session(session_id)
        return (self.broker.store.history_state(sid) or {}).get("shape")

    def _update_state(
        self, session_id: str, change: Callable[[ConversationHistory], ConversationHistory]
    ) -> None:
        """Apply ``change`` to the history state (not the messages) atomically."""

        def apply(current: dict[str, Any] | None) -> dict[str, Any]:
            return change(ConversationHistory.from_records((), current, None)).state_dict()

        self.broker.store.update_history_state(session_id, apply)

    # -- operations ---------------------------------------------------------------------

    def append_messages(self, session_id: str, messages: Sequence[object]) -> AppendResult:
        """Validate and append ``messages`` (ids assigned where missing); messages over
        ``[limits]`` are refused and nothing is stored."""
        sid = self.broker.require_session(session_id)
        store = self.broker.store
        start = store.message_count(sid)
        parsed = parse_messages(messages, start=start)
        check_append(parsed, start, self.limits)
        known = self.shape(sid)
        shape = check_shape(parsed, start, known)
        taken_ids, taken_calls = store.used_ids(sid, [m.id for m in parsed], _call_ids(parsed))
        check_ids(parsed, start=start, taken_ids=taken_ids, taken_call_ids=taken_calls)
        records = [MessageRecord(m.id, m.raw, m.call_ids, tokens=message_cost(m)) for m in parsed]
        try:
            seqs = store.append_messages(sid, records)
        except DuplicateRecord as exc:
            raise HistoryError(
                f"{exc.message}; give each message and tool call a unique id or leave it out",
                field="messages",
            ) from exc
        if shape != known:
            store.update_history_state(sid, lambda cur: {**(cur or {}), "shape": shape})
        return AppendResult(tuple(m.id for m in parsed), (seqs[-1] + 1) if seqs else start)

    def record_call(
        self, session_id: str, call: ProxiedCall, *, in_history: bool = True
    ) -> RecordedCall | None:
        """Record a call forwarded for the session in one store write: the call record and
        the call with its result as two history messages in the session's shape (when
        ``in_history``), and, for a call that succeeded after a turn, the use of its tool
        for that turn (:attr:`ContextBroker.usage`, once per turn and tool). Reads only the
        latest turn and the small history state before it; None when nothing was due.
        ``UnknownSession`` if the session is not stored (then nothing is)."""
        sid = check_session_id(session_id)
        store, usage = self.broker.store, self.broker.usage
        event = None
        if not call.is_error:
            ref = ItemRef("tool", call.tool, call.server)
            event = usage.call_event(sid, store.last_turn(sid), ref)
        if not in_history and event is None:
            return None
        messages: list[MessageRecord] = []
        shape: JsonChange | None = None
        if in_history:
            messages, shape = self._call_records(sid, call)
        record = asdict(call) if in_history else None
        written = store.record_call(sid, record, messages, event, shape)
        if event is not None and written.usage is not None:
            usage.learned(sid, event, written.usage)
        return written

    def _call_records(
        self, session_id: str, call: ProxiedCall
    ) -> tuple[list[MessageRecord], JsonChange | None]:
        """A call and its result as history records in the session's shape, and the change
        that sets the shape when the session had none; no records (logged) when they are
        over ``[limits]``, so the call record and its use are still kept."""
        known = (self.broker.store.history_state(session_id) or {}).get("shape")
        raws = call_messages(
            known or "openai", call.tool, call.arguments, call.result, call.is_error
        )
        parsed = parse_messages(raws)
        try:
            check_append(parsed, 0, self.limits)
        except HistoryError as exc:
            log.warning("call of %s kept out of session history: %s", call.tool, exc.message)
            return [], None
        records = [MessageRecord(m.id, m.raw, m.call_ids, tokens=message_cost(m)) for m in parsed]
        shape = check_shape(parsed, 0, known)
        if shape == known:
            return records, None

        def set_shape(current: dict[str, Any] | None) -> dict[str, Any]:
            state = current or {}
            # Another writer may have set it meanwhile: the first shape stays.
            return state if state.get("shape") else {**state, "shape": shape}

        return records, set_shape

    def get_history(
        self,
        session_id: str,
        *,
        max_tokens: int | None = None,
        preset: str | None = None,
        filters: FilterSpec | None = None,
        summarizer: SummarizerChain | None = None,
        only_text: bool = False,
    ) -> HistoryResult:
        """The window for the next request, summarizing first if the policy says so."""
        pipeline = build_pipeline(self._spec(preset, filters), self.registry)
        update = None
        if self.config.auto_summarize:
            update = self._summarize(session_id, False, summarizer)
            if update.plan is None:
                update = None
        history = self.history(session_id)
        window = get_window(
            history,
            filters=pipeline,
            max_tokens=self._budget(max_tokens),
            policy=self.policy,
            only_text=only_text,
        )
        summary = history.summary if window.summary_used else None
        snapshot = history.snapshot if window.snapshot_used else None
        return HistoryResult(window, update, summary, snapshot)

    def trim_messages(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        preset: str | None = None,
        filters: FilterSpec | None = None,
        max_tokens: int | None = None,
    ) -> PipelineResult:
        """Run the pipeline over ``messages`` without touching any session."""
        pipeline = build_pipeline(self._spec(preset, filters), self.registry)
        return pipeline.run(messages, RunContext(max_tokens=_check_budget(max_tokens)))

    def summarize(
        self, session_id: str, *, force: bool = False, summarizer: SummarizerChain | None = None
    ) -> SummaryResult:
        """Summarize the session if due (or ``force``); a failure keeps the old summary."""
        return self._summarize(session_id, force, summarizer)

    def summarize_messages(
        self,
        messages: Sequence[Mapping[str, Any]],
        previous_summary: str | None = None,
        *,
        summarizer: SummarizerChain | None = None,
    ) -> SummaryOutcome:
        """Summarize ``messages`` (and ``previous_summary``) statelessly."""
        check_text(
            previous_summary,
            self.limits.max_summary_chars,
            "max_summary_chars",
            "previous_summary",
            "send a shorter summary",
        )
        raws = [dict(m.raw) for m in parse_messages(messages)]
        if not raws and not previous_summary:
            raise HistoryError("nothing to summarize; send messages", field="messages")
        chain = summarizer or self._default_chain()
        return chain.summarize(raws, previous_summary, self.policy.max_tokens)

    def collapse_messages(
        self,
        session_id: str,
        message_ids: Sequence[str],
        name: str,
        description: str | None = None,
    ) -> ConversationHistory:
        """Collapse the named messages into one placeholder (same name: replaced)."""
        check_label(name, self.limits, "name")
        check_label(description, self.limits, "description")
        group = CollapseGroup(name, tuple(dict.fromkeys(message_ids)), description)
        sid = self.broker.require_session(session_id)
        found, _ = self.broker.store.used_ids(sid, group.message_ids, ())
        check_group(group, found)
        self._update_state(sid, lambda h: with_group(h, group))
        return self.history(sid)

    def clear_history(self, session_id: str) -> ConversationHistory:
        """Clear the context: the next window carries no history; the summary is dropped."""
        sid = self.broker.require_session(session_id)
        count = self.broker.store.message_count(sid)
        self._update_state(sid, lambda h: replace(h, cleared_at=count, summary=None))
        return self.history(sid)

    def update_snapshot(self, session_id: str, update: Mapping[str, Any]) -> TaskSnapshot:
        """Merge ``update`` (camelCase keys) into the task snapshot; returns the result.
        A field that would grow past ``[limits] max_snapshot_field_chars`` is refused and
        nothing is stored."""
        sid = self.broker.require_session(session_id)

        def change(current: dict[str, Any] | None) -> dict[str, Any]:
            base = TaskSnapshot.from_dict(current) if current else TaskSnapshot()
            merged = base.merge(update)
            check_snapshot(merged, update.keys(), self.limits)
            return merged.to_dict()

        stored = self.broker.store.update_snapshot(sid, change)
        assert stored is not None
        return TaskSnapshot.from_dict(stored)

    def get_snapshot(self, session_id: str) -> TaskSnapshot | None:
        """The session's task snapshot, if any (reads the snapshot only)."""
        stored = self.broker.store.snapshot(self.broker.require_session(session_id))
        return TaskSnapshot.from_dict(stored) if stored else None

    def get_context_stats(self, session_id: str) -> HistoryStats:
        """Message count, estimated tokens, summary and snapshot presence; reads the store's
        message counters and the small state, never the messages."""
        sid = self.broker.require_session(session_id)
        store = self.broker.store
        count, tokens = store.message_totals(sid)
        state = ConversationHistory.from_records((), store.history_state(sid), store.snapshot(sid))
        return stats_from_totals(count, tokens, state)

    def skipped_records(self, session_id: str) -> tuple[DamagedRecord, ...]:
        """The session's damaged stored records that reads skipped (reads nothing)."""
        return self.broker.store.skipped_records(self.broker.require_session(session_id))

    # -- helpers ------------------------------------------------------------------------

    def _spec(self, preset: str | None, filters: FilterSpec | None) -> FilterSpec:
        if preset is not None and filters is not None:
            raise HistoryError("give either preset or filters, not both", field="filters")
        if filters is not None:
            if isinstance(filters, str):
                raise HistoryError(
                    f"filters must be a list of filter entries, got {filters!r}; "
                    "name a preset with preset",
                    field="filters",
                )
            return filters
        if preset is not None and self.registry.preset(preset) is None:
            names = ", ".join(self.registry.preset_names())
            raise HistoryError(f"unknown preset {preset!r}; use one of {names}", field="preset")
        return preset or self.config.preset

    def _budget(self, max_tokens: int | None) -> int:
        return _check_budget(max_tokens) or self.config.max_tokens

    def _summarize(
        self, session_id: str, force: bool, summarizer: SummarizerChain | None
    ) -> SummaryResult:
        history = self.history(session_id)
        plan = plan_summary(
            history.messages, history.summary, self.policy, start=history.live_start, force=force
        )
        if plan is None:
            return SummaryResult(None, None, False, history.summary)
        chain = summarizer or self._default_chain()
        folded = [m.raw for m in history.messages[plan.start : plan.end]]
        outcome = chain.summarize(folded, plan.previous, self.policy.max_tokens)
        if outcome.text is None:
            log.warning("no summarizer succeeded for session %s; keeping the old one", session_id)
            return SummaryResult(plan, outcome, False, history.summary)
        text = clip_to_tokens(outcome.text, self.limits.max_summary_chars, len)
        new = Summary(text, plan.end, outcome.provider)
        stored: list[Summary | None] = []

        def change(current: ConversationHistory) -> ConversationHistory:
            # Apply only if nobody summarized or cleared while the providers ran; the
            # store may run this again after a conflict, so only the last verdict counts.
            if current.summary != history.summary or current.cleared_at != history.cleared_at:
                stored.append(current.summary)
                return current
            stored.append(new)
            return replace(current, summary=new)

        self._update_state(session_id, change)
        return SummaryResult(plan, outcome, stored[-1] is new, stored[-1])


def _call_ids(messages: Sequence[Message]) -> list[str]:
    return [c for m in messages for c in m.call_ids]


def _check_budget(max_tokens: int | None) -> int | None:
    if max_tokens is not None and (
        isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1
    ):
        raise HistoryError(
            f"max_tokens must be a positive integer, got {max_tokens!r}", field="max_tokens"
        )
    return max_tokens
