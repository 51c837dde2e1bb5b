"""A session's history state and the operations on it.

:class:`ConversationHistory` is an immutable value: every operation returns a new one. A store
keeps it as separate records: the messages (validated once, when they enter), and a small
state (``state_dict``: summary, collapsed groups, clear point, shape) and the snapshot;
:meth:`ConversationHistory.from_records` puts them back together without validating the
messages again. ``to_dict`` / ``from_dict`` are the single-document format older stores
wrote, read on migration. Messages are append-only; ids are assigned at append time from
the message and its position in the session, so they never change afterwards.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from ..errors import HistoryError
from .context import CollapseGroup
from .messages import Message, Shape, detect_shape, make_message, parse_messages
from .snapshot import TaskSnapshot
from .summaries.policy import (
    Summarizer,
    SummarizerChain,
    Summary,
    SummaryOutcome,
    SummaryPlan,
    SummaryPolicy,
    plan_summary,
)

__all__ = [
    "ConversationHistory",
    "SummaryUpdate",
    "append_messages",
    "check_group",
    "check_shape",
    "clear_history",
    "collapse_messages",
    "update_snapshot",
    "update_summary",
    "with_group",
]

FORMAT_VERSION = 1


@dataclass(frozen=True)
class ConversationHistory:
    """Messages, collapsed groups, summary, task snapshot and clear point of one session."""

    messages: tuple[Message, ...] = ()
    groups: tuple[CollapseGroup, ...] = ()
    summary: Summary | None = None
    snapshot: TaskSnapshot | None = None
    cleared_at: int | None = None
    shape: Shape | None = None

    @property
    def live_start(self) -> int:
        """Position of the first message still part of the conversation (after a clear)."""
        return self.cleared_at or 0

    @property
    def cleared(self) -> bool:
        """True right after a clear: the next window carries no history."""
        return self.cleared_at is not None and self.cleared_at == len(self.messages)

    def to_dict(self) -> dict[str, Any]:
        """The state as plain JSON."""
        return {
            "version": FORMAT_VERSION,
            "messages": [dict(m.raw) for m in self.messages],
            "groups": [group.to_dict() for group in self.groups],
            "summary": self.summary.to_dict() if self.summary else None,
            "snapshot": self.snapshot.to_dict() if self.snapshot else None,
            "clearedAt": self.cleared_at,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ConversationHistory:
        """Rebuild a state saved by :meth:`to_dict` (messages are validated again)."""
        raws = data.get("messages", [])
        messages = tuple(parse_messages(raws))
        summary, snapshot = data.get("summary"), data.get("snapshot")
        return cls(
            messages=messages,
            groups=tuple(CollapseGroup.from_dict(g) for g in data.get("groups", [])),
            summary=Summary.from_dict(summary) if summary else None,
            snapshot=TaskSnapshot.from_dict(snapshot) if snapshot else None,
            cleared_at=data.get("clearedAt"),
            shape=detect_shape([m.raw for m in messages]),
        )

    def state_dict(self) -> dict[str, Any]:
        """The small state stored beside the messages: summary, groups, clear point, shape."""
        return {
            "groups": [group.to_dict() for group in self.groups],
            "summary": self.summary.to_dict() if self.summary else None,
            "clearedAt": self.cleared_at,
            "shape": self.shape,
        }

    @classmethod
    def from_records(
        cls,
        raws: Sequence[Mapping[str, Any]],
        state: Mapping[str, Any] | None,
        snapshot: Mapping[str, Any] | None,
    ) -> ConversationHistory:
        """Rebuild from stored records; the messages were validated when they entered."""
        state = state or {}
        summary = state.get("summary")
        return cls(
            messages=tuple(make_message(raw) for raw in raws),
            groups=tuple(CollapseGroup.from_dict(g) for g in state.get("groups", [])),
            summary=Summary.from_dict(summary) if summary else None,
            snapshot=TaskSnapshot.from_dict(snapshot) if snapshot else None,
            cleared_at=state.get("clearedAt"),
            shape=state.get("shape"),
        )


def check_shape(messages: Sequence[Message], start: int, shape: Shape | None) -> Shape | None:
    """The session's shape after appending ``messages`` at ``start``; ``HistoryError`` naming
    ``messages[i]`` for a message of the other shape."""
    for offset, message in enumerate(messages):
        hint = detect_shape([message.raw])
        if hint and shape and hint != shape:
            where = f"messages[{start + offset}]"
            raise HistoryError(
                f"{where} is {hint}-style but this session is {shape}-style; "
                "send one shape per session",
                field=where,
            )
        shape = shape or hint
    return shape


def append_messages(history: ConversationHistory, raws: Sequence[object]) -> ConversationHistory:
    """Validate ``raws``, assign missing ids and append them.

    Raises ``HistoryError`` naming ``messages[i].field`` (``i`` counted in the session) for a
    malformed message, a reused id or a shape different from the session's.
    """
    start = len(history.messages)
    parsed = parse_messages(
        raws,
        start=start,
        taken_ids=frozenset(m.id for m in history.messages),
        taken_call_ids=frozenset(c for m in history.messages for c in m.call_ids),
    )
    shape = check_shape(parsed, start, history.shape)
    return replace(history, messages=history.messages + tuple(parsed), shape=shape)


def collapse_messages(history: ConversationHistory, group: CollapseGroup) -> ConversationHistory:
    """Add ``group`` (replacing a group of the same name); unknown message ids are an error."""
    check_group(group, {m.id for m in history.messages})
    return with_group(history, group)


def check_group(group: CollapseGroup, known: Collection[str]) -> None:
    """``HistoryError`` if ``group`` has no name, no messages, or ids not in ``known``."""
    if not group.name:
        raise HistoryError("a collapsed group needs a non-empty name", field="name")
    unknown = [i for i in group.message_ids if i not in known]
    if unknown:
        raise HistoryError(
            f"unknown message ids {unknown!r} in group {group.name!r}; use ids from the "
            "session's messages",
            field="message_ids",
        )
    if not group.message_ids:
        raise HistoryError(
            f"group {group.name!r} lists no messages; name at least one", field="message_ids"
        )


def with_group(history: ConversationHistory, group: CollapseGroup) -> ConversationHistory:
    """``history`` holding ``group``, replacing a group of the same name (ids unchecked)."""
    groups = (*(g for g in history.groups if g.name != group.name), group)
    return replace(history, groups=groups)


def clear_history(history: ConversationHistory) -> ConversationHistory:
    """Clear the context: the next window is empty; later messages start afresh.

    Messages are kept (for stats and the record) but leave the conversation, and the
    summary is dropped.
    """
    return replace(history, cleared_at=len(history.messages), summary=None)


def update_snapshot(history: ConversationHistory, update: Mapping[str, Any]) -> ConversationHistory:
    """Merge ``update`` (camelCase JSON) into the session's task snapshot."""
    current = history.snapshot or TaskSnapshot()
    return replace(history, snapshot=current.merge(update))


