"""Per-session history statistics."""

from __future__ import annotations

from dataclasses import dataclass

from .conversation import ConversationHistory
from .tokens import Tokenizer, chars_per_4, window_tokens

__all__ = ["HistoryStats", "history_stats", "stats_from_totals"]


@dataclass(frozen=True)
class HistoryStats:
    """How big a session's history is and what it holds."""

    message_count: int
    estimated_tokens: int
    has_summary: bool
    has_snapshot: bool
    summarized_messages: int
    groups: int
    cleared: bool


def history_stats(
    history: ConversationHistory, tokenizer: Tokenizer = chars_per_4, overhead: int = 8
) -> HistoryStats:
    """Stats over every stored message (cleared ones included)."""
    return HistoryStats(
        message_count=len(history.messages),
        estimated_tokens=window_tokens((m.raw for m in history.messages), tokenizer, overhead),
        has_summary=history.summary is not None,
        has_snapshot=history.snapshot is not None and not history.snapshot.is_empty,
        summarized_messages=history.summary.covered if history.summary else 0,
        groups=len(history.groups),
        cleared=history.cleared,
    )


def stats_from_totals(count: int, tokens: int, state: ConversationHistory) -> HistoryStats:
    """Stats from a store's message counters (``count`` messages, ``tokens`` estimated with
    the default tokenizer) and the history's state without its messages: the same figures
    :func:`history_stats` computes, at a cost independent of the history's length."""
    return HistoryStats(
        message_count=count,
        estimated_tokens=tokens,
        has_summary=state.summary is not None,
        has_snapshot=state.snapshot is not None and not state.snapshot.is_empty,
        summarized_messages=state.summary.covered if state.summary else 0,
        groups=len(state.groups),
        cleared=state.cleared_at is not None and state.cleared_at == count,
    )
