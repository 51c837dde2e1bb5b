"""``pruneMiddle``: shrink the middle of a long agent loop, keep its ends whole.

The first message and the last ``keepLast`` stay untouched. In between: file contents of
multi-file writes become ``[truncated]``, a single write's content longer than ``maxChars``
becomes ``[truncated]`` (paths are kept), and tool results and texts longer than
``maxChars`` are cut to their first ``keepChars`` characters. Inputs of read, list and run
calls are kept.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .._options import OPTIONS_CONFIG, Count, Positive
from .._tools import CONTENT_KEYS, EDIT_KEYS, tool_kind
from ..messages import TRUNCATED, Message, ToolCall, cut, make_message, map_args, map_texts
from .base import FilterDefinition, FilterRun

__all__ = ["PRUNE_MIDDLE", "PruneMiddleOptions", "prune_middle"]


@dataclass(frozen=True)
class PruneMiddleOptions:
    """Options of ``pruneMiddle``."""

    __pydantic_config__ = OPTIONS_CONFIG

    keep_last: Count = 6
    max_chars: Positive = 2000
    keep_chars: Count = 200


def prune_middle(
    messages: Sequence[Message], options: PruneMiddleOptions, run: FilterRun
) -> list[Message]:
    """Shrink every message between the first one and the last ``keep_last``."""
    end = len(messages) - options.keep_last
    out = list(messages)
    for position in range(1, max(1, end)):
        message = messages[position]
        raw = map_args(message.raw, message.calls, lambda call: _write_args(call, options))
        raw = map_texts(raw, lambda text, _id: _shorten(text, options))
        if raw is not message.raw:
            run.tally.truncate(message.id)
            out[position] = make_message(raw)
    return out


def _shorten(text: str, options: PruneMiddleOptions) -> str:
    return cut(text, options.keep_chars) if len(text) > options.max_chars else text


def _write_args(call: ToolCall, options: PruneMiddleOptions) -> Mapping[str, Any] | None:
    if tool_kind(call) not in ("write", "edit"):
        return None
    arguments = dict(call.arguments)
    changed = False
    for list_key in ("files", "edits"):
        items = arguments.get(list_key)
        if isinstance(items, list):
            arguments[list_key] = [_blank_contents(item) for item in items]
            changed = changed or arguments[list_key] != items
    for key in (*CONTENT_KEYS, *EDIT_KEYS):
        value = arguments.get(key)
        if isinstance(value, str) and len(value) > options.max_chars:
            arguments[key] = TRUNCATED
            changed = True
    return arguments if changed else None


def _blank_contents(item: Any) -> Any:
    if not isinstance(item, Mapping):
        return item
    return {
        k: TRUNCATED if k in CONTENT_KEYS + EDIT_KEYS and isinstance(v, str) else v
        for k, v in item.items()
    }


PRUNE_MIDDLE: FilterDefinition[PruneMiddleOptions] = FilterDefinition(
    "pruneMiddle",
    PruneMiddleOptions,
    prune_middle,
    "truncate big writes, results and texts between the first and the last few messages",
)
