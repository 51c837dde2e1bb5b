"""JSONC host files, as VS Code and Gemini CLI read them: JSON with ``//`` and ``/* */``
comments and trailing commas.

They are read with ``json5`` (a superset) and changed by editing the text in place, so the
user's comments, other settings and layout stay as they were. An edit this module cannot make
in place (a layout it does not follow, or one whose result would not read back as intended)
gives ``None``, and the caller rewrites the whole file instead.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

import json5

__all__ = ["comments", "loads", "set_entry", "set_member"]

_TOKEN = re.compile(
    r'(?P<space>\s+)|(?P<comment>//[^\n]*|/\*.*?\*/)|(?P<string>"(?:[^"\\\n]|\\.)*")'
    r"|(?P<punct>[{}\[\]:,])|(?P<atom>[-+.\w]+)",
    re.DOTALL,
)
_JSON5_ERROR = re.compile(r"^<string>:(\d+) (.*) at column (\d+)$")
_INDENTED = re.compile(r"^([ \t]+)\S", re.MULTILINE)


def loads(text: str) -> Any:
    """The value of a JSONC text, an empty object for a text of only comments (a host file
    with nothing set yet); ValueError says where it stops being one (``line L, column C:
    what``)."""
    scanned = _scan(text)
    if scanned is not None and not scanned[0]:
        return {}
    try:
        return json5.loads(text)
    except ValueError as exc:
        found = _JSON5_ERROR.match(str(exc))
        if found is None:
            raise ValueError(str(exc)) from None
        line, what, column = found.groups()
        raise ValueError(f"line {line}, column {column}: {what}") from None


@dataclass(frozen=True)
class _Token:
    kind: str
    start: int
    end: int
    text: str


@dataclass(frozen=True)
class _Member:
    """One ``"key": value`` of an object, by token index."""

    key: str
    key_at: int
    value_at: int
    end: int  # one past the value's last token
    comma: bool  # a comma follows it


def _scan(text: str) -> tuple[list[_Token], int] | None:
    """The tokens (no spaces, no comments) and the number of comments; None when the text
    uses what this module does not follow (single quotes, unquoted keys)."""
    tokens: list[_Token] = []
    comments = 0
    pos = 0
    while pos < len(text):
        found = _TOKEN.match(text, pos)
        if found is None:
            return None
        kind = found.lastgroup or ""
        if kind == "comment":
            comments += 1
        elif kind != "space":
            tokens.append(_Token(kind, found.start(), found.end(), found.group()))
        pos = found.end()
    return tokens, comments


def comments(text: str) -> int | None:
    """How many comments the text has; None when this module cannot follow it."""
    scanned = _scan(text)
    return None if scanned is None else scanned[1]


def _skip_value(tokens: list[_Token], at: int) -> int:
    """The index one past the value that starts at ``tokens[at]``."""
    if tokens[at].text not in ("{", "["):
        return at + 1
    depth = 0
    for i in range(at, len(tokens)):
        if tokens[i].text in ("{", "["):
            depth += 1
        elif tokens[i].text in ("}", "]"):
            depth -= 1
            if depth == 0:
                return i + 1
    raise ValueError("unbalanced brackets")


def _members(tokens: list[_Token], open_at: int) -> tuple[list[_Member], int]:
    """The members of the object whose ``{`` is ``tokens[open_at]``, and its ``}``'s index."""
    members: list[_Member] = []
    i = open_at + 1
    while tokens[i].text != "}":
        if tokens[i].kind != "string" or tokens[i + 1].text != ":":
            raise ValueError("not a member")
        end = _skip_value(tokens, i + 2)
        comma = tokens[end].text == ","
        members.append(_Member(json.loads(tokens[i].text), i, i + 2, end, comma))
        i = end + 1 if comma else end
    return members, i


def _line_indent(text: str, pos: int) -> tuple[str, bool]:
    """The indentation of the line holding ``pos``, and whether ``pos`` starts that line's
    content."""
    line = text[text.rfind("\n", 0, pos) + 1 : pos]
    indent = line[: len(line) - len(line.lstrip())]
    return indent, indent == line


def _render(value: Any, indent: str, unit: str) -> str:
    return json.dumps(value, indent=unit, ensure_ascii=False).replace("\n", "\n" + indent)


