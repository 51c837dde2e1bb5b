"""Recognising what a tool call does from its name and arguments (file reads, writes, ...)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Literal, TypeAlias

from .messages import ToolCall

__all__ = ["CONTENT_KEYS", "EDIT_KEYS", "ToolKind", "file_path", "tool_kind"]

ToolKind: TypeAlias = Literal["read", "write", "edit", "list", "run", "screenshot", "ui", "other"]

PATH_KEYS = (
    "path",
    "file_path",
    "filepath",
    "filePath",
    "filename",
    "file",
    "target_file",
    "absolute_path",
    "relative_path",
)
CONTENT_KEYS = ("content", "contents", "file_text", "text", "new_content", "data")
EDIT_KEYS = ("old_string", "new_string", "old_str", "new_str", "diff", "patch", "insert_text")
_EDITOR_COMMANDS: Mapping[str, ToolKind] = {
    "view": "read",
    "create": "write",
    "str_replace": "edit",
    "insert": "edit",
}
_WORDS: tuple[tuple[ToolKind, frozenset[str]], ...] = (
    ("screenshot", frozenset({"screenshot", "screen", "capture"})),
    ("ui", frozenset({"snapshot", "accessibility", "a11y", "dom", "elements", "ui", "page"})),
    ("edit", frozenset({"edit", "replace", "patch", "multiedit", "insert"})),
    ("write", frozenset({"write", "create", "save", "put"})),
    ("read", frozenset({"read", "view", "cat", "open", "get", "head", "tail"})),
    ("list", frozenset({"list", "ls", "glob", "find", "search", "grep", "tree", "directory"})),
    ("run", frozenset({"run", "exec", "execute", "bash", "shell", "command", "terminal"})),
)


def tool_kind(call: ToolCall) -> ToolKind:
    """Classify a call: file read / write / edit, listing, running, screenshots, UI dumps."""
    name = call.name.lower().rsplit("__", 1)[-1]
    command = call.arguments.get("command")
    if ("editor" in name or "edit_tool" in name) and command in _EDITOR_COMMANDS:
        return _EDITOR_COMMANDS[str(command)]
    words = set(re.split(r"[^a-z0-9]+", re.sub(r"([a-z])([A-Z])", r"\1_\2", call.name).lower()))
    for kind, vocabulary in _WORDS:
        if words & vocabulary:
            return kind
    return "other"


def file_path(arguments: Mapping[str, Any]) -> str | None:
    """The file path named in a call's arguments, if any."""
    for key in PATH_KEYS:
        value = arguments.get(key)
        if isinstance(value, str) and value:
            return value
    return None
