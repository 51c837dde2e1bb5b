"""Editing a host's TOML config (Codex's ``config.toml``) without disturbing the rest: the
servers' tables are added or replaced table by table, comments and other settings left where
they are; tomlkit renders a table and handles layouts with inline tables."""

from __future__ import annotations

import re
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import tomlkit
from tomlkit.exceptions import TOMLKitError

__all__ = ["edited_text", "toml_table"]


_TOML_HEADER = re.compile(r"^[ \t]*\[\[?([^\[\]\n]+)\]\]?[ \t]*(?:#[^\n]*)?$", re.MULTILINE)


def _toml_inline(value: Any) -> Any:
    if isinstance(value, dict):
        table = tomlkit.inline_table()
        table.update({k: _toml_inline(v) for k, v in value.items()})
        return table
    return value


def _toml_entry(entry: Mapping[str, Any]) -> Any:
    """A server's table, with ``env`` and other objects as inline tables."""
    table = tomlkit.table()
    for field, value in entry.items():
        table[field] = _toml_inline(value)
    return table


def toml_table(key: str, name: str, entry: Mapping[str, Any]) -> str:
    """``[key.name]`` and its values, as TOML text."""
    document = tomlkit.document()
    servers = tomlkit.table(is_super_table=True)
    servers[name] = _toml_entry(entry)
    document[key] = servers
    return document.as_string()


@dataclass(frozen=True)
class _Section:
    """One table of a TOML text: its key path and where it starts and ends."""

    path: tuple[str, ...]
    start: int  # the comment lines directly above its header
    header: int
    end: int


def _toml_path(raw: str) -> tuple[str, ...]:
    value: Any = tomllib.loads(f"{raw} = 0")
    path: list[str] = []
    while isinstance(value, dict):
        [(name, value)] = value.items()
        path.append(name)
    return tuple(path)


def _comments_above(text: str, pos: int) -> int:
    """Where the comment lines directly above the line at ``pos`` start."""
    while pos > 0:
        above = text.rfind("\n", 0, pos - 1) + 1
        if not text[above:pos].lstrip().startswith("#"):
            break
        pos = above
    return pos


def _sections(text: str) -> list[_Section]:
    heads = [(m.start(), _toml_path(m[1])) for m in _TOML_HEADER.finditer(text)]
    starts = [_comments_above(text, pos) for pos, _ in heads]
    ends = [*starts[1:], len(text)]
    return [_Section(p, s, h, e) for (h, p), s, e in zip(heads, starts, ends, strict=True)]


def _toml_by_tables(text: str, key: str, servers: dict[str, Any]) -> str:
    """``text`` with its ``[key.NAME]`` tables set to ``servers``: a changed table replaced
    where it is, a removed one taken out with the comments directly above it, a new one
    added at the end; the rest of the text untouched."""
    old = tomllib.loads(text).get(key, {})
    sections = _sections(text)
    edits: list[tuple[int, int, str]] = []
    for name, value in old.items():
        if servers.get(name) == value:
            continue
        own = [s for s in sections if s.path[:2] == (key, name)]
        if not own:
            raise ValueError(f"{name!r} is not in tables of its own")
        if name in servers:  # its first table replaced in place, its other tables taken out
            first, own = own[0], own[1:]
            old_text = text[first.header : first.end]
            gap = old_text[len(old_text.rstrip()) :] or "\n"
            new = toml_table(key, name, servers[name]).rstrip("\n") + gap
            edits.append((first.header, first.end, new))
        edits += [(s.start, s.end, "") for s in own]
    for start, end, new in sorted(edits, reverse=True):
        text = text[:start] + new + text[end:]
    added = [toml_table(key, n, e) for n, e in servers.items() if n not in old]
    if added:
        text = (text.rstrip("\n") + "\n\n" if text.strip() else "") + "\n".join(added)
    return text


def _toml_by_document(text: str, key: str, servers: dict[str, Any]) -> str:
    """``_toml_by_tables`` through tomlkit's document, for layouts it does not follow
    (servers as inline tables or dotted keys)."""
    document = tomlkit.parse(text)
    if key not in document:
        document[key] = tomlkit.table(is_super_table=True)
    table: Any = document[key]
    for name in [n for n in table if n not in servers]:
        del table[name]
    for name, entry in servers.items():
        if name not in table or table[name].unwrap() != entry:
            table[name] = _toml_entry(entry)
    return document.as_string()


def edited_text(
    text: str, key: str, servers: dict[str, Any], expected: dict[str, Any]
) -> str | None:
    """``text`` (a TOML file) with the table ``key`` holding ``servers``, every other part as
    it was; None when no edit reads back as ``expected``."""
    edits: tuple[Callable[[str, str, dict[str, Any]], str], ...] = (
        _toml_by_tables,
        _toml_by_document,
    )
    for edit in edits:
        try:
            edited = edit(text, key, servers)
            if tomllib.loads(edited) == expected:
                return edited
        except (ValueError, TOMLKitError):  # a layout this edit does not follow
            continue
    return None
