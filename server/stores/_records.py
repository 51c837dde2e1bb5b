"""Reading stored records back, shared by the SQLite, PostgreSQL and Redis stores."""

from __future__ import annotations

import json

from contextcore.history import message_tokens

__all__ = ["stored_tokens"]


def stored_tokens(text: str | bytes, field: str | None = None) -> int:
    """The estimated tokens of a stored message's JSON (of its ``field`` when the message is
    wrapped), as the history service gives them to new messages; 0 for one that no longer
    reads. Fills the counters of a store written before it kept them."""
    try:
        value = json.loads(text)
        return message_tokens(value[field] if field else value)
    except (ValueError, KeyError, TypeError):
        return 0
