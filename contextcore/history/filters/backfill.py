"""``toolCallBackfill``: repair tool chains (always the last filter of a pipeline)."""

from __future__ import annotations

from collections.abc import Sequence

from ..messages import Message
from ..repair import RepairOptions, repair_chains
from .base import FilterDefinition, FilterRun

__all__ = ["TOOL_CALL_BACKFILL", "backfill"]


def backfill(messages: Sequence[Message], options: RepairOptions, run: FilterRun) -> list[Message]:
    """Move results after their call, add missing ones, turn orphans into plain messages."""
    return repair_chains(messages, run.shape, options, run.tally)


TOOL_CALL_BACKFILL: FilterDefinition[RepairOptions] = FilterDefinition(
    "toolCallBackfill",
    RepairOptions,
    backfill,
    "answer every tool call right after it; turn results without a call into plain messages",
)
