"""Suggested include-mode changes from recorded usage: an ``always`` item never used, an
``agent`` item used in every turn, an ``agent`` item search never selects."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from .errors import ContextCoreError
from .items import ItemRef

__all__ = ["MIN_TURNS_TO_SUGGEST", "Suggestion", "UsageCounts", "suggestions", "used_per_turn"]

MIN_TURNS_TO_SUGGEST = 5
"""Turns with recorded usage (or request contexts, for items never selected) an item needs
before a change of its include mode is suggested."""


class UsageCounts(Protocol):
    """An item's counts over the turns with recorded usage (the analytics' item rows)."""

    @property
    def observed(self) -> int: ...

    @property
    def used(self) -> int: ...

    @property
    def missed(self) -> int: ...


@dataclass(frozen=True)
class Suggestion:
    """A change of an item's include mode the recorded usage argues for."""

    key: str
    include: str
    suggested: Literal["agent", "always", "review"]
    reason: str

    def to_dict(self) -> dict[str, str]:
        return {
            "key": self.key,
            "include": self.include,
            "suggested": self.suggested,
            "reason": self.reason,
        }


def used_per_turn(
    events: Iterable[Mapping[str, Any]], notes: list[str]
) -> dict[tuple[str | None, str], set[ItemRef]]:
    """The items used per (session, request id), from ``call`` and ``report`` events."""
    used: dict[tuple[str | None, str], set[ItemRef]] = {}
    for event in events:
        if event.get("kind") == "log":
            continue
        rid, keys = event.get("request_id"), event.get("used")
        try:
            if not isinstance(rid, str) or not isinstance(keys, list):
                raise ValueError("no request_id or no list of used keys")
            refs = {ItemRef.parse(str(key)) for key in keys}
        except (ValueError, ContextCoreError) as exc:
            why = exc.message if isinstance(exc, ContextCoreError) else str(exc)
            notes.append(f"usage event {event.get('seq')!r} skipped: {why}")
            continue
        used.setdefault((event.get("session_id"), rid), set()).update(refs)
    return used


def suggestions(
    usage: Mapping[ItemRef, UsageCounts],
    modes: Mapping[ItemRef, str],
    never_selected: list[str],
    turns: int,
    reported: int,
) -> list[Suggestion]:
    """Include-mode changes the counts argue for, once there are enough turns to judge."""
    out: list[Suggestion] = []
    for ref, mode in sorted(modes.items(), key=lambda kv: kv[0].key):
        row = usage.get(ref)
        if mode == "always" and row and row.observed >= MIN_TURNS_TO_SUGGEST and not row.used:
            reason = (
                f"in {row.observed} turns with recorded usage it was in the context and never "
                'used; include = "agent" adds it only when a request needs it'
            )
            out.append(Suggestion(ref.key, mode, "agent", reason))
        elif mode == "agent" and reported >= MIN_TURNS_TO_SUGGEST and row and row.used == reported:
            reason = (
                f"used in every one of the {reported} turns with recorded usage (search "
                f'selected it in {row.used - row.missed}); include = "always" never misses it'
            )
            out.append(Suggestion(ref.key, mode, "always", reason))
    if turns >= MIN_TURNS_TO_SUGGEST:
        already = {s.key for s in out}
        for key in (k for k in never_selected if k not in already):
            reason = (
                f"search selected it in none of {turns} request contexts; rewrite its "
                'description in the words requests use, set include = "manual", or disable it'
            )
            out.append(Suggestion(key, "agent", "review", reason))
    return out
