"""``uiCompression``: shrink big JSON payloads in tool results (UI trees, element lists).

Only results whose text is JSON of at least ``minChars`` characters are touched. Objects
nested deeper than ``maxDepth`` become ``"[truncated]"`` (lists do not add depth, so a tree's
levels are its nested nodes), ``children`` lists keep ``maxChildren`` items and other lists
``maxNodes``, noise fields (``dropFields``) go, and strings are cut at ``maxTextChars``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .._options import OPTIONS_CONFIG, Count, Positive, Texts
from ..messages import TRUNCATED, Message, cut, make_message, map_texts
from .base import FilterDefinition, FilterRun

__all__ = ["UI_COMPRESSION", "UiCompressionOptions", "compress_json", "compress_ui"]


@dataclass(frozen=True)
class UiCompressionOptions:
    """Options of ``uiCompression``."""

    __pydantic_config__ = OPTIONS_CONFIG

    max_nodes: Positive = 200
    max_children: Positive = 20
    max_depth: Count = 2
    max_text_chars: Positive = 1000
    min_chars: Count = 2000
    drop_fields: Texts = ("description", "help")


def compress_json(
    value: Any, options: UiCompressionOptions, depth: int = 0, key: str | None = None
) -> Any:
    """Return a compressed copy of a parsed JSON value (see the module docstring)."""
    if isinstance(value, dict):
        if depth > options.max_depth:
            return TRUNCATED
        return {
            k: compress_json(v, options, depth + 1, k)
            for k, v in value.items()
            if k not in options.drop_fields
        }
    if isinstance(value, list):
        limit = options.max_children if key == "children" else options.max_nodes
        items = [compress_json(v, options, depth, None) for v in value[:limit]]
        if len(value) > limit:
            items.append(f"...[{len(value) - limit} more truncated]")
        return items
    if isinstance(value, str):
        return cut(value, options.max_text_chars)
    return value


def compress_ui(
    messages: Sequence[Message], options: UiCompressionOptions, run: FilterRun
) -> list[Message]:
    """Compress big JSON tool results in every message."""
    out = []
    for message in messages:
        if not message.results:
            out.append(message)
            continue
        raw = map_texts(message.raw, lambda text, call_id: _compress_text(text, call_id, options))
        if raw is message.raw:
            out.append(message)
        else:
            run.tally.truncate(message.id)
            out.append(make_message(raw))
    return out


def _compress_text(text: str, call_id: str | None, options: UiCompressionOptions) -> str:
    if call_id is None or len(text) < options.min_chars or text.lstrip()[:1] not in ("{", "["):
        return text
    try:
        parsed = json.loads(text)
        compressed = compress_json(parsed, options)
    except (ValueError, RecursionError):  # not JSON, or nested deeper than Python recurses
        return text
    packed = json.dumps(compressed, ensure_ascii=False, separators=(",", ":"))
    return packed if len(packed) < len(text) else text


UI_COMPRESSION: FilterDefinition[UiCompressionOptions] = FilterDefinition(
    "uiCompression",
    UiCompressionOptions,
    compress_ui,
    "compress big JSON payloads (accessibility trees, DOM lists) in tool results",
)
