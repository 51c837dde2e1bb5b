"""Conversation history: messages in OpenAI or Anthropic shape, a filter pipeline that keeps
windows within budget and valid for the strictest provider, fresh summaries, task snapshots.

Errors are ``contextcore.errors.HistoryError`` (field names like ``messages[3].role`` or
``filters[1].options.maxTokns``).

Typical use::

    history = append_messages(ConversationHistory(), raw_messages)
    history = update_summary(history, ExtractiveSummarizer()).history
    window = get_window(history, max_tokens=8000)
    window.messages, window.report.tokens_after
"""

from __future__ import annotations

from .context import CollapseGroup, RunContext
from .conversation import (
    ConversationHistory,
    SummaryUpdate,
    append_messages,
    clear_history,
    collapse_messages,
    update_snapshot,
    update_summary,
)
from .filters import FilterDefinition, FilterRun
from .messages import Message, Shape, ToolCall, ToolResult, detect_shape, parse_messages
from .pipeline import FilterSpec, Pipeline, PipelineResult, build_pipeline, run_pipeline
from .registry import FilterRegistry, default_registry
from .repair import RepairOptions
from .report import PipelineReport, StepReport
from .snapshot import TaskSnapshot
from .stats import HistoryStats, history_stats, stats_from_totals
from .summaries.extractive import ExtractiveSummarizer
from .summaries.policy import (
    Summarizer,
    SummarizerChain,
    Summary,
    SummaryOutcome,
    SummaryPlan,
    SummaryPolicy,
    plan_summary,
)
from .tokens import message_tokens, window_tokens
from .validate import validate_window
from .window import HistoryWindow, get_window

__all__ = [
    "CollapseGroup",
    "ConversationHistory",
    "ExtractiveSummarizer",
    "FilterDefinition",
    "FilterRegistry",
    "FilterRun",
    "FilterSpec",
    "HistoryStats",
    "HistoryWindow",
    "Message",
    "Pipeline",
    "PipelineReport",
    "PipelineResult",
    "RepairOptions",
    "RunContext",
    "Shape",
    "StepReport",
    "Summarizer",
    "SummarizerChain",
    "Summary",
    "SummaryOutcome",
    "SummaryPlan",
    "SummaryPolicy",
    "SummaryUpdate",
    "TaskSnapshot",
    "ToolCall",
    "ToolResult",
    "append_messages",
    "build_pipeline",
    "clear_history",
    "collapse_messages",
    "default_registry",
    "detect_shape",
    "get_window",
    "history_stats",
    "message_tokens",
    "parse_messages",
    "plan_summary",
    "run_pipeline",
    "stats_from_totals",
    "update_snapshot",
    "update_summary",
    "validate_window",
    "window_tokens",
]
