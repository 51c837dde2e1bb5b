"""``fileContentsLimiter``: full contents only for the newest versions of recent files.

A version is a read call's result or a write/edit call's content argument, for a call that
names a file path. The ``filesLimit`` most recently seen files keep their newest
``versionsPerFile`` versions; every other version becomes a short placeholder naming the file.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .._options import OPTIONS_CONFIG, Count
from .._tools import CONTENT_KEYS, EDIT_KEYS, file_path, tool_kind
from ..messages import Message, ToolCall, make_message, map_args, replace_result
from .base import FilterDefinition, FilterRun

__all__ = ["FILE_CONTENTS_LIMITER", "FileContentsOptions", "limit_file_contents"]


@dataclass(frozen=True)
class FileContentsOptions:
    """Options of ``fileContentsLimiter``."""

    __pydantic_config__ = OPTIONS_CONFIG

    files_limit: Count = 7
    versions_per_file: Count = 2


@dataclass(frozen=True)
class _Version:
    position: int
    call_id: str
    path: str
    in_result: bool


def limit_file_contents(
    messages: Sequence[Message], options: FileContentsOptions, run: FilterRun
) -> list[Message]:
    """Replace old file versions by placeholders (see the module docstring)."""
    versions = _versions(messages)
    stale = _stale(versions, options)
    by_position: dict[int, list[_Version]] = {}
    for version in stale:
        by_position.setdefault(version.position, []).append(version)
    out = list(messages)
    for position, items in by_position.items():
        raw = _replace(messages[position], items)
        if raw is not messages[position].raw:
            run.tally.truncate(messages[position].id)
            out[position] = make_message(raw)
    return out


def _versions(messages: Sequence[Message]) -> list[_Version]:
    reads: dict[str, str] = {}
    versions: list[_Version] = []
    for position, message in enumerate(messages):
        for call in message.calls:
            kind, path = tool_kind(call), file_path(call.arguments)
            if path is None:
                continue
            if kind == "read":
                reads[call.id] = path
            elif kind in ("write", "edit"):
                versions.append(_Version(position, call.id, path, in_result=False))
        for result in message.results:
            if result.call_id in reads:
                versions.append(_Version(position, result.call_id, reads[result.call_id], True))
    return versions


def _stale(versions: Sequence[_Version], options: FileContentsOptions) -> list[_Version]:
    per_file: dict[str, list[_Version]] = {}
    for version in versions:
        per_file.setdefault(version.path, []).append(version)
    recent = sorted(per_file, key=lambda path: per_file[path][-1].position, reverse=True)
    keep_files = set(recent[: options.files_limit])
    stale: list[_Version] = []
    for path, items in per_file.items():
        keep = options.versions_per_file if path in keep_files else 0
        stale += items[: max(0, len(items) - keep)]
    return stale


def _replace(message: Message, versions: Sequence[_Version]) -> Mapping[str, Any]:
    raw = message.raw
    for version in versions:
        note = f"[older version of {version.path} omitted; read the file again if needed]"
        if version.in_result:
            raw = replace_result(raw, version.call_id, note)
        else:
            raw = map_args(raw, message.calls, _blanker(version, note))
    return raw


def _blanker(version: _Version, note: str) -> Callable[[ToolCall], Mapping[str, Any] | None]:
    def blank(call: ToolCall) -> Mapping[str, Any] | None:
        if call.id != version.call_id:
            return None
        keys = [
            k
            for k in (*CONTENT_KEYS, *EDIT_KEYS)
            if isinstance(call.arguments.get(k), str) and len(call.arguments[k]) > len(note)
        ]
        if not keys:
            return None
        return {**call.arguments, **{key: note for key in keys}}

    return blank


FILE_CONTENTS_LIMITER: FilterDefinition[FileContentsOptions] = FilterDefinition(
    "fileContentsLimiter",
    FileContentsOptions,
    limit_file_contents,
    "keep full contents only for the newest versions of the most recent files",
)
