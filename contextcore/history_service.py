"""Session-bound history operations: load a session's history, apply a pure
:mod:`contextcore.history` function, save the session back before returning.

History lives in ``Session.extras["history"]`` (``SessionHistory.to_dict()``), so it persists
with whatever store the broker uses. Every mutation runs under the broker's lock, the same
one its own mutations take, so a history change and, say, a recorded turn on the same
session never overwrite each other.

Summaries are computed outside the lock (a provider may take seconds) and applied only if
the history they were planned from has not been summarized or cleared meanwhile.
Automatic summarization (``[history] auto_summarize``) runs in :meth:`get_history`, right
before the window is built, so the window carries the freshest summary; appends stay fast.
Errors are ``HistoryError`` / ``SessionError`` naming the bad field.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from .broker import ContextBroker
from .config import HistoryConfig, LimitsConfig
from .errors import HistoryError
from .history import (
    CollapseGroup,
    ExtractiveSummarizer,
    FilterRegistry,
    FilterSpec,
    HistoryStats,
    HistoryWindow,
    PipelineResult,
    RunContext,
    SessionHistory,
    SummarizerChain,
    Summary,
    SummaryOutcome,
    SummaryPlan,
    SummaryPolicy,
    TaskSnapshot,
    build_pipeline,
    default_registry,
    get_window,
    history_stats,
    parse_messages,
    plan_summary,
)
from .history import append_messages as _append
from .history import clear_history as _clear
from .history import collapse_messages as _collapse
from .history import update_snapshot as _update_snapshot
from .history.limits import check_append, check_label, check_snapshot, check_text
from .history.summary import clip_to_tokens
from .sessions import Session

__all__ = [
    "EXTRACTIVE",
    "AppendResult",
    "HistoryResult",
    "HistoryService",
    "SummaryResult",
    "extractive_chain",
    "policy_from_config",
]

log = logging.getLogger(__name__)

EXTRACTIVE = "extractive"
_KEY = "history"


def extractive_chain() -> SummarizerChain:
    """A chain holding only the extractive summarizer (needs no LLM, never fails)."""
    return SummarizerChain([(EXTRACTIVE, ExtractiveSummarizer())])


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
    """The ids given to the appended messages and the session's history afterwards."""

    ids: tuple[str, ...]
    history: SessionHistory


@dataclass(frozen=True)
class SummaryResult:
    """A summary attempt: the plan (``None``: nothing was due), the providers' outcome
    (``None`` when nothing ran), whether it was stored, and the summary now in force."""

    plan: SummaryPlan | None
    outcome: SummaryOutcome | None
    stored: bool
    summary: Summary | None

    def to_dict(self) -> dict[str, Any]:
        """The attempt as camelCase JSON."""
        return {
            "reason": self.plan.reason if self.plan else None,
            "updated": self.stored,
            "provider": self.outcome.provider if self.outcome and self.stored else None,
            "attempts": self.outcome.to_dict()["attempts"] if self.outcome else [],
            "summary": self.summary.to_dict() if self.summary else None,
        }


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
        # The broker's own lock: its mutations save the whole session too, so sharing
        # one lock is what keeps a history change and a recorded turn from racing.
        self._lock: threading.RLock = broker.lock

    # -- reading and writing ------------------------------------------------------------

    def history(self, session_id: str) -> SessionHistory:
        """The session's history (empty for a session that has none yet)."""
        return _history_of(self.broker.session(session_id))

    def _mutate(
        self, session_id: str, change: Callable[[SessionHistory], SessionHistory]
    ) -> SessionHistory:
        with self._lock:
            session = self.broker.session(session_id)
            updated = change(_history_of(session))
            self.broker.store.save(_with_history(session, updated))
        return updated

    # -- operations ---------------------------------------------------------------------

    def append_messages(self, session_id: str, messages: Sequence[object]) -> AppendResult:
        """Validate and append ``messages`` (ids assigned where missing); messages over
        ``[limits]`` are refused and nothing is stored."""
        before: list[int] = []

        def change(history: SessionHistory) -> SessionHistory:
            before.append(len(history.messages))
            updated = _append(history, messages)
            check_append(updated.messages[before[0] :], before[0], self.limits)
            return updated

        history = self._mutate(session_id, change)
        return AppendResult(tuple(m.id for m in history.messages[before[0] :]), history)

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
    ) -> SessionHistory:
        """Collapse the named messages into one placeholder (same name: replaced)."""
        check_label(name, self.limits, "name")
        check_label(description, self.limits, "description")
        group = CollapseGroup(name, tuple(dict.fromkeys(message_ids)), description)
        return self._mutate(session_id, lambda h: _collapse(h, group))

    def clear_history(self, session_id: str) -> SessionHistory:
        """Clear the context: the next window carries no history; the summary is dropped."""
        return self._mutate(session_id, _clear)

    def update_snapshot(self, session_id: str, update: Mapping[str, Any]) -> TaskSnapshot:
        """Merge ``update`` (camelCase keys) into the task snapshot; returns the result.
        A field that would grow past ``[limits] max_snapshot_field_chars`` is refused and
        nothing is stored."""

        def change(current: SessionHistory) -> SessionHistory:
            updated = _update_snapshot(current, update)
            assert updated.snapshot is not None
            check_snapshot(updated.snapshot, update.keys(), self.limits)
            return updated

        history = self._mutate(session_id, change)
        assert history.snapshot is not None
        return history.snapshot

    def get_snapshot(self, session_id: str) -> TaskSnapshot | None:
        """The session's task snapshot, if any."""
        return self.history(session_id).snapshot

    def get_context_stats(self, session_id: str) -> HistoryStats:
        """Message count, estimated tokens, summary and snapshot presence."""
        return history_stats(self.history(session_id))

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

        def change(current: SessionHistory) -> SessionHistory:
            # Apply only if nobody summarized or cleared while the providers ran.
            if current.summary != history.summary or current.cleared_at != history.cleared_at:
                stored.append(current.summary)
                return current
            stored.append(new)
            return replace(current, summary=new)

        self._mutate(session_id, change)
        return SummaryResult(plan, outcome, stored[0] is new, stored[0])


def _history_of(session: Session) -> SessionHistory:
    data = session.extras.get(_KEY)
    return SessionHistory.from_dict(data) if data else SessionHistory()


def _with_history(session: Session, history: SessionHistory) -> Session:
    return replace(session, extras={**session.extras, _KEY: history.to_dict()})


def _check_budget(max_tokens: int | None) -> int | None:
    if max_tokens is not None and (
        isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1
    ):
        raise HistoryError(
            f"max_tokens must be a positive integer, got {max_tokens!r}", field="max_tokens"
        )
    return max_tokens
