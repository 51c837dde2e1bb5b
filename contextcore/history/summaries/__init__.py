"""Running summaries: when one is due and what it keeps (``policy``), the summarizer
protocol and fallback chain, and the extractive summarizer that needs no LLM. Providers that
call outside (an LLM API, MCP sampling) live in ``server.summarizers``."""

from __future__ import annotations

from .extractive import EXTRACTIVE, ExtractiveSummarizer, extractive_chain
from .policy import (
    Summarizer,
    SummarizerChain,
    Summary,
    SummaryAttempt,
    SummaryOutcome,
    SummaryPlan,
    SummaryPolicy,
    clip_to_tokens,
    plan_summary,
)

__all__ = [
    "EXTRACTIVE",
    "ExtractiveSummarizer",
    "Summarizer",
    "SummarizerChain",
    "Summary",
    "SummaryAttempt",
    "SummaryOutcome",
    "SummaryPlan",
    "SummaryPolicy",
    "clip_to_tokens",
    "extractive_chain",
    "plan_summary",
]
