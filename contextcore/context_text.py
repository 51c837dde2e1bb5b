"""The request context as text a model reads: rule and reference texts, and each tool with
the name to call it by and its input schema, in the design's order, within a token budget.

Hosts whose own model is the agent show it only the text content of tool results, so this
text is the request context as far as the model is concerned. What does not fit the budget
is named with how to fetch it (``get_context_items``).

This module is the one place that words an item for a model: :func:`item_block` (one item),
:func:`describe` (one request-context row, with how it was included) and :func:`section`
(a kind's heading and blocks). The request-context text, the assembled LLM input
(:mod:`contextcore.assembly`), search results and the ``context`` prompt all use them, so a
model reads the same tool the same way whichever path brought it.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

from .items import ContextItem, ItemRef, ItemType, Tool
from .reach import candidate_line
from .render import sort_items, summary_line
from .sessions import RequestContext, RequestItem

__all__ = [
    "CALL_HINT",
    "Detail",
    "NoTools",
    "RenderedContext",
    "ToolDirectory",
    "describe",
    "estimate_tokens",
    "how_included",
    "inline",
    "item_block",
    "item_heading",
    "listed_entry",
    "render_context",
    "schema_text",
    "section",
    "tools_intro",
]

Detail = Literal["full", "names"]
Lookup = Callable[[ItemRef], ContextItem | None]

_OMITTED_LINE_TOKENS = 30
_TITLES: dict[ItemType, str] = {"rule": "Rules", "reference": "References", "tool": "Tools"}
CALL_HINT = (
    "Call a tool by the name shown when your tool list has it; otherwise call `call_tool` "
    "with `server`, `tool` and `arguments` that match its input schema (add `session_id` to "
    "record the call in this session)."
)


class ToolDirectory(Protocol):
    """How the host can call downstream tools."""

    def exposed_name(self, ref: ItemRef) -> str | None:
        """The ``<server>__<tool>`` name the tool is called by directly, or None when no
        configured server offers it."""

    def listed(self, ref: ItemRef) -> bool:
        """Whether every host's tool list already carries the tool (``always`` tools)."""


class NoTools:
    """A directory for a broker without downstream servers: no tool is callable."""

    def exposed_name(self, ref: ItemRef) -> str | None:
        return None

    def listed(self, ref: ItemRef) -> bool:
        return False


@dataclass(frozen=True)
class RenderedContext:
    """The text, its estimated size, and the items left out for the budget."""

    text: str
    tokens: int
    omitted: tuple[RequestItem, ...]


def estimate_tokens(text: str) -> int:
    """Tokens of ``text`` as the broker estimates them everywhere: one per four characters."""
    return math.ceil(len(text) / 4)


def schema_text(schema: object) -> str:
    """An input schema as compact JSON, keys in the order the server wrote them, without
    the ``title`` of the schema and of its parts (a label generated from a name the schema
    already gives; a property named ``title`` stays) nor the ``$schema`` dialect URI."""
    return json.dumps(
        _untitled(schema),
        ensure_ascii=False,
        separators=(",", ":"),
        sort_keys=False,
        default=_plain,
    )


def _untitled(schema: object, depth: int = 0) -> object:
    if depth > 64 or not isinstance(schema, Mapping):
        return schema
    out: dict[str, object] = {}
    for key, value in schema.items():
        if key in ("title", "$schema") and isinstance(value, str):
            continue
        if key in ("properties", "$defs", "definitions", "patternProperties") and isinstance(
            value, Mapping
        ):
            out[key] = {name: _untitled(sub, depth + 1) for name, sub in value.items()}
        elif isinstance(value, Mapping):
            out[key] = _untitled(value, depth + 1)
        elif isinstance(value, list | tuple):
            out[key] = [_untitled(v, depth + 1) for v in value]
        else:
            out[key] = value
    return out


def _plain(value: object) -> object:
    # A catalog may hold a schema as read-only mappings and tuples.
    if isinstance(value, Mapping):
        return dict(value)
    return list(value) if isinstance(value, Sequence) else str(value)


