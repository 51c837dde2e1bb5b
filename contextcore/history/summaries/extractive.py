"""A summarizer that needs no LLM: it keeps the lines that matter, verbatim.

Lines (and sentences) showing errors, decisions, file paths, identifiers or numbers are kept
word for word, tool calls are noted with their name and path, and each user request keeps
at least its opening. The previous summary's lines are folded in as the oldest material.
When everything does not fit the cap, the highest-scoring lines win (newer first on ties)
and are printed in their original order.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..messages import make_message, text_parts
from ..tokens import Tokenizer, chars_per_4
from .policy import SummarizerChain, clip_to_tokens

__all__ = ["EXTRACTIVE", "ExtractiveSummarizer", "extractive_chain"]

EXTRACTIVE = "extractive"
"""The extractive summarizer's name in a summarizer chain."""

_ERROR = re.compile(r"\b(error|exception|traceback|failed|failure|fatal|denied)\b", re.I)
_DECISION = re.compile(
    r"\b(decided|decide|decision|chose|choose|agreed|will use|we'll|let's|should|must|plan)\b", re.I
)
# Every pattern runs in time linear in its input: none has a quantified part that can be
# retried from many start positions over the same long run of characters. ``_PATH`` only
# needs to know whether a path is present: a slash between path characters, or a word
# (dashes allowed) ending in a known extension.
_PATH = re.compile(r"[\w.-]/[\w.-]|\w-*+\.(?:py|ts|js|md|json|toml|ya?ml|txt|rs|go)\b")
_IDENT = re.compile(r"`[^`]+`|\b[a-z]+_[a-z0-9_]+\b|\b[A-Z][a-z]+[A-Z]\w*\b|\b[0-9a-f]{7,}\b")
_NUMBER = re.compile(r"\d")
_SENTENCE = re.compile(r"(?<=[.!?])\s+")


@dataclass(frozen=True)
class _Line:
    order: int
    score: float
    text: str


class ExtractiveSummarizer:
    """Summarize by extraction; deterministic and within ``max_tokens`` by ``tokenizer``."""

    def __init__(self, tokenizer: Tokenizer = chars_per_4, line_chars: int = 400) -> None:
        self.tokenizer = tokenizer
        self.line_chars = line_chars

    def summarize(
        self, messages: Sequence[Mapping[str, Any]], previous_summary: str | None, max_tokens: int
    ) -> str:
        """Fold ``previous_summary`` and ``messages`` into at most ``max_tokens`` tokens."""
        lines = list(self._lines(messages, previous_summary))
        unique = list({line.text: line for line in reversed(lines)}.values())[::-1]
        chosen: list[_Line] = []
        used = 0
        for line in sorted(unique, key=lambda item: (-item.score, -item.order)):
            cost = self.tokenizer(line.text) + 1
            if used + cost <= max_tokens:
                chosen.append(line)
                used += cost
        text = "\n".join(line.text for line in sorted(chosen, key=lambda item: item.order))
        if not text and unique:
            text = unique[-1].text
        return clip_to_tokens(text, max_tokens, self.tokenizer)

    def _lines(
        self, messages: Sequence[Mapping[str, Any]], previous: str | None
    ) -> Iterator[_Line]:
        order = 0
        for old in (previous or "").splitlines():
            if old.strip():
                order += 1
                yield _Line(order, _score(old) + 0.5, old.strip())
        for raw in messages:
            for text, score in self._message_lines(raw):
                order += 1
                yield _Line(order, score, text)

    def _message_lines(self, raw: Mapping[str, Any]) -> Iterator[tuple[str, float]]:
        message = make_message(raw)
        role = str(raw.get("role", "?"))
        for call in message.calls:
            path = next(
                (str(v) for k, v in call.arguments.items() if "path" in k or k == "file"), ""
            )
            yield f"{role} called {call.name}{f' on {path}' if path else ''}", 1.0 + bool(path)
        texts = list(text_parts(message))
        kept = False
        for piece, is_result in texts:
            label = "tool result" if is_result else role
            for sentence in _sentences(piece):
                # Only the kept part is scored: a long line costs no more than its clip.
                clipped = sentence[: self.line_chars]
                score = _score(clipped)
                if score > 0:
                    kept = True
                    yield f"{label}: {clipped}", score
        if role == "user" and not kept:
            opening = next(iter(_sentences(" ".join(p for p, r in texts if not r))), "")
            if opening:
                yield f"user asked: {opening[:160]}", 0.75


def _score(text: str) -> float:
    score = 0.0
    if _ERROR.search(text):
        score += 3
    if _DECISION.search(text):
        score += 2
    if _PATH.search(text):
        score += 2
    if _IDENT.search(text):
        score += 1
    if _NUMBER.search(text):
        score += 1
    return score


def _sentences(text: str) -> Iterator[str]:
    for line in text.splitlines():
        for sentence in _SENTENCE.split(line.strip()):
            if sentence:
                yield sentence


def extractive_chain() -> SummarizerChain:
    """A chain holding only the extractive summarizer (needs no LLM, never fails)."""
    return SummarizerChain([(EXTRACTIVE, ExtractiveSummarizer())])
