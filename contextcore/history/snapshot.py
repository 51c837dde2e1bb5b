"""Task snapshots: the goal, what is done, the current phase and key observations.

Updates merge: list fields append new entries (no duplicates, order kept), scalar fields
replace (``None`` leaves them as they are).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import HistoryError

__all__ = ["TaskSnapshot"]

_SCALARS = {"goal": "goal", "currentPhase": "current_phase"}
_LISTS = {"completedActions": "completed_actions", "keyObservations": "key_observations"}


@dataclass(frozen=True)
class TaskSnapshot:
    """Where a task stands, kept next to the history and rendered into the context."""

    goal: str | None = None
    completed_actions: tuple[str, ...] = ()
    current_phase: str | None = None
    key_observations: tuple[str, ...] = ()

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, field: str = "snapshot") -> TaskSnapshot:
        """Parse the camelCase JSON form; unknown keys and bad types raise ``HistoryError``."""
        return cls().merge(data, field=field)

    def merge(self, update: Mapping[str, Any], *, field: str = "snapshot") -> TaskSnapshot:
        """Return this snapshot with ``update`` merged in (lists append, scalars replace)."""
        if not isinstance(update, Mapping):
            raise HistoryError(f"{field} must be an object, got {update!r}", field=field)
        values: dict[str, Any] = {}
        for key, value in update.items():
            where = f"{field}.{key}"
            if key in _SCALARS:
                if value is not None and not isinstance(value, str):
                    raise HistoryError(f"{where} must be a string, got {value!r}", field=where)
                if value is not None:
                    values[_SCALARS[key]] = value
            elif key in _LISTS:
                values[_LISTS[key]] = _appended(getattr(self, _LISTS[key]), value, where)
            else:
                known = ", ".join([*_SCALARS, *_LISTS])
                raise HistoryError(
                    f"{where}: unknown snapshot field {key!r}; use {known}", field=where
                )
        return TaskSnapshot(**{**self._fields(), **values})

    def to_dict(self) -> dict[str, Any]:
        """The snapshot as camelCase JSON."""
        return {
            "goal": self.goal,
            "completedActions": list(self.completed_actions),
            "currentPhase": self.current_phase,
            "keyObservations": list(self.key_observations),
        }

    def render(self) -> str:
        """The snapshot as text for the assembled context (empty parts left out)."""
        lines = ["[Task snapshot]"]
        if self.goal:
            lines.append(f"Goal: {self.goal}")
        if self.current_phase:
            lines.append(f"Current phase: {self.current_phase}")
        if self.completed_actions:
            lines.append("Completed actions:")
            lines += [f"- {action}" for action in self.completed_actions]
        if self.key_observations:
            lines.append("Key observations:")
            lines += [f"- {note}" for note in self.key_observations]
        return "\n".join(lines)

    @property
    def is_empty(self) -> bool:
        """True when no field holds anything."""
        return not (
            self.goal or self.current_phase or self.completed_actions or self.key_observations
        )

    def _fields(self) -> dict[str, Any]:
        return {
            "goal": self.goal,
            "completed_actions": self.completed_actions,
            "current_phase": self.current_phase,
            "key_observations": self.key_observations,
        }


def _appended(current: tuple[str, ...], value: object, where: str) -> tuple[str, ...]:
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, Sequence) or not all(isinstance(v, str) for v in value):
        raise HistoryError(f"{where} must be a list of strings, got {value!r}", field=where)
    merged = list(current)
    for entry in value:
        if entry not in merged:
            merged.append(entry)
    return tuple(merged)
