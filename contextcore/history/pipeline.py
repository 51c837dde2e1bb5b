"""The history pipeline: ordered, configured filters run over a conversation.

A pipeline is built once from a spec (a preset name, or an ordered list of filter names and
``{"name": ..., "options": {...}}`` entries) and a registry; every bad name or option is a
``HistoryError`` naming it (``filters[1].options.maxTokns``).

``toolCallBackfill`` always runs last, even if omitted or listed earlier: every other filter
may break tool chains, and the output must be valid for the strictest provider. When a budget
applies (a ``sizeLimiter`` or ``RunContext.max_tokens``), a final guard re-checks it after
backfill and drops whole tool units (newest kept first) if a later filter made it overflow.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, TypeAlias

from ..errors import HistoryError
from ._options import parse_options
from .context import RunContext
from .filters.base import FilterDefinition, FilterRun
from .filters.size import SizeLimiterOptions, budget_for, select_within_budget
from .messages import Message, Shape, detect_shape, parse_messages
from .registry import FilterEntry, FilterRegistry, default_registry
from .report import PipelineReport, StepReport, Tally
from .tokens import message_cost, resolve_tokenizer, window_tokens

__all__ = [
    "ConfiguredFilter",
    "FilterSpec",
    "Pipeline",
    "PipelineResult",
    "build_pipeline",
    "run_pipeline",
]

FilterSpec: TypeAlias = "str | Sequence[FilterEntry]"
BACKFILL = "toolCallBackfill"
SIZE = "sizeLimiter"


@dataclass(frozen=True)
class ConfiguredFilter:
    """A filter with its parsed options."""

    definition: FilterDefinition[Any]
    options: Any

    @property
    def name(self) -> str:
        """The filter's registered name."""
        return self.definition.name


@dataclass(frozen=True)
class PipelineResult:
    """The window (wire dicts, in the input's shape) and the report of the run."""

    messages: list[dict[str, Any]]
    report: PipelineReport


@dataclass(frozen=True)
class Pipeline:
    """Configured filters in run order; ``toolCallBackfill`` is always the last one."""

    filters: tuple[ConfiguredFilter, ...]

    @property
    def names(self) -> tuple[str, ...]:
        """Filter names in run order."""
        return tuple(f.name for f in self.filters)

    def run(
        self, messages: Sequence[Mapping[str, Any]], context: RunContext | None = None
    ) -> PipelineResult:
        """Validate ``messages`` (assigning missing ids) and run the filters over them."""
        parsed = parse_messages(messages)
        return self.run_parsed(parsed, detect_shape([m.raw for m in parsed]), context)

    def run_parsed(
        self, messages: Sequence[Message], shape: Shape | None, context: RunContext | None = None
    ) -> PipelineResult:
        """Run the filters over already parsed messages."""
        context = context or RunContext()
        size = self._size_options()
        tokenizer = resolve_tokenizer(size.tokenizer)
        run = FilterRun(context, shape, Tally(), self.filters[-1].options)
        window, steps = list(messages), []
        for configured in self.filters:
            before = len(window)
            window = configured.definition.apply(window, configured.options, run)
            steps.append(StepReport(configured.name, before, len(window)))
        window, budget = self._guard(window, size, run)
        raws = [dict(raw) for raw in context.pinned] + [dict(m.raw) for m in window]
        overhead = size.per_message_overhead
        tally = run.tally
        report = PipelineReport(
            messages_in=len(messages),
            messages_out=len(raws),
            tokens_before=sum(message_cost(m, tokenizer, overhead) for m in messages),
            tokens_after=window_tokens(context.pinned, tokenizer, overhead)
            + sum(message_cost(m, tokenizer, overhead) for m in window),
            dropped=tally.dropped,
            truncated=len(tally.truncated),
            backfilled=tally.backfilled,
            moved=tally.moved,
            orphans_converted=tally.orphans,
            collapsed=tally.collapsed,
            budget=budget,
            steps=tuple(steps),
        )
        return PipelineResult(raws, report)

    def _size_options(self) -> SizeLimiterOptions:
        sizes = [f.options for f in self.filters if f.name == SIZE]
        return sizes[-1] if sizes else SizeLimiterOptions()

    def _guard(
        self, window: list[Message], size: SizeLimiterOptions, run: FilterRun
    ) -> tuple[list[Message], int | None]:
        has_size = any(f.name == SIZE for f in self.filters)
        if not has_size and run.context.max_tokens is None:
            return window, None
        if not has_size:
            size = replace(size, max_tokens=run.context.max_tokens or 0)
        budget = budget_for(size, run)
        if not _over(window, budget, size):
            return window, budget
        kept = select_within_budget(window, budget, size)
        run.tally.dropped += len(window) - len(kept)
        return kept, budget


def _over(window: Sequence[Message], budget: int, size: SizeLimiterOptions) -> bool:
    tokenizer = resolve_tokenizer(size.tokenizer)
    return sum(message_cost(m, tokenizer, size.per_message_overhead) for m in window) > budget


def build_pipeline(
    spec: FilterSpec = "general", registry: FilterRegistry | None = None
) -> Pipeline:
    """Build a pipeline from a preset name or an ordered list of filter entries."""
    registry = registry or default_registry()
    entries = _entries(spec, registry)
    configured = [_configure(entry, index, registry) for index, entry in enumerate(entries)]
    backfills = [c for c in configured if c.name == BACKFILL]
    last = backfills[-1] if backfills else _configure(BACKFILL, len(entries), registry)
    return Pipeline((*(c for c in configured if c.name != BACKFILL), last))


def run_pipeline(
    messages: Sequence[Mapping[str, Any]],
    spec: FilterSpec = "general",
    context: RunContext | None = None,
    registry: FilterRegistry | None = None,
) -> PipelineResult:
    """Build the pipeline for ``spec`` and run it once over ``messages``."""
    return build_pipeline(spec, registry).run(messages, context)


def _entries(spec: FilterSpec, registry: FilterRegistry) -> Sequence[FilterEntry]:
    if isinstance(spec, str):
        preset = registry.preset(spec)
        if preset is None:
            raise HistoryError(
                f"unknown filter preset {spec!r}; use one of {', '.join(registry.preset_names())} "
                "or an explicit list of filters",
                field="filters",
            )
        return preset
    if not isinstance(spec, Sequence):
        raise HistoryError(
            f"filters must be a preset name or a list, got {spec!r}", field="filters"
        )
    return spec


def _configure(entry: object, index: int, registry: FilterRegistry) -> ConfiguredFilter:
    where = f"filters[{index}]"
    name: object = entry
    options: object = None
    if isinstance(entry, Mapping):
        extra = sorted(set(entry) - {"name", "options"})
        if extra:
            raise HistoryError(
                f"{where}.{extra[0]}: unknown key {extra[0]!r}; a filter entry "
                "has 'name' and 'options'",
                field=f"{where}.{extra[0]}",
            )
        name, options, where = entry.get("name"), entry.get("options"), f"{where}.name"
    definition = registry.get(name) if isinstance(name, str) else None
    if definition is None:
        raise HistoryError(
            f"{where}: unknown filter {name!r}; registered filters: {', '.join(registry.names())}",
            field=where,
        )
    return ConfiguredFilter(
        definition, parse_options(definition.options_type, options, f"filters[{index}].options")
    )
