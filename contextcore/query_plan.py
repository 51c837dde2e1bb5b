"""What one search looks for: the message, its parts, and the host's planned steps.

A request that needs several tools says so in several parts ("search the papers, then draw a
chart of the counts"); the host's own model knows its steps better still. A search scores each
text of the plan and combines the scores per chunk:

- without intents, the message's score is ``(whole + part_share * best part) / (1 +
  part_share)``: the whole request leads, a tool that fits one of its parts well comes up, and
  the scale stays that of one cosine so the relevance floors keep their meaning;
- with intents, a chunk scores its best intent, so each step finds its own tools; the message
  itself is not one of the steps (a long message would otherwise outvote every step);
- with a conversation (the session's earlier messages a follow-up depends on), one more
  column scores the earlier messages and this one together; it lifts a chunk toward that
  score by ``context_weight`` and never lowers one (see :mod:`contextcore.conversation`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from .errors import SearchInputError
from .items import ItemRef

__all__ = [
    "MAX_INTENTS",
    "MAX_INTENT_CHARS",
    "QueryPlan",
    "check_intents",
    "pieces",
    "split_parts",
]

MAX_INTENTS = 12
MAX_INTENT_CHARS = 500

# Sentence ends, line breaks, and the words that start a next action.
_BOUNDARY = re.compile(
    r"(?<=[.!?;:])\s+|\n+|,?\s+(?:and then|then|after that|afterwards|finally|next)\s+",
    re.IGNORECASE,
)
_LEADING = re.compile(
    r"^(?:and then|then|and|also|after that|afterwards|finally|next)\b[\s,]*", re.I
)
_MIN_PART_WORDS = 3
_MAX_PARTS = 8


def pieces(message: str) -> list[str]:
    """Every sentence of the message and every action chained with "then", however short
    ("hi!" included), the first :data:`_MAX_PARTS`."""
    cut = (_LEADING.sub("", p.strip()).strip(" ,") for p in _BOUNDARY.split(message) if p)
    return [p for p in cut if p][:_MAX_PARTS]


def split_parts(message: str) -> list[str]:
    """The message's parts (its sentences and the actions chained with "then"), or none when
    it is one part; parts under three words are too short to mean anything alone."""
    cut = (_LEADING.sub("", p.strip()).strip(" ,") for p in _BOUNDARY.split(message) if p)
    parts = [p for p in cut if p and len(p.split()) >= _MIN_PART_WORDS]
    return parts[:_MAX_PARTS] if len(parts) > 1 else []


def check_intents(intents: object, *, field: str = "intents") -> tuple[str, ...]:
    """``intents`` as a tuple of non-blank texts (blank ones dropped, duplicates once), or a
    ``SearchInputError`` naming ``field``."""
    if intents is None:
        return ()
    if isinstance(intents, str) or not isinstance(intents, Sequence):
        raise SearchInputError("intents must be a list of short texts", field=field)
    if not all(isinstance(i, str) for i in intents):
        raise SearchInputError("intents must be a list of short texts", field=field)
    kept = tuple(dict.fromkeys(i.strip() for i in intents if i.strip()))
    if len(kept) > MAX_INTENTS:
        raise SearchInputError(
            f"{len(kept)} intents given; send at most {MAX_INTENTS} steps", field=field
        )
    long = [i for i in kept if len(i) > MAX_INTENT_CHARS]
    if long:
        raise SearchInputError(
            f"an intent of {len(long[0])} characters exceeds {MAX_INTENT_CHARS}; "
            "write each step as one short sentence",
            field=field,
        )
    return kept


@dataclass(frozen=True)
class QueryPlan:
    """The texts one search embeds, in one batch: the message, then its parts (used only
    without intents), then the intents, then the earlier messages of the conversation."""

    message: str
    parts: tuple[str, ...] = ()
    intents: tuple[str, ...] = ()
    context: tuple[str, ...] = ()
    """The conversation's earlier messages, oldest first (only with a ``context_weight``)."""
    context_weight: float = 0.0
    carried: frozenset[ItemRef] = frozenset()
    """Items the earlier turns chose or called: candidates the conversation favours."""

    @classmethod
    def of(
        cls,
        message: str,
        intents: Sequence[str] = (),
        *,
        split: bool = True,
        context: Sequence[str] = (),
        context_weight: float = 0.0,
        carried: Iterable[ItemRef] = (),
    ) -> QueryPlan:
        """The plan for ``message`` and ``intents`` (already checked), with the earlier
        ``context`` and ``carried`` items counting ``context_weight`` (none at 0)."""
        parts = tuple(split_parts(message)) if split and not intents else ()
        if context_weight <= 0 or not context:
            return cls(message, parts, tuple(intents))
        return cls(
            message, parts, tuple(intents), tuple(context), context_weight, frozenset(carried)
        )

    @property
    def texts(self) -> list[str]:
        """Every text the plan embeds."""
        return [self.message, *self.parts, *self.intents, *self.context]

    @property
    def scored_texts(self) -> list[str]:
        """One text per score column: the earlier messages count as one, said together with
        this one."""
        own = [self.message, *self.parts, *self.intents]
        return [*own, " ".join([*self.context, self.message])] if self.context else own
