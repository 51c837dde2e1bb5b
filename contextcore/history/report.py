"""What a pipeline run did: counts per run and per step, and tokens before and after."""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["PipelineReport", "StepReport", "Tally"]


class Tally:
    """Counters the filters of one run add to; owned by that run, never shared."""

    def __init__(self) -> None:
        self.dropped = 0
        self.truncated: set[str] = set()
        self.backfilled = 0
        self.moved = 0
        self.orphans = 0
        self.collapsed = 0

    def truncate(self, message_id: str) -> None:
        """Record that the message with ``message_id`` had content cut or replaced."""
        self.truncated.add(message_id)


@dataclass(frozen=True)
class StepReport:
    """One filter's effect: its name and the message counts before and after it."""

    name: str
    messages_in: int
    messages_out: int


@dataclass(frozen=True)
class PipelineReport:
    """What one pipeline run did.

    ``dropped`` counts messages removed; ``truncated`` messages whose content was cut or
    replaced; ``backfilled`` synthetic tool results inserted; ``moved`` results moved next to
    their call; ``orphans_converted`` results without a call turned into plain messages;
    ``collapsed`` messages replaced by collapsed-group placeholders.
    """

    messages_in: int
    messages_out: int
    tokens_before: int
    tokens_after: int
    dropped: int
    truncated: int
    backfilled: int
    moved: int
    orphans_converted: int
    collapsed: int
    budget: int | None = None
    steps: tuple[StepReport, ...] = field(default=())
