"""Tool results as they go to a host: an error result, and results cut to
``limits.max_result_bytes`` (the broker's own, and a downstream's JSON object) so that no
answer outgrows what a host takes."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import Any

from mcp import types

__all__ = ["capped_downstream", "capped_result", "error_result"]

log = logging.getLogger(__name__)

_MAX_ERROR_CHARS = 2000


def error_result(text: str) -> types.CallToolResult:
    """An ``isError`` tool result with one bounded text block."""
    if len(text) > _MAX_ERROR_CHARS:
        text = text[: _MAX_ERROR_CHARS - 1] + "…"
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)], is_error=True)


# What to do to get what a capped result left out, per tool; other tools get the generic hint.
_REST_HINTS = {
    "get_history": "ask for a smaller window (max_tokens) or trim more (preset or filters)",
    "trim_messages": "send fewer messages or pass a smaller max_tokens",
    "list_catalog": "list one item type at a time (types)",
    "get_usage_stats": "ask for one session at a time (session_id)",
    "get_request_context": "ask for names only (detail='names') or a smaller max_context_tokens",
}
_CUT = "…[{} characters cut]"
_ENVELOPE_BYTES = 2048  # JSON-RPC envelope and the note itself


def _json_bytes(value: Any) -> int:
    return len(json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode())


def _shrunk(value: Any, max_chars: int, max_items: int | None) -> Any:
    """``value`` with every string over ``max_chars`` cut (saying how much) and, with
    ``max_items``, every list cut to its first ``max_items`` items."""
    if isinstance(value, str):
        return (
            value
            if len(value) <= max_chars
            else value[:max_chars] + _CUT.format(len(value) - max_chars)
        )
    if isinstance(value, dict):
        return {k: _shrunk(v, max_chars, max_items) for k, v in value.items()}
    if isinstance(value, list):
        kept = value if max_items is None else value[:max_items]
        return [_shrunk(v, max_chars, max_items) for v in kept]
    return value


def _largest_fitting(fits: Callable[[int], bool], high: int) -> int | None:
    """The largest n in [0, high] with ``fits(n)`` (``fits`` grows monotonically false)."""
    if not fits(0):
        return None
    low = 0
    while low < high:
        middle = (low + high + 1) // 2
        if fits(middle):
            low = middle
        else:
            high = middle - 1
    return low


def _longest_string(value: Any) -> int:
    if isinstance(value, str):
        return len(value)
    children = (
        value.values() if isinstance(value, dict) else value if isinstance(value, list) else ()
    )
    return max((_longest_string(v) for v in children), default=0)


def _longest_list(value: Any) -> int:
    if isinstance(value, dict):
        return max((_longest_list(v) for v in value.values()), default=0)
    if isinstance(value, list):
        return max([len(value), *(_longest_list(v) for v in value)])
    return 0


def _fit(value: Any, room: int) -> tuple[Any, list[str]] | None:
    """``value`` cut to at most ``room`` serialized bytes, keeping its shape: the longest
    strings cut to one common length (each saying how much went), then, if that is not
    enough, long lists cut to their first items; with what was cut, or None if it cannot fit."""
    max_items: int | None = None
    max_chars = _largest_fitting(
        lambda n: _json_bytes(_shrunk(value, n, None)) <= room, _longest_string(value)
    )
    if max_chars is None or max_chars < 200:
        max_chars = 200
        max_items = _largest_fitting(
            lambda n: _json_bytes(_shrunk(value, 200, n)) <= room, _longest_list(value)
        )
        if max_items is None:
            return None
    cuts = [f"strings longer than {max_chars:,} characters were cut"]
    if max_items is not None:
        cuts.append(f"lists kept their first {max_items:,} items")
    return _shrunk(value, max_chars, max_items), cuts


def _too_big(tool: str, size: int, max_bytes: int) -> str:
    return (
        f"{tool}: the result is {size:,} bytes, over limits.max_result_bytes "
        f"({max_bytes}), and cannot be cut to fit; "
        f"{_REST_HINTS.get(tool, 'call again with narrower arguments')}"
    )


def capped_result(
    tool: str, text: str, structured: dict[str, Any], max_bytes: int
) -> types.CallToolResult:
    """A tool result of at most about ``max_bytes`` serialized bytes.

    A bigger one keeps its shape: its text is cut, and its structured content is cut as
    :func:`_fit` does. A second text block says what was cut and how to get the rest.
    """
    size = len(text.encode()) + _json_bytes(structured)
    if size <= max_bytes:
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=text)], structured_content=structured
        )
    budget = max_bytes - _ENVELOPE_BYTES
    text_budget = budget // 4
    short_text = text if len(text.encode()) <= text_budget else _cut_text(text, text_budget)
    fitted = _fit(structured, budget - len(short_text.encode()))
    if fitted is None:
        return error_result(_too_big(tool, size, max_bytes))
    shrunk, cuts = fitted
    note = (
        f"[{tool}: this result was {size:,} bytes, over limits.max_result_bytes ({max_bytes}); "
        f"to fit, the text was cut to {len(short_text):,} characters, "
        f"{' and '.join(cuts)} (each cut says how much went). To get the rest: "
        f"{_REST_HINTS.get(tool, 'call again with narrower arguments')}.]"
    )
    log.info("tool %s result of %d bytes cut to fit max_result_bytes %d", tool, size, max_bytes)
    return types.CallToolResult(
        content=[
            types.TextContent(type="text", text=short_text),
            types.TextContent(type="text", text=note),
        ],
        structured_content=shrunk,
    )


def capped_downstream(tool: str, result: dict[str, Any], max_bytes: int) -> dict[str, Any]:
    """A downstream tool's result (its JSON object) of at most about ``max_bytes`` serialized
    bytes, cut the way the broker's own results are: binary payloads (images, audio, blobs)
    give way to a line saying what they were, then text and structured content are cut as
    :func:`_fit` does, and a last text block says what was cut."""
    size = _json_bytes(result)
    if size <= max_bytes:
        return result
    content = result.get("content")
    blocks = [_without_binary(b) for b in content] if isinstance(content, list) else content
    body = {**result, "content": blocks} if isinstance(content, list) else dict(result)
    fitted = _fit(body, max_bytes - _ENVELOPE_BYTES)
    if fitted is None:
        text = _too_big(tool, size, max_bytes)
        return {"content": [{"type": "text", "text": text}], "isError": True}
    shrunk, cuts = fitted
    if blocks != content:
        cuts.insert(0, "binary content was left out")
    note = (
        f"[{tool}: this downstream result was {size:,} bytes, over limits.max_result_bytes "
        f"({max_bytes}); to fit, {' and '.join(cuts)} (each cut says how much went). To get "
        "the rest: call again with narrower arguments.]"
    )
    log.info(
        "downstream %s result of %d bytes cut to fit max_result_bytes %d", tool, size, max_bytes
    )
    shrunk["content"] = [*(shrunk.get("content") or []), {"type": "text", "text": note}]
    return shrunk  # type: ignore[no-any-return]


def _without_binary(block: Any) -> Any:
    """A content block with its base64 payload (``data``, or a resource's ``blob``) replaced
    by a text block naming it: cut base64 would be a broken file."""
    if not isinstance(block, dict):
        return block
    resource = block.get("resource")
    if isinstance(block.get("data"), str):
        payload, kind = block["data"], f"{block.get('type', 'binary')} {block.get('mimeType', '')}"
    elif isinstance(resource, dict) and isinstance(resource.get("blob"), str):
        payload, kind = resource["blob"], f"resource {resource.get('uri', '')}"
    else:
        return block
    text = f"[{kind.strip()} of {len(payload):,} base64 characters left out]"
    return {"type": "text", "text": text}


def _cut_text(text: str, max_bytes: int) -> str:
    kept = text.encode()[:max_bytes].decode(errors="ignore")
    return kept + _CUT.format(len(text) - len(kept))
