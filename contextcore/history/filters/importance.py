"""``importanceRetention``: keep the recent messages and the most important older ones.

Each message scores 0.5, +0.3 if it shows an error, +0.3 if it reports a completion, +0.2
if it plans, +0.1 if it carries a screenshot, −0.1 if it is a re-fetchable UI dump. The most
recent ``recentFraction`` of ``maxMessages`` is always kept; the remaining slots go to the
highest-scoring older messages (newer first on ties). Whole tool units are kept or dropped,
and the output stays in chronological order.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from .._options import OPTIONS_CONFIG, Fraction, Positive
from .._tools import ToolKind, tool_kind
from ..messages import Message, has_image, message_text
from ..units import tool_units
from .base import FilterDefinition, FilterRun

__all__ = ["IMPORTANCE_RETENTION", "ImportanceOptions", "importance_score", "retain_important"]

_ERROR = re.compile(r"\b(error|exception|traceback|failed|failure|fatal)\b", re.I)
_DONE = re.compile(r"\b(done|completed?|finished|succeeded|successfully|resolved|fixed)\b", re.I)
_PLAN = re.compile(r"\b(plan|next steps?|step \d+|todo|i will|i'll|let's|going to)\b", re.I)
_SCAN_CHARS = 4000


@dataclass(frozen=True)
class ImportanceOptions:
    """Options of ``importanceRetention``."""

    __pydantic_config__ = OPTIONS_CONFIG

    max_messages: Positive = 24
    recent_fraction: Fraction = 0.4


def importance_score(message: Message, kinds: Mapping[str, ToolKind] | None = None) -> float:
    """Score a message; ``kinds`` maps call ids to tool kinds, to recognise results."""
    kinds = kinds or {}
    text = message_text(message)
    text = text if len(text) <= _SCAN_CHARS else text[:_SCAN_CHARS] + text[-1000:]
    used = [tool_kind(call) for call in message.calls]
    used += [kinds.get(result.call_id, "other") for result in message.results]
    score = 0.5
    if any(r.is_error for r in message.results) or _ERROR.search(text):
        score += 0.3
    if _DONE.search(text):
        score += 0.3
    if _PLAN.search(text):
        score += 0.2
    if "screenshot" in used or has_image(message):
        score += 0.1
    if "ui" in used and message.results:
        score -= 0.1
    return round(score, 6)


def retain_important(
    messages: Sequence[Message], options: ImportanceOptions, run: FilterRun
) -> list[Message]:
    """Keep at most ``max_messages`` (more only if the newest tool unit alone is bigger)."""
    if len(messages) <= options.max_messages:
        return list(messages)
    kinds = {call.id: tool_kind(call) for m in messages for call in m.calls}
    units = sorted(tool_units(messages), key=lambda unit: unit[-1])
    recent = math.ceil(options.max_messages * min(max(options.recent_fraction, 0.0), 1.0))
    chosen: set[int] = set()
    count = 0
    for u in reversed(range(len(units))):
        if count and count + len(units[u]) > recent:
            break
        chosen.add(u)
        count += len(units[u])
    scores = {
        u: max(importance_score(messages[i], kinds) for i in units[u])
        for u in range(len(units))
        if u not in chosen
    }
    for u in sorted(scores, key=lambda u: (-scores[u], -u)):
        if count + len(units[u]) <= options.max_messages:
            chosen.add(u)
            count += len(units[u])
    keep = sorted(i for u in chosen for i in units[u])
    run.tally.dropped += len(messages) - len(keep)
    return [messages[i] for i in keep]


IMPORTANCE_RETENTION: FilterDefinition[ImportanceOptions] = FilterDefinition(
    "importanceRetention",
    ImportanceOptions,
    retain_important,
    "keep the recent messages and the highest-scoring older ones",
)
