"""What a result says about damaged stored records its reads skipped."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from ._spec import ToolContext

__all__ = ["SKIPPED_FIELD", "skipped", "skipped_lines"]

SKIPPED_FIELD: Any = Field(
    default_factory=list,
    description="Damaged stored records of this session that reads skipped (which record and "
    "why); the rest of the session is unaffected. `context-broker repair` removes them.",
)
_SHOWN = 5


def skipped(ctx: ToolContext, session_id: str) -> list[str]:
    """The session's damaged records skipped so far, described."""
    return [r.describe() for r in ctx.history.skipped_records(session_id)]


def skipped_lines(records: list[str]) -> list[str]:
    """One line naming the skipped records for a result's text (none when there are none)."""
    if not records:
        return []
    more = f" and {len(records) - _SHOWN} more" if len(records) > _SHOWN else ""
    return [
        f"Skipped {len(records)} damaged stored record(s): {'; '.join(records[:_SHOWN])}{more}; "
        "`context-broker repair` shows and removes them."
    ]