def _insert(text: str, tokens: list[_Token], open_at: int, key: str, value: Any, unit: str) -> str:
    """``text`` with ``"key": value`` added as the last member of the object at ``open_at``,
    indented as its other members are."""
    members, close_at = _members(tokens, open_at)
    outer, _ = _line_indent(text, tokens[open_at].start)
    indent, own_line = (
        _line_indent(text, tokens[members[0].key_at].start) if members else ("", False)
    )
    indent = indent if own_line else outer + unit
    last = members[-1] if members else None
    trailing = "," if last is not None and last.comma else ""
    member = f"{json.dumps(key, ensure_ascii=False)}: {_render(value, indent, unit)}{trailing}"
    close = tokens[close_at].start
    _, close_alone = _line_indent(text, close)
    if close_alone:  # before the line of the closing brace, after any comment above it
        at = text.rfind("\n", 0, close) + 1
        text = f"{text[:at]}{indent}{member}\n{text[at:]}"
    else:
        text = f"{text[:close]}\n{indent}{member}\n{outer}{text[close:]}"
    if last is not None and not last.comma:
        at = tokens[last.end - 1].end
        text = f"{text[:at]},{text[at:]}"
    return text


def _unit(text: str) -> str:
    """The file's indentation step (two spaces when it has none yet)."""
    indented = _INDENTED.search(text)
    unit = indented[1] if indented else "  "
    return "\t" if unit.startswith("\t") else unit


def _replace_value(text: str, tokens: list[_Token], member: _Member, value: Any, unit: str) -> str:
    indent, _ = _line_indent(text, tokens[member.key_at].start)
    start, end = tokens[member.value_at].start, tokens[member.end - 1].end
    return text[:start] + _render(value, indent, unit) + text[end:]


def _edit(text: str, tokens: list[_Token], key: str, name: str, entry: Any) -> str | None:
    if not tokens:  # only comments: the object goes after them
        return f"{text.rstrip()}\n{_render({key: {name: entry}}, '', '  ')}\n"
    if tokens[0].text != "{":
        return None
    unit = _unit(text)
    top, _ = _members(tokens, 0)
    servers = next((m for m in reversed(top) if m.key == key), None)
    if servers is None:
        return _insert(text, tokens, 0, key, {name: entry}, unit)
    if tokens[servers.value_at].text != "{":
        return None
    inner, _ = _members(tokens, servers.value_at)
    found = next((m for m in reversed(inner) if m.key == name), None)
    if found is None:
        return _insert(text, tokens, servers.value_at, name, entry, unit)
    return _replace_value(text, tokens, found, entry, unit)


def _edit_member(text: str, tokens: list[_Token], key: str, value: Any) -> str | None:
    if not tokens:
        return f"{text.rstrip()}\n{_render({key: value}, '', '  ')}\n"
    if tokens[0].text != "{":
        return None
    unit = _unit(text)
    top, _ = _members(tokens, 0)
    found = next((m for m in reversed(top) if m.key == key), None)
    if found is None:
        return _insert(text, tokens, 0, key, value, unit)
    return _replace_value(text, tokens, found, value, unit)


def set_entry(text: str, key: str, name: str, entry: Any, expected: Any) -> str | None:
    """``text`` with ``entry`` as ``[key][name]`` of its top object, by an edit in place that
    keeps every comment and other member; ``expected`` is the whole value the result must
    read back as. None when the edit cannot be made in place."""
    scanned = _scan(text)
    if scanned is None:
        return None
    try:
        edited = _edit(text, scanned[0], key, name, entry)
        if edited is not None and json5.loads(edited) == expected:
            return edited
    except (IndexError, ValueError):  # a layout this module does not follow
        pass
    return None


def set_member(text: str, key: str, value: Any, expected: Any) -> str | None:
    """``text`` with ``value`` as the whole member ``key`` of its top object (comments inside
    the old value go with it; every other comment and member stays), edited in place;
    ``expected`` is the whole value the result must read back as. None when the edit cannot
    be made in place."""
    scanned = _scan(text)
    if scanned is None:
        return None
    try:
        edited = _edit_member(text, scanned[0], key, value)
        if edited is not None and json5.loads(edited) == expected:
            return edited
    except (IndexError, ValueError):
        pass
    return None
