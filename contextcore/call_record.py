"""Turning a proxied tool call and its result into history messages, in the session's shape,
so history management sees calls the host never resends."""

from __future__ import annotations

import json
import secrets
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .history.messages import Shape, tool_call_messages

__all__ = ["ProxiedCall", "call_messages", "result_text"]


@dataclass(frozen=True)
class ProxiedCall:
    """A downstream call forwarded for a session, as it is recorded (its fields, in this
    order, are the stored call record): ``result`` is the text :func:`result_text` made of
    the downstream's result, ``at`` the time of the call (Unix seconds)."""

    server: str
    tool: str
    arguments: Mapping[str, Any]
    result: str
    is_error: bool
    at: float


def result_text(
    content: Sequence[Mapping[str, Any]], structured: Any, max_chars: int
) -> tuple[str, bool]:
    """The text a tool result is recorded as, and whether it was cut to ``max_chars``.

    Text blocks are kept; other blocks become a short description (an image's type and size);
    structured content is used when there is no text.
    """
    parts: list[str] = []
    for block in content:
        kind = block.get("type")
        if kind == "text":
            parts.append(str(block.get("text", "")))
        elif kind in ("image", "audio"):
            size = len(str(block.get("data", ""))) * 3 // 4
            parts.append(f"[{kind} {block.get('mimeType', '')}, about {size} bytes]")
        elif kind == "resource_link":
            parts.append(f"[resource link {block.get('uri', '')}]")
        elif kind == "resource":
            resource = block.get("resource") or {}
            parts.append(str(resource.get("text") or f"[resource {resource.get('uri', '')}]"))
        else:
            parts.append(f"[{kind} content]")
    text = "\n".join(p for p in parts if p)
    if not text and structured is not None:
        text = json.dumps(structured, ensure_ascii=False)
    text = text or "[empty result]"
    if len(text) <= max_chars:
        return text, False
    note = f"\n[truncated by the broker: {max_chars} of {len(text)} characters kept]"
    return text[:max_chars] + note, True


def call_messages(
    shape: Shape,
    tool: str,
    arguments: Mapping[str, Any],
    text: str,
    is_error: bool,
    call_id: str | None = None,
) -> list[dict[str, Any]]:
    """An assistant tool call and its result, as two messages of ``shape``."""
    call_id = call_id or "call_" + secrets.token_hex(8)
    return tool_call_messages(shape, call_id, tool, arguments, text, is_error)