@dataclass(frozen=True)
class SummaryUpdate:
    """The state after a summary attempt, what was planned and what the providers did."""

    history: ConversationHistory
    plan: SummaryPlan | None
    outcome: SummaryOutcome | None

    @property
    def updated(self) -> bool:
        """True when a new summary was stored."""
        return self.outcome is not None and self.outcome.text is not None


def update_summary(
    history: ConversationHistory,
    summarizer: Summarizer | SummarizerChain,
    policy: SummaryPolicy | None = None,
    *,
    force: bool = False,
) -> SummaryUpdate:
    """Summarize if the policy says so (or ``force``); keep the old summary on failure."""
    policy = policy or SummaryPolicy()
    plan = plan_summary(
        history.messages, history.summary, policy, start=history.live_start, force=force
    )
    if plan is None:
        return SummaryUpdate(history, None, None)
    chain = (
        summarizer
        if isinstance(summarizer, SummarizerChain)
        else SummarizerChain([(type(summarizer).__name__, summarizer)])
    )
    folded = [m.raw for m in history.messages[plan.start : plan.end]]
    outcome = chain.summarize(folded, plan.previous, policy.max_tokens)
    if outcome.text is None:
        return SummaryUpdate(history, plan, outcome)
    summary = Summary(outcome.text, plan.end, outcome.provider)
    return SummaryUpdate(replace(history, summary=summary), plan, outcome)
