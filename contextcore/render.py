"""Human renderings of request contexts: a summary line, item order, Markdown."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from .items import ContextItem, ItemRef
from .sessions import RequestContext, RequestItem

__all__ = ["render_markdown", "sort_items", "summary_line"]

_PLURAL = {"rule": "rules", "reference": "references", "tool": "tools"}

Lookup = Callable[[ItemRef], ContextItem | None]


def summary_line(items: Sequence[RequestItem]) -> str:
    """E.g. ``5 rules (3 agent, 2 always), 2 references (1 agent, 1 manual), 3 tools (all
    manual)``: modes by count, then by name; ``no items`` when empty."""
    parts: list[str] = []
    for kind in ("rule", "reference", "tool"):
        rows = [i for i in items if i.ref.type == kind]
        if not rows:
            continue
        counts: dict[str, int] = {}
        for row in rows:
            counts[row.include_mode] = counts.get(row.include_mode, 0) + 1
        noun = kind if len(rows) == 1 else _PLURAL[kind]
        if len(counts) == 1:
            detail = f"all {next(iter(counts))}" if len(rows) > 1 else next(iter(counts))
        else:
            ordered = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
            detail = ", ".join(f"{n} {mode}" for mode, n in ordered)
        parts.append(f"{len(rows)} {noun} ({detail})")
    return ", ".join(parts) if parts else "no items"


def sort_items(items: Sequence[RequestItem], lookup: Lookup) -> list[RequestItem]:
    """Rules, references, tools; rules and references by priority (highest first) then name;
    tools the session holds first, then best score first (ties by server and name)."""

    kinds = {"rule": 0, "reference": 1, "tool": 2}

    def key(row: RequestItem) -> tuple[Any, ...]:
        if row.ref.type == "tool":
            score = row.similarity_score
            rank = (0, 0.0) if score is None else (1, -score)
            return (kinds["tool"], rank, row.ref.server or "", row.ref.name)
        item = lookup(row.ref)
        return (kinds[row.ref.type], -(item.priority if item is not None else 0), "", row.ref.name)

    return sorted(items, key=key)


def _badge(row: RequestItem) -> str:
    score = f" {row.similarity_score:.2f}" if row.similarity_score is not None else ""
    return f"`{row.include_mode}`{score}"


def render_markdown(context: RequestContext, lookup: Lookup) -> str:
    """Three sections (rules, references, tools) with include-mode badges and scores."""
    lines = [
        f"# Request {context.request_id}",
        "",
        f"{context.timestamp} · {summary_line(context.items)}",
    ]
    for kind, title in (("rule", "Rules"), ("reference", "References"), ("tool", "Tools")):
        rows = sort_items([i for i in context.items if i.ref.type == kind], lookup)
        lines += ["", f"## {title}", ""]
        if not rows:
            lines.append("_none_")
        for row in rows:
            name = f"{row.ref.server}/{row.ref.name}" if row.ref.server else row.ref.name
            missing = "" if lookup(row.ref) is not None else " _(no longer in the catalog)_"
            lines.append(f"- **{name}** {_badge(row)}{missing}")
    if context.warnings:
        lines += ["", "## Warnings", "", *(f"- {w}" for w in context.warnings)]
    return "\n".join(lines) + "\n"
