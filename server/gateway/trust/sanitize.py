"""Downstream tool definitions made safe to show: hidden characters stripped from every key
and string at any depth, text clipped, known prompt-injection phrasing flagged.

Everything here runs in time linear in its input: one regex pass removes ANSI escape
sequences, one removes invisible and control characters (Unicode categories Cc and Cf,
Unicode tag characters, variation selectors of the supplement block), and the injection
patterns have no nested quantifiers and only bounded gaps, run on clipped text.
"""

from __future__ import annotations

import functools
import re
import sys
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, TypeVar

import mcp_types as types
from pydantic import BaseModel, ValidationError

__all__ = [
    "CleanDefinition",
    "CleanText",
    "CleanTool",
    "Finding",
    "clean_definition",
    "clean_shown",
    "clean_text",
    "clean_tool",
    "scan",
]

ELLIPSIS = "…"
_KEEP = frozenset("\n\t")
_PLANES = (*range(0x0, 0x20000), *range(0xE0000, 0xF0000))
# CSI (ESC [ ... final), OSC (ESC ] ... BEL or ST, stops at the next ESC), two-byte escapes.
_ANSI = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)?|[@-Z\\-_])")

# Each pattern: a name reported to users and a regex with bounded gaps only (linear time).
_PATTERNS: tuple[tuple[str, str], ...] = (
    (
        "instruction tag",
        r"<\s*/?\s*(?:important|system|instructions?|secret|hidden|admin|system_prompt)\s*>",
    ),
    (
        "override of previous instructions",
        r"\b(?:ignore|disregard|forget|override)\s+(?:all\s+|any\s+)?(?:of\s+)?(?:the\s+|your\s+)?"
        r"(?:previous|prior|above|earlier|preceding|original)\s+"
        r"(?:instructions?|prompts?|rules|directions|guidelines|messages?)",
    ),
    (
        "concealment from the user",
        r"\b(?:do\s+not|don't|dont|never|without)\s+(?:tell|telling|inform|informing|mention|"
        r"mentioning|reveal|revealing|notify|notifying|alert|alerting|show|showing)\s+"
        r"(?:this\s+(?:to\s+)?|it\s+(?:to\s+)?|anything\s+(?:to\s+)?)?the\s+user",
    ),
    (
        "sensitive file",
        r"~/\.ssh|\.ssh/|\bid_rsa\b|\bid_ed25519\b|\.aws/credentials|/etc/passwd|/etc/shadow|"
        r"\.netrc\b|\.git-credentials|\.cursor/mcp\.json|claude_desktop_config\.json",
    ),
    (
        "data exfiltration",
        r"\b(?:send|upload|post|forward|transmit|exfiltrate|leak|copy)\b[^.\n]{0,80}?"
        r"\b(?:private\s+keys?|ssh\s+keys?|credentials|api[\s_-]?keys?|passwords?|"
        r"access\s+tokens?|secrets?)\b",
    ),
    (
        "precondition on other actions",
        r"\bbefore\s+(?:using|calling|invoking|running)\s+(?:this|any|the)\s+tool\b[^.\n]{0,80}?"
        r"\b(?:read|open|call|run|fetch|pass|include|send)\b",
    ),
    ("new instructions", r"\bnew\s+instructions?\s*:|\byou\s+are\s+now\s+(?:a|an|in)\b"),
    ("model control token", r"<\|[a-z_]{2,20}\|>|\[/?inst\]|\[/?system\]"),
    ("hidden marker", r"<!--"),
    (
        # A line written as the request-context text's own headings: its sections, a rule's
        # "### 010 name" or a tool's "### name (server ...". The text writes every downstream
        # name and description on one line, so such a line never stands there; the
        # definition still tried.
        "markup of the broker's context text",
        r"(?:^|\n)[ \t]{0,3}#{1,6}[ \t]{1,4}(?:rules\b|references\b|tools\b|context for\b|"
        r"more tools\b|not included\b|warnings\b|every other tool\b|given earlier\b|"
        r"\d{3}[ \t]|[^\s(]{1,80}[ \t]\(server[ \t])",
    ),
)
_Model = TypeVar("_Model", bound=BaseModel)
_SCANNERS = tuple((name, re.compile(rx)) for name, rx in _PATTERNS)


@dataclass(frozen=True)
class Finding:
    """One reason a definition looks like an injection attempt."""

    kind: str
    detail: str

    def __str__(self) -> str:
        return f"{self.kind}: {self.detail}"


