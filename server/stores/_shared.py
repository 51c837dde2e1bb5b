"""What the SQLite, PostgreSQL and Redis stores write the same way: records as compact JSON,
item refs as keys, and a batch's repeated ids.

Each backend keeps its own transactions in its own file; the two small JSON parts of a
session come from :class:`contextcore.store.JsonParts` (for the in-memory store too), and the
SQL that SQLite and PostgreSQL share is in ``_sql.py``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from contextcore.items import ItemRef
from contextcore.store import DuplicateRecord

__all__ = ["dumps", "no_repeats", "ref_key"]


def dumps(value: Any) -> str:
    """``value`` as the compact JSON every backend stores (UTF-8 kept, no spaces)."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def ref_key(ref: ItemRef) -> str:
    """An item ref as one text key (type, name and server), unique per item."""
    return dumps([ref.type, ref.name, ref.server])


def no_repeats(values: Sequence[str], what: str) -> None:
    """``DuplicateRecord`` naming the first of ``values`` given twice in one batch."""
    seen: set[str] = set()
    for value in values:
        if value in seen:
            raise DuplicateRecord(f"{what} {value!r} is already used")
        seen.add(value)
