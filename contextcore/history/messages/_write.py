"""Writing new messages and blocks in either wire shape."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from ._read import Shape

__all__ = ["result_block", "text_block", "tool_call_messages", "tool_message"]


def text_block(text: str) -> dict[str, Any]:
    """An Anthropic ``text`` block."""
    return {"type": "text", "text": text}


def result_block(call_id: str, text: str, *, is_error: bool = False) -> dict[str, Any]:
    """An Anthropic ``tool_result`` block answering ``call_id``."""
    return {"type": "tool_result", "tool_use_id": call_id, "content": text, "is_error": is_error}


def tool_message(call_id: str, text: str, **extra: Any) -> dict[str, Any]:
    """An OpenAI tool message answering ``call_id`` (``extra``: ``role``, ``id``, ...)."""
    return {"role": "tool", "tool_call_id": call_id, "content": text, **extra}


def tool_call_messages(
    shape: Shape, call_id: str, tool: str, arguments: Mapping[str, Any], text: str, is_error: bool
) -> list[dict[str, Any]]:
    """An assistant message calling ``tool`` and the message with its result, in ``shape``."""
    if shape == "anthropic":
        use = {"type": "tool_use", "id": call_id, "name": tool, "input": dict(arguments)}
        return [
            {"role": "assistant", "content": [use]},
            {"role": "user", "content": [result_block(call_id, text, is_error=is_error)]},
        ]
    function = {"name": tool, "arguments": json.dumps(dict(arguments))}
    call = {"id": call_id, "type": "function", "function": function}
    return [
        {"role": "assistant", "content": None, "tool_calls": [call]},
        tool_message(call_id, f"Error: {text}" if is_error else text),
    ]
