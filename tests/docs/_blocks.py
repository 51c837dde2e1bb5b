"""The fenced blocks and command lines of the documentation: README.md, CONTRIBUTING.md and
every page under docs/.

A block's marker is the HTML comment on the line before its fence (``<!-- fragment -->``,
``<!-- entry: cursor -->``), if any. In ``sh`` blocks every line is a command (``\\``
continues it); in ``console`` blocks only lines that start with ``$ `` are.
"""

from __future__ import annotations

import importlib.util
import re
import shlex
import sys
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
PAGES = (ROOT / "README.md", ROOT / "CONTRIBUTING.md", *sorted(DOCS.rglob("*.md")))
_FENCE = re.compile(r"^```(\w*)\s*$")
_MARKER = re.compile(r"^<!-- ([a-z]+)(?::\s*(.+?))? -->$")
BROKER = "context-broker"


@dataclass(frozen=True)
class Block:
    """One fenced block: where it is, its language, its text and the marker before it."""

    page: Path
    line: int
    lang: str
    text: str
    marker: str | None = None
    marker_value: str | None = None

    @property
    def where(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"


@dataclass(frozen=True)
class Command:
    """One command line of a ``sh`` or ``console`` block."""

    block: Block
    line: str
    tokens: tuple[str, ...] | None  # None: a line shlex cannot split (not a broker command)
    env: dict[str, str] = field(default_factory=dict)

    @property
    def broker_args(self) -> list[str] | None:
        """The arguments given to ``context-broker``: after the command itself or, when it is
        the argument of another program (MCP Inspector), up to that program's ``--``."""
        if self.tokens is None:
            return None
        for i, token in enumerate(self.tokens):
            if Path(token).name == BROKER:
                rest = list(self.tokens[i + 1 :])
                return rest[: rest.index("--")] if i > 0 and "--" in rest else rest
        return None


@cache
def blocks() -> tuple[Block, ...]:
    """Every fenced block of every page, in page order."""
    found: list[Block] = []
    for page in PAGES:
        lines = page.read_text(encoding="utf-8").splitlines()
        i = 0
        while i < len(lines):
            fence = _FENCE.match(lines[i])
            if fence is None:
                i += 1
                continue
            end = next(j for j in range(i + 1, len(lines)) if lines[j].startswith("```"))
            before = next((lines[j] for j in range(i - 1, -1, -1) if lines[j].strip()), "")
            marker = _MARKER.match(before.strip())
            found.append(
                Block(
                    page,
                    i + 1,
                    fence[1],
                    "\n".join(lines[i + 1 : end]),
                    marker[1] if marker else None,
                    marker[2] if marker else None,
                )
            )
            i = end + 1
    return tuple(found)


def of(*langs: str) -> list[Block]:
    return [b for b in blocks() if b.lang in langs]


def _lines(block: Block) -> list[str]:
    """The command lines of a block, continuations joined."""
    raw = block.text.splitlines()
    if block.lang == "console":
        raw = [line[2:] for line in raw if line.startswith("$ ")]
    joined: list[str] = []
    pending = ""
    for line in raw:
        if line.rstrip().endswith("\\"):
            pending += line.rstrip()[:-1] + " "
            continue
        joined.append(pending + line)
        pending = ""
    return [line for line in joined if line.strip() and not line.lstrip().startswith("#")]


def commands() -> list[Command]:
    """Every command line of every ``sh`` and ``console`` block."""
    found = []
    for block in of("sh", "console"):
        for line in _lines(block):
            try:
                tokens: list[str] | None = shlex.split(line, comments=True)
            except ValueError:
                tokens = None
            env: dict[str, str] = {}
            while tokens and re.match(r"^[A-Z_][A-Z0-9_]*=", tokens[0]):
                name, _, value = tokens.pop(0).partition("=")
                env[name] = value
            found.append(Command(block, line, tuple(tokens) if tokens is not None else None, env))
    return found


@cache
def hooks() -> ModuleType:
    """``docs/_hooks.py``, the MkDocs hook that writes the generated references."""
    spec = importlib.util.spec_from_file_location("docs_hooks", DOCS / "_hooks.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # as MkDocs loads it; its dataclasses look it up
    spec.loader.exec_module(module)
    return module
