"""Assembling the complete LLM input for one request from an assembly model.

:func:`assemble` walks the model's leaves (depth-first, left to right) and lets each emit:

- ``rules`` / ``references``: one system message with the request's rules (references) in
  priority order, each worded as the request context's text words it
  (:func:`contextcore.context_text.describe`: ``## Rules``, then ``### 010 name — how it
  was included``, description and text);
- ``tools``: one system message with the selected tools, worded the same way: the name to
  call, how it was included, description and input schema (JSON);
- ``summary``: the running summary as a user message plus an assistant acknowledgement;
- ``snapshot``: the task snapshot as a system message;
- ``history``: the session's history window (the messages the summary does not cover, or
  the last ``window_without_summary`` ones), filtered;
- ``message``: the user message; ``literal``: its text as a system message.

A leaf with nothing to emit (no rules selected, no summary yet) emits nothing, framing
included. ``framing`` is prefixed to the leaf's first message, except for ``history``, where
it is a system message of its own before the window (left out when the window is empty).

Filters: every component other than the history window is *pinned* (see
:class:`~contextcore.history.RunContext`): its messages count against the budget first and
pass through the filters unchanged, so rules, references, tools, summary, snapshot, literals
and the user message always survive. The filters (``sizeLimiter``, ``pruneMiddle``, ...)
see only the history window, so ``sizeLimiter`` and the final budget guard drop history
messages only (oldest first, whole tool units). When the pinned messages alone exceed the
budget the whole window is dropped and ``tokens_after`` in the report shows by how much the
input is over.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, assert_never

from .assembly_model import (
    PRESETS,
    AssemblyError,
    AssemblyModel,
    AssemblyModelSpec,
    Component,
    ComponentKind,
    parse_model,
    preset_model,
)
from .context_text import NoTools, ToolDirectory, describe, section
from .errors import HistoryError
from .history import (
    ConversationHistory,
    FilterRegistry,
    FilterSpec,
    Pipeline,
    PipelineReport,
    RunContext,
    SummaryPolicy,
    build_pipeline,
    message_tokens,
)
from .history.filters.size import SizeLimiterOptions
from .history.tokens import Tokenizer, resolve_tokenizer
from .history.window import ACKNOWLEDGEMENT, window_start
from .items import ContextItem, ItemRef, ItemType
from .render import sort_items
from .sessions import RequestContext

__all__ = [
    "PRESETS",
    "Assembly",
    "AssemblyError",
    "AssemblyModel",
    "AssemblyModelSpec",
    "AssemblyReport",
    "ComponentReport",
    "assemble",
    "context_messages",
    "model_pipeline",
    "parse_model",
    "preset_model",
    "resolve_model",
]

Lookup = Callable[[ItemRef], ContextItem | None]
Raw = dict[str, Any]


@dataclass(frozen=True)
class ComponentReport:
    """What one emitting component (or the intro) put into the input: message positions
    in the final list and their estimated tokens."""

    path: str
    kind: ComponentKind | str
    messages: tuple[int, ...]
    tokens: int


@dataclass(frozen=True)
class AssemblyReport:
    """Where the budget went: one row per emitting component, the total, the filter run.

    ``window_start`` is the position in the session's history where the window began
    (messages before it are covered by the summary or left out).
    """

    components: tuple[ComponentReport, ...]
    total_tokens: int
    filters: PipelineReport
    window_start: int
    warnings: tuple[str, ...] = field(default=())


@dataclass(frozen=True)
class Assembly:
    """The complete LLM input and the report on how it was built."""

    messages: list[Raw]
    report: AssemblyReport


def model_pipeline(
    model: AssemblyModel, registry: FilterRegistry | None = None, default: FilterSpec = "general"
) -> Pipeline:
    """The model's filter pipeline (``default`` when it names none); a bad spec is an
    :class:`AssemblyError` naming ``model.filters...``."""
    spec: FilterSpec = model.filters if model.filters is not None else default
    try:
        return build_pipeline(spec, registry)
    except HistoryError as exc:
        where = f"model.{exc.field}" if exc.field else "model.filters"
        text = exc.message
        text = f"model.{text}" if text.startswith("filters") else f"{where}: {text}"
        raise AssemblyError(text, field=where) from None


def assemble(
    context: RequestContext,
    lookup: Lookup,
    history: ConversationHistory,
    model: AssemblyModel,
    *,
    pipeline: Pipeline | None = None,
    registry: FilterRegistry | None = None,
    policy: SummaryPolicy | None = None,
    max_tokens: int | None = None,
    directory: ToolDirectory | None = None,
) -> Assembly:
    """Build the LLM input for the recorded ``context`` and the session's ``history``.

    ``pipeline`` defaults to :func:`model_pipeline`; ``max_tokens`` caps its budget like
    ``get_history``'s; ``policy`` decides the window without a summary; ``directory`` gives
    the names the selected tools are called by.
    """
    pipeline = pipeline or model_pipeline(model, registry)
    tokenizer, overhead = _cost_options(pipeline)
    start = window_start(history, policy or SummaryPolicy())
    parts: list[tuple[str, ComponentKind | str, list[Raw]]] = []
    if model.intro:
        parts.append(("intro", "intro", [_system(model.intro)]))
    history_leaf: Component | None = None
    for leaf in model.leaves():
        if leaf.kind == "history":
            history_leaf = leaf
            parts.append((leaf.path, leaf.kind, []))
        else:
            emitted = _emit(leaf, context, lookup, history, directory or NoTools())
            parts.append((leaf.path, leaf.kind, emitted))
    framing = [_system(history_leaf.framing)] if history_leaf and history_leaf.framing else []
    pinned = [m for _, kind, msgs in parts if kind != "history" for m in msgs] + framing
    recent = history.messages[start:] if history_leaf and not history.cleared else ()
    run = pipeline.run_parsed(
        recent,
        history.shape,
        RunContext(groups=history.groups, max_tokens=max_tokens, pinned=tuple(pinned)),
    )
    window = run.messages[len(pinned) :]

    def cost(raws: Sequence[Raw]) -> int:
        return sum(message_tokens(m, tokenizer, overhead) for m in raws)

    # The run already sized the window's messages: take its total rather than re-encode them.
    window_cost = run.report.tokens_after - cost(pinned)
    history_part = ([*framing, *window], cost(framing) + window_cost) if window else ([], 0)
    messages, rows = _place(parts, history_part, cost)
    report = AssemblyReport(
        tuple(rows),
        sum(r.tokens for r in rows),
        run.report,
        start,
        tuple(_warnings(model, history)),
    )
    return Assembly(messages, report)


def _place(
    parts: Sequence[tuple[str, ComponentKind | str, list[Raw]]],
    history_part: tuple[list[Raw], int],
    cost: Callable[[Sequence[Raw]], int],
) -> tuple[list[Raw], list[ComponentReport]]:
    """The messages in model order, with one report row per part; the history leaf takes
    the filtered window (with its framing) and its already known cost."""
    messages: list[Raw] = []
    rows: list[ComponentReport] = []
    for path, kind, emitted in parts:
        emitted, tokens = history_part if kind == "history" else (emitted, cost(emitted))
        first = len(messages)
        messages += emitted
        rows.append(ComponentReport(path, kind, tuple(range(first, len(messages))), tokens))
    return messages, rows


# The request context alone: no history, no tools as text (a host passes the selected
# tools' schemas to its model itself).
_CONTEXT_ONLY = AssemblyModel(
    (
        Component("references", "components[0]"),
        Component("rules", "components[1]"),
        Component("message", "components[2]"),
    )
)


def context_messages(context: RequestContext, lookup: Lookup) -> list[Raw]:
    """The LLM input of a recorded request context alone: a system message with its
    references, one with its rules (each left out when empty), then the user message."""
    return assemble(context, lookup, ConversationHistory(), _CONTEXT_ONLY).messages


def _cost_options(pipeline: Pipeline) -> tuple[Tokenizer, int]:
    # The same choice the pipeline makes for its own token counts.
    sizes = [f.options for f in pipeline.filters if f.name == "sizeLimiter"]
    size = sizes[-1] if sizes else SizeLimiterOptions()
    assert isinstance(size, SizeLimiterOptions)
    return resolve_tokenizer(size.tokenizer), size.per_message_overhead


def _warnings(model: AssemblyModel, history: ConversationHistory) -> list[str]:
    kinds = {leaf.kind for leaf in model.leaves()}
    out = []
    if "message" not in kinds:
        out.append("the model has no message component: the user message is not in the input")
    if history.summary is not None and not history.cleared and "summary" not in kinds:
        out.append(
            f"the session has a summary but the model has no summary component: the "
            f"{history.summary.covered} message(s) it covers are not in the input"
        )
    return out


# -- what each kind emits ----------------------------------------------------------------


def _emit(
    leaf: Component,
    context: RequestContext,
    lookup: Lookup,
    history: ConversationHistory,
    directory: ToolDirectory,
) -> list[Raw]:
    kind = leaf.kind
    if kind == "rules" or kind == "references" or kind == "tools":
        text = _items(context, lookup, directory, _ITEM_TYPES[kind])
        return [_system(_framed(leaf, text))] if text else []
    if kind == "summary":
        return _summary(leaf, history)
    if kind == "snapshot":
        snapshot = history.snapshot
        if snapshot is None or snapshot.is_empty or history.cleared:
            return []
        return [{"role": "system", "content": _framed(leaf, snapshot.render()), "id": "snapshot"}]
    if kind == "message":
        return [{"role": "user", "content": _framed(leaf, context.message)}]
    if kind == "literal":
        return [_system(_framed(leaf, leaf.text or ""))]
    if kind == "history":
        return []  # filled in after the filter run
    assert_never(kind)


def _system(text: str) -> Raw:
    return {"role": "system", "content": text}


def _framed(leaf: Component, text: str) -> str:
    return f"{leaf.framing}\n\n{text}" if leaf.framing else text


def _summary(leaf: Component, history: ConversationHistory) -> list[Raw]:
    summary = history.summary
    if summary is None or history.cleared:
        return []
    text = f"[Earlier conversation summary: {summary.text}]"
    return [
        {"role": "user", "id": f"summary:{summary.covered}", "content": _framed(leaf, text)},
        {"role": "assistant", "content": ACKNOWLEDGEMENT, "id": f"summary-ack:{summary.covered}"},
    ]


_ITEM_TYPES: dict[str, ItemType] = {"rules": "rule", "references": "reference", "tools": "tool"}


def _items(
    context: RequestContext, lookup: Lookup, directory: ToolDirectory, kind: ItemType
) -> str:
    """The request's items of one kind as the request context's text words them; items no
    longer in the catalog are left out of an LLM input."""
    rows = [r for r in sort_items(context.items, lookup) if r.ref.type == kind]
    blocks = [
        describe(r, lookup, directory, context.intents) for r in rows if lookup(r.ref) is not None
    ]
    return section(kind, blocks) if blocks else ""


def resolve_model(
    model: object,
    preset: str | None,
    named: Mapping[str, AssemblyModelSpec | AssemblyModel],
) -> tuple[str, AssemblyModel]:
    """The model a request asks for: a name from ``named``, an inline object, or a preset
    (``default`` when neither is given); returns (label, model)."""
    if model is not None and preset is not None:
        raise AssemblyError("give either model or preset, not both", field="model")
    if preset is not None:
        return preset, preset_model(preset)
    if model is None:
        return "default", PRESETS["default"]
    if isinstance(model, str):
        found = named.get(model)
        if found is None:
            known = ", ".join(sorted(named)) or "none are configured"
            raise AssemblyError(
                f"unknown model {model!r}; named models: {known} (or pass a model object "
                f"or a preset: {', '.join(PRESETS)})",
                field="model",
            )
        return model, found if isinstance(found, AssemblyModel) else parse_model(found)
    return "inline", parse_model(model)
