"""Summaries that stay fresh: when to summarize, what to fold in, and who summarizes.

Policy (defaults): once a session has more than ``first_after`` (10) text messages and no
summary, summarize all but the last ``keep_recent`` (6). Afterwards, once more than
``threshold`` (10) messages lie beyond what the summary covers, fold the previous summary and
the unsummarized middle (the last ``keep_recent`` excluded) into a new one. A cut never
separates a tool call from its results. Summaries are capped at ``max_tokens`` (500).

Providers implement :class:`Summarizer`; :class:`SummarizerChain` tries them in order and
reports which one produced the summary; on total failure the previous summary stays.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from ...errors import HistoryError
from ..messages import Message, message_text
from ..tokens import Tokenizer, chars_per_4
from ..units import safe_cut

__all__ = [
    "Summarizer",
    "SummarizerChain",
    "Summary",
    "SummaryAttempt",
    "SummaryOutcome",
    "SummaryPlan",
    "SummaryPolicy",
    "clip_to_tokens",
    "plan_summary",
]

logger = logging.getLogger(__name__)


class Summarizer(Protocol):
    """Anything that can fold messages (wire dicts) and a previous summary into a summary."""

    def summarize(
        self, messages: Sequence[Mapping[str, Any]], previous_summary: str | None, max_tokens: int
    ) -> str:
        """Return a summary of at most about ``max_tokens`` tokens."""
        ...


@dataclass(frozen=True)
class Summary:
    """A session's summary: its text, how many messages it covers, who wrote it."""

    text: str
    covered: int
    provider: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """The summary as JSON."""
        return {"text": self.text, "covered": self.covered, "provider": self.provider}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Summary:
        """Inverse of :meth:`to_dict`."""
        return cls(str(data["text"]), int(data["covered"]), data.get("provider"))


@dataclass(frozen=True)
class SummaryPolicy:
    """When to summarize and what the window looks like with and without a summary."""

    first_after: int = 10
    threshold: int = 10
    keep_recent: int = 6
    max_tokens: int = 500
    window_without_summary: int = 20

    def __post_init__(self) -> None:
        for name in (
            "first_after",
            "threshold",
            "keep_recent",
            "max_tokens",
            "window_without_summary",
        ):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise HistoryError(
                    f"summary policy {name} must be a non-negative integer, got {value!r}",
                    field=name,
                )


@dataclass(frozen=True)
class SummaryPlan:
    """Fold ``messages[start:end]`` and ``previous`` into a summary covering ``end`` messages."""

    start: int
    end: int
    previous: str | None
    reason: Literal["first", "threshold", "forced"]


def plan_summary(
    messages: Sequence[Message],
    summary: Summary | None,
    policy: SummaryPolicy,
    *,
    start: int = 0,
    force: bool = False,
) -> SummaryPlan | None:
    """Decide whether to (re)summarize now; ``None`` when nothing is due.

    ``start`` is where the live history begins (after a clear). ``force`` summarizes
    whatever lies between the summary and the recent messages.
    """
    covered = max(start, summary.covered) if summary else start
    end = safe_cut(messages, len(messages) - policy.keep_recent)
    if end <= covered:
        return None
    previous = summary.text if summary else None
    if force:
        return SummaryPlan(covered, end, previous, "forced")
    if summary is None:
        texts = sum(1 for m in messages[start:] if _is_text_message(m))
        return SummaryPlan(covered, end, None, "first") if texts > policy.first_after else None
    if len(messages) - covered > policy.threshold:
        return SummaryPlan(covered, end, previous, "threshold")
    return None


def clip_to_tokens(text: str, max_tokens: int, tokenizer: Tokenizer = chars_per_4) -> str:
    """``text`` cut (with an ellipsis) so that ``tokenizer`` counts at most ``max_tokens``."""
    if tokenizer(text) <= max_tokens:
        return text
    low, high = 0, len(text)
    while low < high:
        middle = (low + high + 1) // 2
        if tokenizer(text[:middle] + "…") <= max_tokens:
            low = middle
        else:
            high = middle - 1
    return text[:low] + "…" if low else ""


@dataclass(frozen=True)
class SummaryAttempt:
    """One provider's try: its name and the error, if it failed."""

    provider: str
    error: str | None = None


@dataclass(frozen=True)
class SummaryOutcome:
    """The chain's result: the summary (or ``None``), the provider used, every attempt."""

    text: str | None
    provider: str | None
    attempts: tuple[SummaryAttempt, ...]

    def to_dict(self) -> dict[str, Any]:
        """The outcome as JSON."""
        return {
            "text": self.text,
            "provider": self.provider,
            "attempts": [{"provider": a.provider, "error": a.error} for a in self.attempts],
        }


class SummarizerChain:
    """Named summarizers tried in order; the first non-empty summary wins."""

    def __init__(self, providers: Sequence[tuple[str, Summarizer]]) -> None:
        self.providers = tuple(providers)

    def summarize(
        self, messages: Sequence[Mapping[str, Any]], previous_summary: str | None, max_tokens: int
    ) -> SummaryOutcome:
        """Try each provider; a failing or empty one is recorded and the next is tried."""
        attempts: list[SummaryAttempt] = []
        for name, provider in self.providers:
            try:
                text = provider.summarize(messages, previous_summary, max_tokens)
            except Exception as error:  # any provider failure means: try the next one
                logger.warning("summarizer %s failed: %s", name, error)
                attempts.append(SummaryAttempt(name, f"{type(error).__name__}: {error}"))
                continue
            if not text or not text.strip():
                attempts.append(SummaryAttempt(name, "returned an empty summary"))
                continue
            attempts.append(SummaryAttempt(name))
            return SummaryOutcome(clip_to_tokens(text.strip(), max_tokens), name, tuple(attempts))
        return SummaryOutcome(None, None, tuple(attempts))


def _is_text_message(message: Message) -> bool:
    return (
        message.role in ("user", "assistant")
        and not message.results
        and bool(message_text(message).strip())
    )
