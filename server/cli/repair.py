"""``context-broker repair``: show the session store's damaged records, then remove them.

A damaged record (a turn, message or call that no longer reads) is skipped by every read and
costs nothing else; removing it stops the warnings and gives its message's tokens back to
the session's counters. Every record is shown before anything is removed, and
``--dry-run`` only shows them.
"""

from __future__ import annotations

from pathlib import Path

from ..settings import load_config
from ..stores import build_store
from ..terminal import escape

__all__ = ["repair"]


def repair(config_path: Path, *, dry_run: bool = False) -> int:
    """Print the damaged records of the configured store and remove them (unless
    ``dry_run``); returns the exit code."""
    config = load_config(config_path)
    if config.persistence.backend == "memory":
        print(
            'sessions are kept in memory only ([persistence] backend = "memory"): '
            "nothing is stored, nothing to repair"
        )
        return 0
    store = build_store(config)
    try:
        found = store.damaged_records()
        if not found:
            print("no damaged records in the session store")
            return 0
        print(f"{len(found)} damaged record(s) in the session store:")
        for record in found:
            print(f"  {escape(record.describe())}")  # stored values may hold anything
        if dry_run:
            print("nothing was removed (--dry-run); run again without it to remove them")
            return 0
        removed = store.remove_damaged(found)
        print(f"removed {removed} damaged record(s); the rest of each session is unchanged")
        return 0
    finally:
        store.close()
