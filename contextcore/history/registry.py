"""The filter registry: built-in and user filters by name, and named presets.

There is no global registry: :func:`default_registry` builds a fresh one holding the
built-in filters and the ``general`` and ``topic`` presets; add your own filters to it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, TypeAlias

from ..errors import HistoryError
from .filters.backfill import TOOL_CALL_BACKFILL
from .filters.base import FilterDefinition
from .filters.collapse import COLLAPSE_GROUP_REPLACER
from .filters.files import FILE_CONTENTS_LIMITER
from .filters.importance import IMPORTANCE_RETENTION
from .filters.prune import PRUNE_MIDDLE
from .filters.size import SIZE_LIMITER
from .filters.ui import UI_COMPRESSION

__all__ = ["BUILTIN_PRESETS", "FilterEntry", "FilterRegistry", "default_registry"]

FilterEntry: TypeAlias = "str | Mapping[str, Any]"

BUILTIN_PRESETS: Mapping[str, tuple[FilterEntry, ...]] = {
    "general": ({"name": "sizeLimiter", "options": {"maxTokens": 24000}}, "toolCallBackfill"),
    "topic": (
        "collapseGroupReplacer",
        {"name": "fileContentsLimiter", "options": {"filesLimit": 7, "versionsPerFile": 2}},
        {"name": "sizeLimiter", "options": {"maxTokens": 20000}},
        "toolCallBackfill",
    ),
}


class FilterRegistry:
    """Filters and presets by name."""

    def __init__(self) -> None:
        self._filters: dict[str, FilterDefinition[Any]] = {}
        self._presets: dict[str, tuple[FilterEntry, ...]] = {}

    def register(self, definition: FilterDefinition[Any], *, replace: bool = False) -> None:
        """Add a filter; raise ``HistoryError`` if its name is taken and ``replace`` is false."""
        if definition.name in self._filters and not replace:
            raise HistoryError(
                f"a filter named {definition.name!r} is already registered; pick another "
                "name or pass replace=True",
                field="name",
            )
        self._filters[definition.name] = definition

    def get(self, name: str) -> FilterDefinition[Any] | None:
        """The filter registered as ``name``, or ``None``."""
        return self._filters.get(name)

    def names(self) -> tuple[str, ...]:
        """Registered filter names, sorted."""
        return tuple(sorted(self._filters))

    def add_preset(self, name: str, entries: Sequence[FilterEntry]) -> None:
        """Add (or replace) a named preset: an ordered list of filter entries."""
        self._presets[name] = tuple(entries)

    def preset(self, name: str) -> tuple[FilterEntry, ...] | None:
        """The entries of preset ``name``, or ``None``."""
        return self._presets.get(name)

    def preset_names(self) -> tuple[str, ...]:
        """Preset names, sorted."""
        return tuple(sorted(self._presets))


def default_registry() -> FilterRegistry:
    """A fresh registry with the built-in filters and the ``general`` and ``topic`` presets."""
    registry = FilterRegistry()
    for definition in (
        SIZE_LIMITER,
        TOOL_CALL_BACKFILL,
        COLLAPSE_GROUP_REPLACER,
        FILE_CONTENTS_LIMITER,
        PRUNE_MIDDLE,
        IMPORTANCE_RETENTION,
        UI_COMPRESSION,
    ):
        registry.register(definition)
    for name, entries in BUILTIN_PRESETS.items():
        registry.add_preset(name, entries)
    return registry