def how_included(row: RequestItem, intents: Sequence[str] = ()) -> str:
    """Why a row is in its request context: ``agent, score 0.71, step 2``, ``manual``, ..."""
    if row.similarity_score is None:
        return row.include_mode
    why = f"{row.include_mode}, score {row.similarity_score:.2f}"
    if row.intent is not None:
        step = intents.index(row.intent) + 1 if row.intent in intents else None
        why += f", step {step}" if step is not None else f", for {row.intent!r}"
    if row.via == "search":
        why += ", found by a later search"
    elif row.via == "conversation":
        why += ", carried from the conversation" + (f" (turn {row.turn})" if row.turn else "")
    return why


def inline(text: str) -> str:
    """``text`` on one line: every run of whitespace (line breaks of any kind included) one
    space. A downstream's name or description written so cannot begin a line of the text,
    so none of its headings, markers or fences stands as the broker's own."""
    return " ".join(text.split())


def item_heading(ref: ItemRef, item: ContextItem | None, directory: ToolDirectory) -> str:
    """``010 sql-migrations`` for rules and references (priority as three digits);
    ``time__get_current_time (server time, tool get_current_time)`` for tools. Names are
    written on one line (:func:`inline`)."""
    if ref.type != "tool":
        priority = item.priority if item is not None else 0
        return f"{priority:03d} {inline(ref.name)}"
    name = directory.exposed_name(ref)
    origin = f"server {inline(ref.server or '')}, tool {inline(ref.name)}"
    if name is None:
        return f"{inline(f'{ref.server}/{ref.name}')} ({origin}; no connected server offers it)"
    return f"{inline(name)} ({origin})"


def item_block(
    ref: ItemRef, item: ContextItem | None, directory: ToolDirectory, mode: str | None = None
) -> str:
    """The full definition of one item: heading, description, text or input schema. A tool's
    description is a downstream's text, so it is given on one line (:func:`inline`); its
    schema is JSON, whose strings hold no line break."""
    head = f"### {item_heading(ref, item, directory)}" + (f" — {mode}" if mode else "")
    if item is None:
        return f"{head}\n(no longer in the catalog)"
    lines = [head]
    if item.description:
        tool = isinstance(item, Tool)
        lines.append(inline(item.description) if tool else item.description.strip())
    if isinstance(item, Tool):
        lines.append(f"Input schema: {schema_text(item.input_schema or {'type': 'object'})}")
        # A directory of a broker with code mode on also gives the signature a program calls.
        python = getattr(directory, "python_line", None)
        if python is not None and (line := python(item)) is not None:
            lines.append(line)
    elif item.text.strip():
        lines.append(item.text.strip())
    return "\n".join(lines)


def describe(
    row: RequestItem, lookup: Lookup, directory: ToolDirectory, intents: Sequence[str] = ()
) -> str:
    """The full definition of one request-context row, headed with how it was included."""
    return item_block(row.ref, lookup(row.ref), directory, how_included(row, intents))


def section(kind: ItemType, blocks: Sequence[str], intro: Sequence[str] = ()) -> str:
    """One kind's part of a text: ``## Tools``, its ``intro`` lines, then the item blocks."""
    head = "\n".join([f"## {_TITLES[kind]}", *intro])
    return head + ("\n\n" + "\n\n".join(blocks) if blocks else "")


def tools_intro(listed: Sequence[str] = (), *, hint: bool = True) -> list[str]:
    """What opens a host's tools section: how to call a tool (unless ``hint`` is False: an
    earlier text of the conversation said it), and the tools (``listed`` entries) its tool
    list already has, which are named rather than described."""
    intro = [CALL_HINT] if hint else []
    if listed:
        intro.append("Already in your tool list: " + ", ".join(listed) + ".")
    return intro


def listed_entry(row: RequestItem, directory: ToolDirectory, intents: Sequence[str] = ()) -> str:
    """A tool the host already lists, named for :func:`tools_intro`."""
    return f"`{directory.exposed_name(row.ref)}` ({how_included(row, intents)})"


REACH_TITLE = "## More tools within reach"
REACH_INTRO = (
    "Named one line each, not described above: get_context_items(keys=[name]) gives a "
    "tool's input schema; then call it as the tools above."
)


