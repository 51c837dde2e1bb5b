"""Assembling the window sent to the model from a session's history.

With a summary: the summary as a synthetic user message ``[Earlier conversation summary:
...]``, a synthetic assistant acknowledgement, then every message the summary does not cover
(the last ``keep_recent`` right after a summary update, at most ``threshold`` more before the
next one, so no message is ever left out of both). Without a summary: up to the last
``window_without_summary`` messages. The task snapshot, if any, comes first as a system
message. Pinned messages count against the budget; the pipeline filters the rest.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .context import RunContext
from .conversation import ConversationHistory
from .messages import Message, make_message, message_text
from .pipeline import FilterSpec, Pipeline, build_pipeline
from .registry import FilterRegistry
from .report import PipelineReport
from .summaries.policy import SummaryPolicy
from .units import safe_cut

__all__ = ["ACKNOWLEDGEMENT", "HistoryWindow", "get_window", "text_only", "window_start"]

ACKNOWLEDGEMENT = "Understood. I will continue from that summary and the messages that follow."


@dataclass(frozen=True)
class HistoryWindow:
    """The messages to send, the pipeline report and what the window was built from."""

    messages: list[dict[str, Any]]
    report: PipelineReport
    summary_used: bool
    snapshot_used: bool
    first_index: int


def get_window(
    history: ConversationHistory,
    *,
    filters: FilterSpec | Pipeline = "general",
    max_tokens: int | None = None,
    policy: SummaryPolicy | None = None,
    only_text: bool = False,
    include_snapshot: bool = True,
    registry: FilterRegistry | None = None,
) -> HistoryWindow:
    """Build the window for the next request (empty right after a clear).

    ``max_tokens`` caps the pipeline's budget; ``only_text`` sends only role and text
    (tool calls and results become short text, ids are left out).
    """
    policy = policy or SummaryPolicy()
    pipeline = filters if isinstance(filters, Pipeline) else build_pipeline(filters, registry)
    summary = history.summary if history.summary and not history.cleared else None
    first = window_start(history, policy)
    pinned: list[dict[str, Any]] = []
    snapshot = history.snapshot if include_snapshot and not history.cleared else None
    if snapshot is not None and not snapshot.is_empty:
        pinned.append({"role": "system", "content": snapshot.render(), "id": "snapshot"})
    if summary is not None:
        pinned.append(
            {
                "role": "user",
                "id": f"summary:{summary.covered}",
                "content": f"[Earlier conversation summary: {summary.text}]",
            }
        )
        pinned.append(
            {
                "role": "assistant",
                "content": ACKNOWLEDGEMENT,
                "id": f"summary-ack:{summary.covered}",
            }
        )
    recent: Sequence[Message] = history.messages[first:]
    shape = history.shape
    if only_text:
        recent, shape = text_only(recent), None
    context = RunContext(
        groups=history.groups,
        max_tokens=max_tokens,
        pinned=tuple(_strip_id(p) if only_text else p for p in pinned),
    )
    result = pipeline.run_parsed(recent, shape, context)
    out = [_strip_id(m) for m in result.messages] if only_text else result.messages
    return HistoryWindow(out, result.report, summary is not None, snapshot is not None, first)


def window_start(history: ConversationHistory, policy: SummaryPolicy) -> int:
    """Where the window begins in ``history``'s messages: past the end right after a clear,
    after what the summary covers, else the last ``window_without_summary`` messages (never
    before the live start, never splitting a tool call from its result)."""
    messages = history.messages
    if history.cleared:
        return len(messages)
    if history.summary is not None:
        return history.summary.covered
    cut = safe_cut(messages, len(messages) - policy.window_without_summary)
    return max(history.live_start, cut)


def text_only(messages: Sequence[Message]) -> list[Message]:
    """Messages reduced to role and text; tool traffic becomes short text, empties go."""
    out = []
    for message in messages:
        parts = [message_text(message)]
        parts += [f"[called {c.name}({_short(c.arguments)})]" for c in message.calls]
        text = "\n".join(part for part in parts if part)
        role = "user" if message.role == "tool" or message.results else message.role
        if message.results:
            text = f"[tool result] {text}"
        if text.strip():
            out.append(make_message({"role": role, "content": text, "id": message.id}))
    return out


def _short(arguments: Any) -> str:
    text = json.dumps(arguments, ensure_ascii=False, sort_keys=True, default=str)
    return text if len(text) <= 200 else text[:200] + "…"


def _strip_id(raw: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in raw.items() if k != "id"}
