"""The agent-level catalog: every rule, reference and tool the broker knows."""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass

from .errors import CatalogError
from .items import ContextItem, IncludeMode, ItemRef, ItemType, Tool

__all__ = ["Catalog", "CatalogEntry"]


@dataclass(frozen=True)
class CatalogEntry:
    """A catalog row as shown to users: the item's reference and effective include mode."""

    ref: ItemRef
    include: IncludeMode
    description: str
    enabled: bool


class Catalog:
    """Items keyed by their reference; names are unique per type (per server for tools).

    Items are replaced whole: ``upsert`` swaps an item and bumps ``version`` so indexes know
    which items to re-embed. Safe to change from one thread while others read.
    """

    def __init__(self, items: Iterable[ContextItem] = ()) -> None:
        self._items: dict[ItemRef, ContextItem] = {}
        self._lock = threading.RLock()
        self.version = 0
        self._pending: tuple[str, ...] = ()
        self._unavailable: dict[str, str] = {}
        self._retired: frozenset[str] = frozenset()
        for item in items:
            if item.ref in self._items:
                raise CatalogError(
                    f"duplicate {item.ref.type} name {item.name!r}"
                    + (f" on server {item.ref.server!r}" if item.ref.server else "")
                    + "; each item needs a unique name",
                    field="name",
                )
            self._items[item.ref] = item

    def __len__(self) -> int:
        return len(self._items)

    def __iter__(self) -> Iterator[ContextItem]:
        with self._lock:
            return iter(list(self._items.values()))

    def __contains__(self, ref: object) -> bool:
        return ref in self._items

    def get(self, ref: ItemRef) -> ContextItem | None:
        """Return the item for ``ref``, or None."""
        return self._items.get(ref)

    def require(self, ref: ItemRef) -> ContextItem:
        """Return the item for ``ref``, or raise ``CatalogError`` naming it."""
        item = self._items.get(ref)
        if item is None:
            raise CatalogError(
                f"no {ref.type} named {ref.name!r}"
                + (f" on server {ref.server!r}" if ref.server else "")
                + " in the catalog; list_catalog shows what exists",
                field="name",
            )
        return item

    def items(self, types: Iterable[ItemType] | None = None) -> list[ContextItem]:
        """Enabled and disabled items, filtered by type, in a stable order."""
        wanted = set(types) if types is not None else None
        with self._lock:
            rows = [i for i in self._items.values() if wanted is None or i.ref.type in wanted]
        return sorted(rows, key=lambda i: i.ref)

    def enabled(self) -> list[ContextItem]:
        """Enabled items in a stable order."""
        return [i for i in self.items() if i.enabled]

    def with_mode(self, mode: IncludeMode) -> list[ContextItem]:
        """Enabled items whose effective include mode is ``mode``."""
        return [i for i in self.enabled() if i.effective_include == mode]

    def entries(self, types: Iterable[ItemType] | None = None) -> list[CatalogEntry]:
        """Catalog rows with effective include modes."""
        return [
            CatalogEntry(i.ref, i.effective_include, i.description, i.enabled)
            for i in self.items(types)
        ]

    def upsert(self, item: ContextItem) -> None:
        """Add or replace an item."""
        with self._lock:
            self._items[item.ref] = item
            self.version += 1

    def apply(self, upserts: Iterable[ContextItem], removals: Iterable[ItemRef]) -> None:
        """Add or replace ``upserts`` and drop ``removals`` as one change: readers see the
        old set or the new one, and ``version`` moves once."""
        with self._lock:
            for ref in removals:
                self._items.pop(ref, None)
            for item in upserts:
                self._items[item.ref] = item
            self.version += 1

    def replace_server_tools(self, server: str, tools: Iterable[Tool]) -> None:
        """Swap the whole tool list of one server (which is no longer retired)."""
        with self._lock:
            self._drop_tools(server)
            for tool in tools:
                self._items[tool.ref] = tool
            self._retired = self._retired - {server}
            self.version += 1

    def retire_server(self, server: str) -> None:
        """Drop every tool of ``server``, which left the configuration: until it is added
        again (:meth:`reinstate_server`), :attr:`retired` names it, and sessions leave out
        the items they hold of it."""
        with self._lock:
            self._drop_tools(server)
            self._retired = self._retired | {server}
            self.version += 1

    def reinstate_server(self, server: str) -> None:
        """``server`` is configured again: sessions show their items of it again."""
        with self._lock:
            self._retired = self._retired - {server}
            self.version += 1

    @property
    def retired(self) -> frozenset[str]:
        """Servers removed from the configuration while the broker runs."""
        return self._retired

    def _drop_tools(self, server: str) -> None:
        for ref in [r for r in self._items if r.type == "tool" and r.server == server]:
            del self._items[ref]

    @property
    def pending(self) -> tuple[str, ...]:
        """Sources (downstream servers) whose items are not in the catalog yet because they
        are still connecting for the first time."""
        return self._pending

    def set_pending(self, sources: Iterable[str]) -> None:
        """Say which sources are still on their way (an empty list once all arrived)."""
        self._pending = tuple(sorted(sources))

    @property
    def unavailable(self) -> Mapping[str, str]:
        """Sources (downstream servers) that are not running, each with why in one line."""
        return self._unavailable

    def set_unavailable(self, reasons: Mapping[str, str]) -> None:
        """Say which sources are not running and why (empty: every one is)."""
        self._unavailable = dict(sorted(reasons.items()))

    def counts(self) -> dict[str, dict[str, int]]:
        """Enabled items per type and include mode."""
        out: dict[str, dict[str, int]] = {}
        for item in self.enabled():
            per = out.setdefault(item.ref.type, {})
            per[item.effective_include] = per.get(item.effective_include, 0) + 1
        return out
