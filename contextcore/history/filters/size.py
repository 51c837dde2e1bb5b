"""``sizeLimiter``: keep the window under a token budget by greedy newest-first selection.

It first cuts huge texts (``maxContentChars``) and repairs tool chains, then selects whole
tool units (an assistant tool-call message with its results), so the final
``toolCallBackfill`` has nothing to add and the budget holds for the final window.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from .._options import OPTIONS_CONFIG, Count, Flag, Positive, TokenizerChoice
from ..messages import Message, cut, make_message, map_texts
from ..repair import repair_chains
from ..report import Tally
from ..tokens import Tokenizer, message_cost, resolve_tokenizer
from ..units import tool_units
from .base import FilterDefinition, FilterRun

__all__ = ["SIZE_LIMITER", "SizeLimiterOptions", "budget_for", "limit_size", "select_within_budget"]


@dataclass(frozen=True)
class SizeLimiterOptions:
    """Options of ``sizeLimiter`` (JSON names in camelCase)."""

    __pydantic_config__ = OPTIONS_CONFIG

    max_tokens: Count = 24000
    tokenizer: TokenizerChoice = "chars/4"
    per_message_overhead: Count = 8
    prioritize_system: Flag = False
    prioritize_user: Flag = True
    preserve_at_least_one_system: Flag = True
    max_content_chars: Positive = 50000


def budget_for(options: SizeLimiterOptions, run: FilterRun) -> int:
    """The budget left for the filtered messages: the smaller cap minus pinned messages."""
    budget = options.max_tokens
    if run.context.max_tokens is not None:
        budget = min(budget, run.context.max_tokens)
    tokenizer = resolve_tokenizer(options.tokenizer)
    return budget - run.pinned_tokens(tokenizer, options.per_message_overhead)


def limit_size(
    messages: Sequence[Message], options: SizeLimiterOptions, run: FilterRun
) -> list[Message]:
    """Cut huge texts, repair tool chains, then keep what fits the budget."""
    trimmed = [_pretruncate(m, options.max_content_chars, run.tally) for m in messages]
    repaired = repair_chains(trimmed, run.shape, run.repair, run.tally)
    kept = select_within_budget(repaired, budget_for(options, run), options)
    run.tally.dropped += len(repaired) - len(kept)
    return kept


def select_within_budget(
    messages: Sequence[Message], budget: int, options: SizeLimiterOptions
) -> list[Message]:
    """Keep whole tool units that fit ``budget``, by priority tier then newest first.

    Tiers: system (if ``prioritize_system``), user (if ``prioritize_user``), the rest. With
    ``preserve_at_least_one_system`` the earliest system message is kept before anything else,
    even when it alone exceeds the budget. Kept messages stay in their original order.
    """
    tokenizer = resolve_tokenizer(options.tokenizer)
    units = tool_units(messages)
    costs = [sum(_cost(messages[i], tokenizer, options) for i in unit) for unit in units]
    chosen: set[int] = set()
    used = 0
    systems = [u for u, unit in enumerate(units) if _tier_of(messages, unit) == "system"]
    if options.preserve_at_least_one_system and systems:
        chosen.add(systems[0])
        used += costs[systems[0]]
    for u in _priority_order(messages, units, options):
        if u not in chosen and used + costs[u] <= budget:
            chosen.add(u)
            used += costs[u]
    keep = sorted(i for u in chosen for i in units[u])
    return [messages[i] for i in keep]


def _cost(message: Message, tokenizer: Tokenizer, options: SizeLimiterOptions) -> int:
    return message_cost(message, tokenizer, options.per_message_overhead)


def _tier_of(messages: Sequence[Message], unit: list[int]) -> str:
    if len(unit) > 1:
        return "other"
    role = messages[unit[0]].role
    return role if role in ("system", "user") else "other"


def _priority_order(
    messages: Sequence[Message], units: list[list[int]], options: SizeLimiterOptions
) -> list[int]:
    tiers = {
        "system": 2 if options.prioritize_system else 0,
        "user": 1 if options.prioritize_user else 0,
        "other": 0,
    }
    newest_first = sorted(range(len(units)), key=lambda u: units[u][-1], reverse=True)
    return sorted(newest_first, key=lambda u: -tiers[_tier_of(messages, units[u])])


def _pretruncate(message: Message, limit: int, tally: Tally) -> Message:
    raw = map_texts(message.raw, lambda text, _id: cut(text, limit))
    if raw is message.raw:
        return message
    tally.truncate(message.id)
    return make_message(raw)


SIZE_LIMITER: FilterDefinition[SizeLimiterOptions] = FilterDefinition(
    "sizeLimiter",
    SizeLimiterOptions,
    limit_size,
    "keep the window under maxTokens, newest first, whole tool units at a time",
)