@dataclass(frozen=True)
class CleanText:
    """A text with hidden characters removed and clipped to a length."""

    text: str
    removed: frozenset[str]  # readable names of what was removed
    clipped_from: int | None  # original length (after stripping) when clipped


@dataclass(frozen=True)
class CleanTool:
    """A downstream tool as it may be shown: the cleaned definition and what was found."""

    tool: types.Tool
    findings: tuple[Finding, ...]
    clipped: bool
    hold_reason: str | None = None  # why it must be held whatever the trust mode
    checked: bool = True  # False: too deep to read, held even if approved


@functools.cache
def _hidden_class() -> re.Pattern[str]:
    """Every code point of categories Cc and Cf (but newline and tab), Unicode tags and the
    supplementary variation selectors, as one character class; built once per process.

    Only planes 0, 1 and 14 hold such characters (planes 2-3 are ideographs, 15-16 private
    use, the rest unassigned), so only those are walked: ~0.1 s instead of ~1 s."""
    starts: list[tuple[int, int]] = []
    for cp in _PLANES:
        char = chr(cp)
        hidden = (
            (unicodedata.category(char) in ("Cc", "Cf") and char not in _KEEP)
            or 0xE0000 <= cp <= 0xE007F
            or 0xE0100 <= cp <= 0xE01EF
        )
        if not hidden:
            continue
        if starts and starts[-1][1] == cp - 1:
            starts[-1] = (starts[-1][0], cp)
        else:
            starts.append((cp, cp))
    ranges = "".join(
        re.escape(chr(a)) if a == b else f"{re.escape(chr(a))}-{re.escape(chr(b))}"
        for a, b in starts
    )
    return re.compile(f"[{ranges}]")


def _char_name(char: str) -> str:
    name = unicodedata.name(char, "")
    return f"U+{ord(char):04X}" + (f" {name}" if name else "")


def clean_text(text: str, max_chars: int) -> CleanText:
    """``text`` without ANSI escapes and invisible or control characters, clipped to
    ``max_chars`` (the last kept character replaced by "…")."""
    removed: set[str] = set()
    without_ansi = _ANSI.sub("", text)
    if len(without_ansi) != len(text):
        removed.add("ANSI escape sequence")
    hidden = _hidden_class()
    found = set(hidden.findall(without_ansi))
    stripped = hidden.sub("", without_ansi) if found else without_ansi
    removed.update(_char_name(c) for c in sorted(found)[:8])
    if len(stripped) <= max_chars:
        return CleanText(stripped, frozenset(removed), None)
    return CleanText(stripped[: max_chars - 1] + ELLIPSIS, frozenset(removed), len(stripped))


def scan(texts: Iterable[str]) -> list[Finding]:
    """Known injection phrasing in already cleaned and clipped ``texts``."""
    findings: dict[str, Finding] = {}
    for text in texts:
        folded = unicodedata.normalize("NFKC", text).casefold()
        for name, pattern in _SCANNERS:
            if name in findings:
                continue
            match = pattern.search(folded)
            if match is not None:
                findings[name] = Finding(name, repr(match.group(0)[:60]))
    return list(findings.values())


def clean_tool(tool: types.Tool, max_chars: int) -> CleanTool:
    """``tool`` with every key and every string of its definition, at any depth, cleaned and
    clipped; flagged for hidden characters and injection phrasing found anywhere in it.

    The name stays as the downstream wrote it (calls and pins need it): a name with hidden
    characters is reported in ``hold_reason`` instead, as is a definition that is no longer a
    valid tool once cleaned."""
    walk = _Cleaner(max_chars)
    try:
        raw = tool.model_dump(by_alias=True, mode="json", exclude_none=True)
    except (ValueError, RecursionError):  # nested deeper than it can be serialized
        return _unchecked(tool)
    cleaned = walk.tree(raw)
    findings = scan(walk.texts)
    if walk.removed:
        findings.insert(0, Finding("hidden characters", ", ".join(sorted(walk.removed))))
    hold_reason = None
    if cleaned.get("name") != tool.name:
        hold_reason = (
            "its name contains hidden or control characters "
            f"({ascii(tool.name)[:120]}), so it cannot be shown as it is"
        )
        findings.insert(0, Finding("hidden characters in the tool name", ascii(tool.name)[:120]))
    if walk.collided:
        findings.append(Finding("keys that differ only in hidden characters", walk.collided[0]))
    cleaned["name"] = tool.name
    try:
        shown = types.Tool.model_validate(cleaned)
    except ValidationError as exc:
        hold_reason = hold_reason or (
            f"its definition is not a valid tool once cleaned ({exc.error_count()} errors)"
        )
        shown = tool
    return CleanTool(shown, tuple(findings), walk.clipped, hold_reason)