def reach_section(
    context: RequestContext, lookup: Lookup, directory: ToolDirectory, line_chars: int
) -> list[str]:
    """The request context's further candidates as lines (none: an empty list). A turn that
    continues a conversation whose texts already said how to use them leaves out the
    intro."""
    if not context.candidates:
        return []
    lines = [
        candidate_line(item_heading(row.ref, item, directory), item, line_chars)
        for row in context.candidates
        for item in (lookup(row.ref),)
    ]
    told = context.continues and (context.named_before > 0 or _gave_tools(context))
    return [REACH_TITLE, *(() if told else (REACH_INTRO,)), *lines]


DIRECTORY_TITLE = "## Every other tool, by server"
DIRECTORY_INTRO = (
    'get_context_items(keys=["<server>/<tool>"]) gives one\'s input schema; then call it '
    "with call_tool."
)


def directory_section(context: RequestContext) -> list[str]:
    """A small catalog's other tools, one line per server (none: an empty list)."""
    if not context.directory:
        return []
    by_server: dict[str, list[str]] = {}
    for ref in context.directory:
        by_server.setdefault(inline(ref.server or ""), []).append(inline(ref.name))
    lines = [f"- server {server}: " + ", ".join(names) for server, names in by_server.items()]
    return [DIRECTORY_TITLE, DIRECTORY_INTRO, *lines]


def _gave_tools(context: RequestContext) -> bool:
    """Whether an earlier text of the conversation gave a tool in full (and so said how to
    call one)."""
    return any(ref.type == "tool" for ref in context.given)


GIVEN_EARLIER = "Given earlier in this conversation"


def given_line(
    context: RequestContext, rows: Sequence[RequestItem], directory: ToolDirectory
) -> str:
    """The one line naming what earlier texts of the conversation gave in full, with how
    to see one again; with further candidates named before, how many."""
    names = [_short_name(row.ref, directory) for row in rows]
    again = " (get_context_items gives one again)" if names else ""
    line = f"{GIVEN_EARLIER}{again}: " + ", ".join(names) if names else ""
    if context.named_before:
        more = f"{context.named_before} more tools named earlier are still within reach."
        line = f"{line}. {more}" if line else more
    return line


def _short_name(ref: ItemRef, directory: ToolDirectory) -> str:
    if ref.type != "tool":
        return f"{ref.type} `{inline(ref.name)}`"
    name = directory.exposed_name(ref)
    return f"`{inline(name if name is not None else f'{ref.server}/{ref.name}')}`"


def _header(context: RequestContext) -> list[str]:
    preset = context.preset
    lines = [
        "# Context for this request",
        f"Request {context.request_id} in session {context.session_id} · "
        f"{summary_line(context.items)}" + (f" · preset {preset}" if preset else ""),
    ]
    if context.intents:
        steps = "; ".join(f"{n}. {step}" for n, step in enumerate(context.intents, 1))
        lines.append(f"Plan searched: {steps}")
    if context.context_turns and not context.continues:  # its entries name their turn
        turns = ", ".join(context.context_turns)
        lines.append(f"Earlier turns that brought items in: {turns}")
    if not context.items:
        lines.append("No rules, references or tools were selected for this message.")
    return lines


def _name_line(
    row: RequestItem, item: ContextItem | None, directory: ToolDirectory, intents: Sequence[str]
) -> str:
    return f"- {item_heading(row.ref, item, directory)} — {how_included(row, intents)}"


def _omitted_line(row: RequestItem, tokens: int, intents: Sequence[str]) -> str:
    return (
        f"- {row.ref.key} ({how_included(row, intents)}, about {tokens:,} tokens): "
        f'get_context_items(keys=["{row.ref.key}"])'
    )


Block = tuple[RequestItem, str, int]  # a row, its text, its cost (0: a names-only line)


