"""Catalog tools: search_context_items, list_catalog."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from contextcore.broker import ContextBroker

from ._models import ItemType, item_line
from ._spec import Args, Out, ToolSpec

__all__ = ["LIST_CATALOG", "SEARCH_CONTEXT_ITEMS"]

_TYPES = Field(None, description="Only these item types (default: all).")


class SearchArgs(Args):
    query: str = Field(description="What to look for.")
    types: list[ItemType] | None = _TYPES
    top_k: int | None = Field(None, ge=1, description="Chunk matches considered.")
    top_n: int | None = Field(None, ge=1, description="Items returned at most.")
    include_score: float | None = Field(
        None, ge=0.0, le=1.0, description="Items at or above this similarity are always returned."
    )


class SearchHitOut(Out):
    key: str
    type: ItemType
    name: str
    server: str | None
    similarity_score: float


class SearchOut(Out):
    items: list[SearchHitOut]
    search_mode: str
    warnings: list[str]


class CatalogArgs(Args):
    types: list[ItemType] | None = _TYPES


class CatalogItemOut(Out):
    key: str
    type: ItemType
    name: str
    server: str | None
    include_mode: Literal["always", "manual", "agent"]
    description: str
    enabled: bool


class CatalogOut(Out):
    items: list[CatalogItemOut]


def _search(broker: ContextBroker, args: SearchArgs) -> SearchOut:
    result = broker.search.search(
        args.query,
        types=args.types,
        top_k=args.top_k,
        top_n=args.top_n,
        include_score=args.include_score,
    )
    hits = [
        SearchHitOut(
            key=h.ref.key,
            type=h.ref.type,
            name=h.ref.name,
            server=h.ref.server,
            similarity_score=round(h.similarity_score, 4),
        )
        for h in result.hits
    ]
    return SearchOut(items=hits, search_mode=result.mode, warnings=list(result.warnings))


def _search_text(out: SearchOut) -> str:
    lines = [f"{len(out.items)} item(s) found ({out.search_mode} search)"]
    lines += [f"- {h.key} ({h.similarity_score:.2f})" for h in out.items]
    lines += [f"warning: {w}" for w in out.warnings]
    return "\n".join(lines)


def catalog_rows(broker: ContextBroker, types: list[ItemType] | None = None) -> CatalogOut:
    """The catalog as result rows (also the ``context://catalog`` resource)."""
    rows = [
        CatalogItemOut(
            key=e.ref.key,
            type=e.ref.type,
            name=e.ref.name,
            server=e.ref.server,
            include_mode=e.include,
            description=e.description,
            enabled=e.enabled,
        )
        for e in broker.catalog.entries(types)
    ]
    return CatalogOut(items=rows)


def _catalog(broker: ContextBroker, args: CatalogArgs) -> CatalogOut:
    return catalog_rows(broker, args.types)


def _catalog_text(out: CatalogOut) -> str:
    lines = [f"{len(out.items)} catalog item(s)"]
    for i in out.items:
        off = "" if i.enabled else " [disabled]"
        lines.append(item_line(i.type, i.name, i.server, i.include_mode) + off)
    return "\n".join(lines)


SEARCH_CONTEXT_ITEMS = ToolSpec(
    "search_context_items",
    "Search the catalog's enabled rules, references and tools by meaning and keywords; "
    "returns the best items with their similarity_score, the search mode used and warnings.",
    SearchArgs,
    SearchOut,
    _search,
    _search_text,
    uses_search=True,
    read_only=True,
)
LIST_CATALOG = ToolSpec(
    "list_catalog",
    "Every rule, reference and tool the broker knows, with its include mode "
    "(always, manual or agent).",
    CatalogArgs,
    CatalogOut,
    _catalog,
    _catalog_text,
    read_only=True,
)