@dataclass(frozen=True)
class CleanDefinition:
    """A downstream prompt, resource or resource template as it may be shown: cleaned as a
    tool's definition is (:func:`clean_tool`), with what was found."""

    definition: Any  # the same pydantic model type as given
    findings: tuple[Finding, ...]
    hold_reason: str | None = None  # why it must be held whatever the trust mode


def clean_definition(definition: Any, key: str, max_chars: int) -> CleanDefinition:
    """A prompt, resource or resource template (a pydantic model) with every key and string
    cleaned and clipped as :func:`clean_tool` does, flagged the same way. Its ``key`` field
    (a prompt's name, a resource's URI, a template's URI template) is how it is asked for,
    so it stays as written: hidden characters there are a ``hold_reason``, as is a
    definition no longer valid once cleaned."""
    walk = _Cleaner(max_chars)
    try:
        raw = definition.model_dump(by_alias=True, mode="json", exclude_none=True)
    except (ValueError, RecursionError):
        reason = "its definition is nested too deeply to be checked"
        return CleanDefinition(definition, (Finding("unchecked", reason),), reason)
    written = raw.get(key)
    cleaned = walk.tree(raw)
    findings = scan(walk.texts)
    if walk.removed:
        findings.insert(0, Finding("hidden characters", ", ".join(sorted(walk.removed))))
    hold_reason = None
    if cleaned.get(key) != written:
        hold_reason = f"its {key} contains hidden or control characters ({ascii(written)[:120]})"
    cleaned[key] = written
    try:
        shown = type(definition).model_validate(cleaned)
    except ValidationError as exc:
        hold_reason = hold_reason or (
            f"its definition is not valid once cleaned ({exc.error_count()} errors)"
        )
        shown = definition
    return CleanDefinition(shown, tuple(findings), hold_reason)


def clean_shown(result: _Model) -> tuple[_Model, frozenset[str]]:
    """What a downstream returns for a host to show (a rendered prompt's messages), every
    string at any depth cleaned as a definition's are but never clipped (it is content, not
    a description), and the names of what was removed. A result that cannot be read whole
    or is no longer valid once cleaned comes back as it is, with nothing removed."""
    walk = _Cleaner(sys.maxsize)
    try:
        raw = result.model_dump(by_alias=True, mode="json", exclude_none=True)
        cleaned = walk.tree(raw)
        return type(result).model_validate(cleaned, by_name=False), frozenset(walk.removed)
    except (ValueError, RecursionError):  # too deep to read, or invalid once cleaned
        return result, frozenset()


def _unchecked(tool: types.Tool) -> CleanTool:
    """A definition too deep to read whole: nothing of it is shown, and it is held."""
    reason = "its definition is nested too deeply to be checked; it cannot be approved"
    stub = types.Tool(name=tool.name, input_schema={"type": "object"})
    return CleanTool(stub, (Finding("unchecked", reason),), False, reason, checked=False)


class _Cleaner:
    """Cleans every key and string of a JSON tree without recursion (no depth limit to
    stop at), collecting what it removed and the cleaned texts to scan."""

    def __init__(self, max_chars: int) -> None:
        self.max_chars = max_chars
        self.removed: set[str] = set()
        self.texts: list[str] = []
        self.clipped = False
        self.collided: list[str] = []

    def text(self, value: str) -> str:
        result = clean_text(value, self.max_chars)
        self.removed.update(result.removed)
        self.clipped = self.clipped or result.clipped_from is not None
        self.texts.append(result.text)
        return result.text

    def tree(self, root: dict[str, Any]) -> dict[str, Any]:
        """A cleaned copy of ``root``; containers are filled from an explicit stack."""
        out: dict[str, Any] = {}
        stack: list[tuple[Any, Any]] = [(root, out)]
        while stack:
            source, target = stack.pop()
            pairs = source.items() if isinstance(source, dict) else enumerate(source)
            for key, value in pairs:
                if isinstance(value, dict | list):
                    child: Any = {} if isinstance(value, dict) else []
                    stack.append((value, child))
                else:
                    child = self.text(value) if isinstance(value, str) else value
                if isinstance(target, list):
                    target.append(child)
                    continue
                name = self.text(str(key))
                if name in target:
                    self.collided.append(repr(name[:60]))
                target[name] = child
        return out
