"""Catalog tools: search_context_items, get_context_items, list_catalog."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field

from contextcore.context_text import CALL_HINT, ToolDirectory, item_block
from contextcore.errors import CatalogError
from contextcore.items import ContextItem, ItemRef, Tool, for_model
from contextcore.services.broker import ContextBroker
from contextcore.signatures import python_line, signature

from ._models import ItemType, item_line
from ._spec import Args, Intents, Out, ToolContext, ToolSpec

__all__ = ["GET_CONTEXT_ITEMS", "LIST_CATALOG", "SEARCH_CONTEXT_ITEMS"]

_MAX_KEYS = 50

_TYPES = Field(None, description="Only these item types (default: all).")


class SearchArgs(Args):
    query: str = Field(description="What to look for.")
    intents: Intents = None
    session_id: str | None = Field(
        None, description="With request_id: the session of the request this search is for."
    )
    request_id: str | None = Field(
        None,
        description="A request id from build_request_context: what this search finds is "
        "added to that request's record, so it shows every item you were shown for it.",
    )
    types: list[ItemType] | None = _TYPES
    top_k: int | None = Field(None, ge=1, description="Chunk matches considered.")
    top_n: int | None = Field(None, ge=1, description="Items returned at most.")
    include_score: float | None = Field(
        None, ge=0.0, le=1.0, description="Items at or above this score are always returned."
    )
    min_score: float | None = Field(
        None, ge=0.0, le=1.0, description="Items scoring below this are left out."
    )
    detail: Literal["names", "full"] = Field(
        "names",
        description="names: keys and scores; full: also descriptions, rule and reference "
        "texts, and tools' names to call and input schemas.",
    )


class ItemDefinitionOut(Out):
    """An item's full definition, as a model needs it."""

    key: str
    type: ItemType
    name: str
    server: str | None
    include_mode: Literal["always", "manual", "agent"]
    description: str
    priority: int
    text: str | None = None
    input_schema: dict[str, Any] | None = None
    call_name: str | None = None
    python: str | None = None
    """The Python signature ``run_code`` calls the tool by (while code mode is on)."""


class SearchHitOut(Out):
    key: str
    type: ItemType
    name: str
    server: str | None
    similarity_score: float
    intent: str | None = None
    definition: ItemDefinitionOut | None = None


class SearchOut(Out):
    items: list[SearchHitOut]
    search_mode: str
    warnings: list[str]
    text: str


class GetItemsArgs(Args):
    keys: list[Annotated[str, Field(max_length=300)]] = Field(
        min_length=1,
        max_length=_MAX_KEYS,
        description="Tools by the name a text shows (e.g. 'time__get_current_time'), or "
        "item keys: 'rule:<name>', 'reference:<name>', 'tool:<server>/<tool>'.",
    )


class ItemsOut(Out):
    items: list[ItemDefinitionOut]
    text: str


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
    input_schema: dict[str, Any] | None = None


class CatalogOut(Out):
    items: list[CatalogItemOut]


def definition(
    item: ContextItem, directory: ToolDirectory, code_mode: bool = False
) -> ItemDefinitionOut:
    """The full definition of a catalog item; with ``code_mode``, a tool's Python signature."""
    ref = item.ref
    call_name = directory.exposed_name(ref) if isinstance(item, Tool) else None
    python = None
    if code_mode and isinstance(item, Tool) and call_name is not None:
        python = signature(call_name, item.input_schema, item.output_schema).render()
    return ItemDefinitionOut(
        key=ref.key,
        type=ref.type,
        name=ref.name,
        server=ref.server,
        include_mode=item.effective_include,
        description=item.description,
        priority=item.priority,
        text=None if isinstance(item, Tool) else item.text,
        input_schema=dict(item.input_schema) if isinstance(item, Tool) else None,
        call_name=call_name,
        python=python,
    )


def _search(ctx: ToolContext, args: SearchArgs) -> SearchOut:
    broker = ctx.broker
    if (args.session_id is None) != (args.request_id is None):
        raise CatalogError(
            "session_id and request_id go together: name both to add what this search finds "
            "to that request's record, or neither",
            field="request_id" if args.request_id is None else "session_id",
        )
    request = None if args.session_id is None else (args.session_id, args.request_id or "")
    intents = tuple(args.intents or ())
    result = broker.search_items(
        args.query,
        intents=intents,
        request=request,
        profile=ctx.profile,
        types=args.types,
        top_k=args.top_k,
        top_n=args.top_n,
        include_score=args.include_score,
        min_score=args.min_score,
    )
    hits: list[SearchHitOut] = []
    lines = [f"{len(result.hits)} item(s) found ({result.mode} search), best first"]
    for h in result.hits:
        item = broker.lookup(h.ref)
        score = round(h.similarity_score, 4)
        intent = intents[h.intent] if h.intent is not None else None
        full = args.detail == "full" and item is not None
        hits.append(
            SearchHitOut(
                key=h.ref.key,
                type=h.ref.type,
                name=h.ref.name,
                server=h.ref.server,
                similarity_score=score,
                intent=intent,
                definition=definition(item, ctx.tools) if full and item else None,
            )
        )
        why = f"{score:.2f}" + (f", step {h.intent + 1}" if h.intent is not None else "")
        if full:
            lines.append(item_block(h.ref, item, ctx.tools, f"{h.ref.key}, score {why}"))
        else:
            lines.append(f"- {h.ref.key} ({why})")
    if args.detail == "names" and result.hits:
        lines.append("Full definitions: get_context_items(keys=[...]) or detail='full'.")
    lines += [f"warning: {w}" for w in result.warnings]
    text = "\n".join(lines) if args.detail == "names" else "\n\n".join(lines)
    return SearchOut(items=hits, search_mode=result.mode, warnings=list(result.warnings), text=text)


