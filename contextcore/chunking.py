"""Searchable text per item, and its split into chunks of about 500 characters."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from .items import ContextItem, Tool

__all__ = ["CHUNK_CHARS", "chunk_text", "item_chunks", "item_content"]

CHUNK_CHARS = 500
_PARAGRAPH = re.compile(r"\n\s*\n")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


def item_content(item: ContextItem) -> str:
    """The text an item is searched by.

    Rules and references: ``name: description\\n\\ntext`` (``name\\n\\ntext`` without a
    description). Tools: ``name: description`` plus one line per parameter.
    """
    if isinstance(item, Tool):
        return _tool_content(item)
    head = f"{item.name}: {item.description}" if item.description else item.name
    body = item.text.strip()
    return f"{head}\n\n{body}" if body else head


def _tool_content(tool: Tool) -> str:
    head = f"{tool.name}: {tool.description}" if tool.description else tool.name
    params = _schema_params(tool.input_schema)
    if not params:
        return head
    lines = [f"{name}: {desc}" if desc else name for name, desc in params]
    return head + "\n\nParameters: " + "; ".join(lines)


def _schema_params(schema: Mapping[str, Any]) -> list[tuple[str, str]]:
    props = schema.get("properties") if isinstance(schema, Mapping) else None
    if not isinstance(props, Mapping):
        return []
    out: list[tuple[str, str]] = []
    for name, spec in props.items():
        desc = spec.get("description", "") if isinstance(spec, Mapping) else ""
        out.append((str(name), str(desc or "").strip()))
    return out


def chunk_text(text: str, limit: int = CHUNK_CHARS) -> list[str]:
    """Split by paragraph, long paragraphs by sentence, and pack pieces up to ``limit`` chars."""
    pieces: list[str] = []
    for paragraph in _PARAGRAPH.split(text.strip()):
        paragraph = " ".join(paragraph.split())
        if not paragraph:
            continue
        if len(paragraph) <= limit:
            pieces.append(paragraph)
            continue
        for sentence in _SENTENCE_END.split(paragraph):
            pieces.extend(_hard_split(sentence, limit))
    return _pack(pieces, limit)


def _hard_split(sentence: str, limit: int) -> list[str]:
    """Cut a sentence longer than ``limit`` at word boundaries."""
    if len(sentence) <= limit:
        return [sentence]
    out: list[str] = []
    current = ""
    for word in sentence.split(" "):
        if len(word) > limit:
            # Cut by offsets: re-slicing the remainder would copy a long word again per cut.
            if current:
                out.append(current)
                current = ""
            cuts = [word[i : i + limit] for i in range(0, len(word), limit)]
            out.extend(cuts[:-1])
            word = cuts[-1]
        if current and len(current) + 1 + len(word) > limit:
            out.append(current)
            current = word
        else:
            current = f"{current} {word}" if current else word
    if current:
        out.append(current)
    return out


def _pack(pieces: list[str], limit: int) -> list[str]:
    chunks: list[str] = []
    current = ""
    for piece in pieces:
        if current and len(current) + 1 + len(piece) > limit:
            chunks.append(current)
            current = piece
        else:
            current = f"{current}\n{piece}" if current else piece
    if current:
        chunks.append(current)
    return chunks


def item_chunks(item: ContextItem, limit: int = CHUNK_CHARS) -> list[str]:
    """The chunks indexed for an item; chunks after the first carry the item's name as a title,
    so a passage deep in a document still says what it belongs to."""
    chunks = chunk_text(item_content(item), limit) or [item.name]
    return [chunks[0], *(f"{item.name}: {c}" for c in chunks[1:])]
