"""Argument and result models of the gateway tools (``call_tool``, ``list_servers``).

The calls themselves are asynchronous and live in ``server/host/gateway_tools.py``; these models
only describe what hosts see."""

from __future__ import annotations

from typing import Any

from pydantic import AliasChoices, AliasGenerator, ConfigDict, Field
from pydantic.alias_generators import to_camel

from ._spec import Args, Out

__all__ = [
    "CALL_TOOL_DESCRIPTION",
    "LIST_SERVERS_DESCRIPTION",
    "CallToolArgs",
    "ListServersArgs",
    "ListServersResult",
    "ServerRow",
    "TrustRow",
    "render_servers",
]

CALL_TOOL_DESCRIPTION = (
    "Call a tool of a downstream MCP server by `server` and `tool` as build_request_context "
    'names them ("server S, tool T"), with `arguments` matching its input schema. The '
    "result is returned as is."
)
LIST_SERVERS_DESCRIPTION = (
    "The downstream MCP servers behind the broker: connection state, tool count, last error "
    "and last refresh, and per server the tools held back (changed since approved, or not "
    "approved) or flagged as possible prompt injections, with the reason."
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


class _Row(Out):
    """A row ``check --json`` prints too: ``model_dump(by_alias=True)`` gives camelCase keys."""

    model_config = ConfigDict(
        frozen=True,
        from_attributes=True,
        alias_generator=AliasGenerator(serialization_alias=to_camel),
    )


class HeldRow(_Row):
    tool: str
    reason: str
    sha256: str = ""  # of the held definition: an approval names it


class FlaggedRow(_Row):
    tool: str
    findings: list[str]


class TrustRow(_Row):
    """What the broker did to a server's tool list before showing it."""

    mode: str
    offered: int = 0
    held: list[HeldRow] = Field(default_factory=list)
    flagged: list[FlaggedRow] = Field(default_factory=list)
    truncated: list[str] = Field(default_factory=list)
    dropped: int = 0
    dropped_tools: list[str] = Field(
        default_factory=list, validation_alias=AliasChoices("dropped_tools", "droppedTools")
    )


class ServerRow(_Row):
    name: str
    transport: str
    state: str
    connected: bool
    tool_count: int
    last_error: str | None
    last_refresh: str | None
    reconnects: int
    trust: TrustRow | None = None
    name_clashes: list[str] = Field(
        default_factory=list, validation_alias=AliasChoices("name_clashes", "nameClashes")
    )  # tools not exposed because another server or the broker has their name


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
        if s.trust is not None:
            lines += _trust_lines(s.name, s.trust)
        lines += [f"  name clash: {why}" for why in s.name_clashes]
    return "\n".join(lines)


def _trust_lines(server: str, trust: TrustRow) -> list[str]:
    lines = [
        f"  held back: {h.tool}: {h.reason}; a person approves it with "
        f"`context-broker tools approve {server}/{h.tool} --hash {h.sha256[:12]}`"
        for h in trust.held
    ]
    for f in trust.flagged:  # finding kinds only: the matched text is itself an injection
        kinds = ", ".join(dict.fromkeys(x.split(":", 1)[0] for x in f.findings))
        lines.append(f"  flagged: {f.tool}: {kinds}")
    if trust.truncated:
        lines.append(f"  clipped descriptions: {', '.join(trust.truncated)}")
    if trust.dropped:
        lines.append(f"  dropped: {trust.dropped} of {trust.offered} tools past the limit")
    return lines