def _search_text(out: SearchOut) -> str:
    return out.text


def _resolve(ctx: ToolContext, name: str, shown: dict[str, ItemRef]) -> ItemRef | None:
    """The item ``name`` means: an item key (``tool:<server>/<tool>``), a tool as
    ``<server>/<tool>``, or the name a text shows to call a tool by
    (``time__get_current_time``, looked up in ``shown``, filled on first need)."""
    catalog = ctx.broker.catalog
    try:
        ref: ItemRef | None = ItemRef.parse(name)
    except CatalogError:
        ref = None
    if ref is not None and ref in catalog:
        return ref
    server, slash, tool = name.partition("/")
    if slash and ItemRef("tool", tool, server) in catalog:
        return ItemRef("tool", tool, server)
    if not shown:
        for item in catalog.items(["tool"]):
            exposed = ctx.tools.exposed_name(item.ref)
            if exposed is not None:
                shown[exposed] = item.ref
    return shown.get(name)


def _get_items(ctx: ToolContext, args: GetItemsArgs) -> ItemsOut:
    refs: list[ItemRef] = []
    unknown: list[str] = []
    shown = ctx.broker.profile(ctx.profile)  # items outside it do not exist for this host
    names: dict[str, ItemRef] = {}
    for key in dict.fromkeys(args.keys):
        ref = _resolve(ctx, key, names)
        item = ctx.broker.catalog.get(ref) if ref is not None else None
        visible = item is not None and for_model(item)  # an app-only tool is its App's
        if ref is not None and visible and (shown is None or shown.allows(ref)):
            refs.append(ref)
        else:
            unknown.append(key)
    if unknown:
        raise CatalogError(
            "unknown item(s): "
            + ", ".join(repr(k)[:120] for k in unknown)
            + "; name a tool as a request context shows it ('time__get_current_time' or "
            "'time/get_current_time') or an item by its key ('rule:<name>', "
            "'reference:<name>', 'tool:<server>/<tool>')",
            field="keys",
        )
    items = [ctx.broker.catalog.require(ref) for ref in dict.fromkeys(refs)]
    out = [definition(i, ctx.tools, ctx.code_mode) for i in items]
    blocks = [
        item_block(i.ref, i, ctx.tools, f"{i.ref.key}, {i.effective_include}")
        + (f"\n{python_line(i, d.call_name)}" if d.python and isinstance(i, Tool) else "")
        for i, d in zip(items, out, strict=True)
    ]
    if any(isinstance(i, Tool) for i in items):
        blocks.append(CALL_HINT)
    return ItemsOut(items=out, text="\n\n".join(blocks))


def _items_text(out: ItemsOut) -> str:
    return out.text


def catalog_rows(
    broker: ContextBroker, types: list[ItemType] | None = None, profile: str | None = None
) -> CatalogOut:
    """The catalog as result rows (also the ``context://catalog`` resource); with
    ``profile``, only the items it allows."""
    shown = broker.profile(profile)
    rows = [
        CatalogItemOut(
            key=e.ref.key,
            type=e.ref.type,
            name=e.ref.name,
            server=e.ref.server,
            include_mode=e.include,
            description=e.description,
            enabled=e.enabled,
            input_schema=_schema(broker.catalog.get(e.ref)),
        )
        for e in broker.catalog.entries(types)
        if shown is None or shown.allows(e.ref)
    ]
    return CatalogOut(items=rows)


def _schema(item: ContextItem | None) -> dict[str, Any] | None:
    return dict(item.input_schema) if isinstance(item, Tool) else None


def _catalog(ctx: ToolContext, args: CatalogArgs) -> CatalogOut:
    return catalog_rows(ctx.broker, args.types, ctx.profile)


def _catalog_text(out: CatalogOut) -> str:
    lines = [f"{len(out.items)} catalog item(s)"]
    for i in out.items:
        off = "" if i.enabled else " [disabled]"
        lines.append(item_line(i.type, i.name, i.server, i.include_mode) + off)
    return "\n".join(lines)


SEARCH_CONTEXT_ITEMS = ToolSpec(
    "search_context_items",
    "Search the catalog's enabled rules, references and tools by meaning and keywords; "
    "returns the best items, best first, with their score, the search mode used and warnings. "
    "detail='full' adds descriptions, rule and reference texts and tools' input schemas. "
    "For several actions pass `intents` (one short step per action, plain words); with "
    "session_id and request_id what it finds is added to that request's record.",
    SearchArgs,
    SearchOut,
    _search,
    _search_text,
    read_only=True,
)
GET_CONTEXT_ITEMS = ToolSpec(
    "get_context_items",
    "Full entries of named tools, rules and references: a tool's name to call and input "
    "schema, a rule's or reference's text. Use it for items a request context named in one line.",
    GetItemsArgs,
    ItemsOut,
    _get_items,
    _items_text,
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
