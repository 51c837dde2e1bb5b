"""Copy-on-write edits of a message's wire dict: its texts, tool results and call arguments."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from ._read import ToolCall

__all__ = ["TRUNCATED", "cut", "map_args", "map_texts", "replace_result"]

TRUNCATED = "[truncated]"

# (text, call id of the result it belongs to or None) -> new text
TextFn = Callable[[str, "str | None"], str]
# tool call -> new arguments, or None to keep them
ArgsFn = Callable[[ToolCall], "Mapping[str, Any] | None"]


def cut(text: str, keep: int) -> str:
    """``text`` cut to ``keep`` characters with a ``...[truncated]`` mark (unchanged if short)."""
    return text if len(text) <= keep else f"{text[:keep]}...{TRUNCATED}"


def map_texts(raw: Mapping[str, Any], fn: TextFn) -> Mapping[str, Any]:
    """Apply ``fn`` to every text piece; return ``raw`` itself when nothing changed."""
    result_id = raw.get("tool_call_id") if raw.get("role") == "tool" else None
    content = raw.get("content")
    new = _map_content(content, fn, str(result_id) if result_id is not None else None)
    return raw if new is content else {**raw, "content": new}


def _map_content(content: Any, fn: TextFn, result_id: str | None) -> Any:
    if isinstance(content, str):
        new_text = fn(content, result_id)
        return content if new_text == content else new_text
    if not isinstance(content, list):
        return content
    blocks = [_map_block(block, fn, result_id) for block in content]
    if all(new is old for new, old in zip(blocks, content, strict=True)):
        return content
    return blocks


def _map_block(block: Any, fn: TextFn, result_id: str | None) -> Any:
    if not isinstance(block, Mapping):
        return block
    if block.get("type") == "tool_result":
        inner = block.get("content")
        new = _map_content(inner, fn, str(block.get("tool_use_id")))
        return block if new is inner else {**block, "content": new}
    text = block.get("text")
    if isinstance(text, str):
        new_text = fn(text, result_id)
        return block if new_text == text else {**block, "text": new_text}
    return block


def replace_result(raw: Mapping[str, Any], call_id: str, text: str) -> Mapping[str, Any]:
    """Replace the whole content of the result for ``call_id`` with ``text``."""
    if raw.get("role") == "tool":
        return {**raw, "content": text} if raw.get("tool_call_id") == call_id else raw
    content = raw.get("content")
    if not isinstance(content, list):
        return raw
    blocks = [
        {**block, "content": text}
        if isinstance(block, Mapping)
        and block.get("type") == "tool_result"
        and block.get("tool_use_id") == call_id
        else block
        for block in content
    ]
    return {**raw, "content": blocks}


def map_args(raw: Mapping[str, Any], calls: tuple[ToolCall, ...], fn: ArgsFn) -> Mapping[str, Any]:
    """Apply ``fn`` to each tool call's arguments; return ``raw`` when nothing changed."""
    replaced = {call.id: new for call in calls if (new := fn(call)) is not None}
    if not replaced:
        return raw
    updated = dict(raw)
    if isinstance(raw.get("tool_calls"), list):
        updated["tool_calls"] = [_openai_call(call, replaced) for call in raw["tool_calls"]]
    if isinstance(raw.get("content"), list):
        updated["content"] = [
            {**block, "input": dict(replaced[block["id"]])}
            if isinstance(block, Mapping)
            and block.get("type") == "tool_use"
            and block.get("id") in replaced
            else block
            for block in raw["content"]
        ]
    return updated


def _openai_call(call: Mapping[str, Any], replaced: Mapping[str, Mapping[str, Any]]) -> Any:
    new = replaced.get(call["id"])
    if new is None:
        return call
    function = call["function"]
    arguments: Any = dict(new)
    if not isinstance(function.get("arguments"), Mapping):
        arguments = json.dumps(new, ensure_ascii=False)
    return {**call, "function": {**function, "arguments": arguments}}
