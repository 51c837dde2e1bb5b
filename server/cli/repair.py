"""``context-broker repair``: show the session store's damaged records, then remove them.

A damaged record (a turn, message or call that no longer reads) is skipped by every read and
costs nothing else; removing it stops the warnings and gives its message's tokens back to
the session's counters. Every record is shown first; then ``repair`` asks before removing
anything, or needs ``--yes`` where no one can answer (stdin is not a terminal). ``--dry-run``
only shows them.
"""

from __future__ import annotations

import sys
from pathlib import Path

from ..settings import load_config
from ..stores import build_store
from ..terminal import escape

__all__ = ["NOT_CONFIRMED", "repair"]

NOT_CONFIRMED = 1
"""Exit code of ``repair`` when damaged records were found and nothing was removed because
no one confirmed (stdin is not a terminal and ``--yes`` was not given)."""


def repair(config_path: Path, *, dry_run: bool = False, yes: bool = False) -> int:
    """Print the damaged records of the configured store and remove them once confirmed
    (``yes``, or a person answering at the terminal); never with ``dry_run``. Returns the
    exit code."""
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
        if not yes:
            answer = _confirm(len(found))
            if answer is None:
                print(
                    "nothing was removed: no one can confirm here (stdin is not a terminal); "
                    "run again with --yes to remove them"
                )
                return NOT_CONFIRMED
            if not answer:
                print("nothing was removed")
                return 0
        removed = store.remove_damaged(found)
        print(f"removed {removed} damaged record(s); the rest of each session is unchanged")
        return 0
    finally:
        store.close()


def _confirm(count: int) -> bool | None:
    """Whether a person agreed to remove ``count`` records; None when no one can be asked."""
    if not sys.stdin.isatty():
        return None
    try:
        answer = input(f"remove these {count} damaged record(s)? [y/N] ")
    except EOFError:
        return False
    return answer.strip().lower() in ("y", "yes")
