"""Token estimates for messages and windows.

The default estimate is one token per four characters of the message's JSON (the whole
message, not only its text), plus a fixed per-message overhead. A tokenizer is any callable
from text to a count; named ones can be chosen from JSON requests.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeAlias

from ..errors import HistoryError
from .messages import Message

__all__ = [
    "DEFAULT_TOKENIZER",
    "TOKENIZERS",
    "Tokenizer",
    "chars_per_4",
    "message_cost",
    "message_tokens",
    "resolve_tokenizer",
    "window_tokens",
]

Tokenizer: TypeAlias = Callable[[str], int]


def chars_per_4(text: str) -> int:
    """Estimate tokens as ``ceil(len(text) / 4)``."""
    return math.ceil(len(text) / 4)


def _chars_per_3(text: str) -> int:
    return math.ceil(len(text) / 3)


def _words(text: str) -> int:
    return math.ceil(len(text.split()) * 4 / 3)


TOKENIZERS: Mapping[str, Tokenizer] = {
    "chars/4": chars_per_4,
    "chars/3": _chars_per_3,
    "words": _words,
}
DEFAULT_TOKENIZER = "chars/4"


def resolve_tokenizer(value: object, *, field: str = "tokenizer") -> Tokenizer:
    """Return the tokenizer named by ``value`` (or ``value`` itself if it is callable)."""
    if callable(value):
        return value
    if isinstance(value, str) and value in TOKENIZERS:
        return TOKENIZERS[value]
    raise HistoryError(
        f"{field}: unknown tokenizer {value!r}; use one of {', '.join(TOKENIZERS)} "
        "or pass a callable",
        field=field,
    )


def message_tokens(
    raw: Mapping[str, Any], tokenizer: Tokenizer = chars_per_4, overhead: int = 8
) -> int:
    """Estimated tokens of one message: its compact JSON, plus ``overhead``."""
    text = json.dumps(raw, ensure_ascii=False, separators=(",", ":"), default=str)
    return tokenizer(text) + overhead


def window_tokens(
    raws: Iterable[Mapping[str, Any]], tokenizer: Tokenizer = chars_per_4, overhead: int = 8
) -> int:
    """Estimated tokens of a list of messages."""
    return sum(message_tokens(raw, tokenizer, overhead) for raw in raws)


def message_cost(message: Message, tokenizer: Tokenizer = chars_per_4, overhead: int = 8) -> int:
    """Like :func:`message_tokens` for a parsed message, reusing its cached JSON."""
    return tokenizer(message.json_text) + overhead