def render_context(
    context: RequestContext,
    lookup: Lookup,
    directory: ToolDirectory,
    *,
    max_tokens: int,
    detail: Detail = "full",
    line_chars: int = 90,
) -> RenderedContext:
    """The request context as model-readable text of at most ``max_tokens`` (estimated).

    Rules and references by priority then name, tools the session holds first, then best
    first. With ``detail`` ``"names"`` only each item's heading and mode is given. Tools the
    host already lists are named, not repeated, and so are items an earlier text of the
    conversation gave (``context.given``). Items that do not fit are named under "Not
    included" with how to fetch them; the header, warnings and that list always fit,
    whatever the budget. The further candidates follow the tools, one line each
    (``line_chars`` of a description), then a small catalog's directory; over the budget,
    they go first, from the last.
    """
    fixed = _header(context)
    warnings = [f"- {inline(w)}" for w in context.warnings]
    listed, earlier, blocks = _sorted_out(context, lookup, directory, detail)
    if earlier or context.named_before:
        fixed = [*fixed, given_line(context, earlier, directory)]
    budget = max_tokens - estimate_tokens("\n".join(fixed + warnings + listed)) - 60
    kept: list[Block] = []
    omitted: list[tuple[RequestItem, int]] = []
    for row, block, cost in blocks:
        if cost and cost + _OMITTED_LINE_TOKENS > budget:
            omitted.append((row, cost))
            budget -= _OMITTED_LINE_TOKENS
        else:
            kept.append((row, block, cost))
            budget -= cost
    reach = reach_section(context, lookup, directory, line_chars)
    catalog = directory_section(context)
    reach += ([""] if reach and catalog else []) + catalog
    hint = not (context.continues and _gave_tools(context))
    while True:
        parts = (fixed, kept, listed, reach, omitted, warnings)
        text = _assemble(*parts, max_tokens, context.intents, hint=hint)
        if estimate_tokens(text) <= max_tokens:
            break
        if reach:  # candidate lines go first, the last first, then the whole section
            reach = reach[:-1] if len(reach) > 3 else []
            continue
        if not any(cost for _, _, cost in kept):
            break
        row, _, cost = next(entry for entry in reversed(kept) if entry[2])
        kept = [entry for entry in kept if entry[0] is not row]
        omitted.append((row, cost))
    return RenderedContext(text, estimate_tokens(text), tuple(row for row, _ in omitted))


def _sorted_out(
    context: RequestContext, lookup: Lookup, directory: ToolDirectory, detail: Detail
) -> tuple[list[str], list[RequestItem], list[Block]]:
    """The rows in order as the text gives them: tools the host lists (named), items given
    earlier in the conversation (named in one line), and the blocks of the others."""
    listed: list[str] = []
    earlier: list[RequestItem] = []
    blocks: list[Block] = []
    given = set(context.given)
    for row in sort_items(context.items, lookup):
        if row.ref.type == "tool" and directory.listed(row.ref):
            listed.append(listed_entry(row, directory, context.intents))
        elif row.ref in given:
            earlier.append(row)
        elif detail == "names":
            line = _name_line(row, lookup(row.ref), directory, context.intents)
            blocks.append((row, line, 0))
        else:
            block = describe(row, lookup, directory, context.intents)
            blocks.append((row, block, estimate_tokens(block) + 1))
    return listed, earlier, blocks


def _assemble(
    fixed: list[str],
    kept: Sequence[tuple[RequestItem, str, int]],
    listed: Sequence[str],
    reach: Sequence[str],
    omitted: Sequence[tuple[RequestItem, int]],
    warnings: Sequence[str],
    max_tokens: int,
    intents: Sequence[str],
    *,
    hint: bool = True,
) -> str:
    parts = ["\n".join(fixed)]
    for kind in _TITLES:
        blocks = [block for row, block, _ in kept if row.ref.type == kind]
        if kind == "tool" and (blocks or listed):
            parts.append(section(kind, blocks, tools_intro(listed, hint=hint)))
        elif blocks:
            parts.append(section(kind, blocks))
    if reach:  # the further candidates, right after the tools
        parts.append("\n".join(reach))
    if omitted:
        head = f"## Not included (over the {max_tokens:,}-token budget)"
        lines = [_omitted_line(row, n, intents) for row, n in omitted]
        parts.append("\n".join([head, *lines]))
    if warnings:
        parts.append("\n".join(["## Warnings", *warnings]))
    return "\n\n".join(parts)
