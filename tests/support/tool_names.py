"""The names of the tools the broker lists, written out once for every test that checks them."""

from __future__ import annotations

__all__ = ["BROKER_TOOL_NAMES", "CONTEXT_TOOL_NAMES", "HISTORY_TOOL_NAMES"]

CONTEXT_TOOL_NAMES = frozenset(
    {
        "create_session",
        "list_session_context",
        "add_context_item",
        "remove_context_item",
        "build_request_context",
        "search_context_items",
        "get_context_items",
        "get_request_context",
        "list_turns",
        "list_catalog",
    }
)
HISTORY_TOOL_NAMES = frozenset(
    {
        "append_messages",
        "get_history",
        "trim_messages",
        "summarize_history",
        "collapse_messages",
        "clear_history",
        "update_snapshot",
        "get_snapshot",
        "get_context_stats",
    }
)
BROKER_TOOL_NAMES = (
    CONTEXT_TOOL_NAMES
    | HISTORY_TOOL_NAMES
    | {"get_usage_stats", "record_usage", "forget_usage", "assemble_context", "ui_request_context"}
)
"""What a broker without downstream servers lists."""
