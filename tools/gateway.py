"""Argument and result models of the gateway tools (``call_tool``, ``list_servers``).

The calls themselves are asynchronous and live in ``server/downstream.py``; these models
only describe what hosts see."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from ._spec import Args, Out

__all__ = [
    "CALL_TOOL_DESCRIPTION",
    "LIST_SERVERS_DESCRIPTION",
    "CallToolArgs",
    "ListServersArgs",
    "ListServersResult",
    "ServerRow",
    "render_servers",
]

CALL_TOOL_DESCRIPTION = (
    "Call any tool of a downstream MCP server behind the broker, by server and original tool "
    "name (search_context_items and build_request_context tell which tools fit a request). "
    "The downstream result is returned as is."
)
LIST_SERVERS_DESCRIPTION = (
    "The downstream MCP servers behind the broker: connection state, tool count, last error "
    "and last refresh."
)


class CallToolArgs(Args):
    server: str = Field(min_length=1, description="Downstream server name (see list_servers).")
    tool: str = Field(min_length=1, description="The tool's original name on that server.")
    arguments: dict[str, Any] = Field(
        default_factory=dict, description="Arguments passed to the downstream tool."
    )
    session_id: str | None = Field(None, description="The broker session the call belongs to.")


class ListServersArgs(Args):
    pass


class ServerRow(Out):
    name: str
    transport: str
    state: str
    connected: bool
    tool_count: int
    last_error: str | None
    last_refresh: str | None
    reconnects: int


class ListServersResult(Out):
    servers: list[ServerRow]


def render_servers(result: ListServersResult) -> str:
    """One line per server."""
    if not result.servers:
        return "no downstream servers are configured"
    lines = []
    for s in result.servers:
        error = f"; last error: {s.last_error}" if s.last_error else ""
        lines.append(f"{s.name} ({s.transport}): {s.state}, {s.tool_count} tools{error}")
    return "\n".join(lines)
