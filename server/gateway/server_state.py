"""The state of each configured downstream server, in one object the gateway, its supervisor
and its resource proxy share.

A :class:`ServerState` holds what the gateway knows about one server (its settings in force,
live connection, admitted and held tools, trust report, failures, connection state) and the
behaviour that reads only that: the live connection for a call, what a failed call means, the
held-tool refusal and the status row. :class:`ServerTable` holds every configured server by
name and answers lookups with errors that name the servers there are; a reload changes it
through :func:`diff_servers` (which servers to start, stop, restart or retune).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime

import anyio
import httpx2
import mcp_types as types
from context_broker.server.settings import DownstreamConfig
from context_broker.server.version import broker_program
from mcp import MCPError
from mcp_types import CONNECTION_CLOSED, REQUEST_TIMEOUT

from contextcore.items import Tool

from .errors import (
    DownstreamError,
    GatewayError,
    ServerUnavailableError,
    ToolHeldError,
    UnknownServerError,
    UnknownToolError,
    UnreadableAnswer,
)
from .links.connection import Connection
from .models import ConnectionState, ServerStatus
from .naming.names import prefix_for
from .trust.gate import HeldTool, TrustReport, approve_hint
from .trust.secrets import Redactor

__all__ = ["LIVE_SETTINGS", "ServerChanges", "ServerState", "ServerTable", "diff_servers"]

log = logging.getLogger(__name__)

# What a running server takes over without a restart; any other change restarts it.
LIVE_SETTINGS = ("include", "tools", "call_policy", "record_calls")


# How a request fails when the transport under it is gone.
_TRANSPORT_LOST = (
    anyio.ClosedResourceError,
    anyio.BrokenResourceError,
    anyio.EndOfStream,
    OSError,
    httpx2.TransportError,
)


@dataclass
class ServerState:
    """Everything the gateway knows about one configured downstream server."""

    name: str
    config: DownstreamConfig
    redactor: Redactor
    state: ConnectionState = "starting"
    connection: Connection | None = None
    tools: list[types.Tool] = field(default_factory=list)  # admitted: cleaned, pinned
    listing: list[types.Tool] = field(default_factory=list)  # as last listed (within limits)
    held: dict[str, HeldTool] = field(default_factory=dict)
    trust: TrustReport | None = None
    last_error: str | None = None
    last_refresh: datetime | None = None
    reconnects: int = 0
    started_at: float = 0.0
    first_attempt_done: anyio.Event = field(default_factory=anyio.Event)
    refresh_wanted: anyio.Event = field(default_factory=anyio.Event)
    name_clashes: list[str] = field(default_factory=list)  # tools not exposed: name taken
    unlisted: set[str] = field(default_factory=set)  # never listed, called under trust = auto

    def redefined(self, config: DownstreamConfig) -> ServerState:
        """A fresh state for this server under a new definition, to connect again. Unless it
        is disabled now, it keeps the tools last admitted (listed as before, calls told the
        server is starting) until its new connection lists its own."""
        fresh = ServerState(self.name, config, self.redactor)
        if config.enabled:
            fresh.tools, fresh.listing = self.tools, self.listing
            fresh.held, fresh.trust = self.held, self.trust
        return fresh

    @property
    def prefix(self) -> str:
        """The text before this server's exposed tool and prompt names."""
        return prefix_for(self.name, self.config.prefix)

    @property
    def connected(self) -> bool:
        return self.connection is not None and self.state == "connected"

    def live(self, what: str | None = None) -> Connection:
        """The connection to send a request on; ``ServerUnavailableError`` (naming ``what``,
        the state and the last error) while the server is not connected."""
        conn = self.connection
        if conn is None or self.state != "connected":
            reason = f": {self.last_error}" if self.last_error else ""
            target = f" to call {what!r}" if what else ""
            raise ServerUnavailableError(
                self.redactor.redact(
                    f"downstream server {self.name!r} is not connected{target} "
                    f"(state {self.state}{reason}); it is retried automatically, "
                    "see list_servers"
                ),
                server=self.name,
                tool=what,
            )
        return conn

    def call_failed(
        self, conn: Connection, what: str, exc: Exception, *, tool: str | None
    ) -> GatewayError:
        """The error to raise for a request that failed with ``exc``: a JSON-RPC error the
        server answered with is kept as sent (``DownstreamError.error``, secrets masked); a
        lost or broken transport also marks ``conn`` closed, so the supervisor reconnects; an
        answer the broker cannot read fails the request alone."""
        error = None
        if isinstance(exc, MCPError) and exc.code == REQUEST_TIMEOUT:
            detail = "timed out"
        elif isinstance(exc, MCPError) and exc.code != CONNECTION_CLOSED:
            detail = f"failed: {exc.error.message} (code {exc.code})"
            if not isinstance(exc, UnreadableAnswer):
                error = self.redactor.redact_model(exc.error)
        elif isinstance(exc, (MCPError, *_TRANSPORT_LOST)):
            conn.closed.set()
            detail = f"failed, connection lost ({type(exc).__name__}: {exc})"
        else:
            detail = f"failed ({type(exc).__name__}: {exc})"
        message = self.redactor.redact(f"downstream server {self.name!r}: {what} {detail}")
        log.warning("%s", message)
        return DownstreamError(message, server=self.name, tool=tool, error=error)

    def tool_target(self, tool: str, cap: int) -> tuple[str, Connection]:
        """The downstream's own name for ``tool`` and the connection to call it on; raises
        ``ToolHeldError``, ``ServerUnavailableError`` or ``UnknownToolError`` (see
        :meth:`refuse_unlisted`, ``cap``: the server's tool limit) when it cannot be called."""
        original = self.original_tool(tool)
        self.refuse_held(original)
        conn = self.live(original)
        self.refuse_unlisted(original, cap)
        return original, conn

    def refuse_unlisted(self, tool: str, cap: int) -> None:
        """Raise ``UnknownToolError`` for a tool the server never listed, so no gate vetted:
        under ``trust = "pin"`` and ``"strict"`` only listed tools are called; under
        ``"auto"`` each such name counts against the server's tool limit ``cap`` like a
        listed tool, and is refused past it."""
        if any(t.name == tool for t in self.tools) or tool in self.unlisted:
            return
        where = f"tool {tool[:100]!r} is not one downstream server {self.name!r} listed"
        if self.config.trust != "auto":
            raise UnknownToolError(
                f"{where}; under trust = {self.config.trust!r} only its listed and approved "
                "tools can be called (tools/list and list_servers show them)",
                server=self.name,
                tool=tool,
            )
        if len(self.listing) + len(self.unlisted) >= cap:
            raise UnknownToolError(
                f"{where}, and its listed tools and the unlisted names called already reach "
                f"its limit of {cap} tools ([servers.{self.name}] max_tools or [gateway] "
                "max_tools_per_server)",
                server=self.name,
                tool=tool,
            )
        log.warning("downstream %r: calling %r, a tool it never listed", self.name, tool[:100])
        self.unlisted.add(tool)

    def original_tool(self, tool: str) -> str:
        """The downstream's own name for ``tool`` (given by original or exposed name)."""
        if not self.tools or any(t.name == tool for t in self.tools):
            return tool
        for candidate in self.tools:
            if f"{self.prefix}{candidate.name}" == tool:
                return candidate.name
        return tool  # unknown here; the downstream answers with its own error

    def refuse_held(self, tool: str) -> None:
        """Raise ``ToolHeldError`` if ``tool`` is held back until a person approves it."""
        held = self.held.get(tool) or next(
            (h for h in self.held.values() if f"{self.prefix}{h.name}" == tool), None
        )
        if held is None:
            return
        raise ToolHeldError(
            f"tool {held.name!r} of downstream server {self.name!r} is held back: "
            f"{held.reason}. Review it with `{broker_program()} tools status --config FILE` and "
            f"approve it with `{approve_hint(self.name, held.name, held.sha256)}`, or set "
            f'trust = "auto" in [servers.{self.name}] to accept its changes',
            server=self.name,
            tool=held.name,
        )

    def catalog_items(self, tools: list[types.Tool]) -> list[Tool]:
        """Catalog items for listed tools, with this server's per-tool settings applied."""
        tool_cfg = self.config.tools
        return [
            Tool(
                server=self.name,
                name=t.name,
                description=self.redactor.redact(t.description or t.title or ""),
                input_schema=dict(t.input_schema),
                include=tool_cfg[t.name].include if t.name in tool_cfg else None,
                server_include=self.config.include,
                enabled=tool_cfg[t.name].enabled if t.name in tool_cfg else True,
                app_only=app_only(t),
                output_schema=dict(t.output_schema) if t.output_schema is not None else None,
            )
            for t in tools
        ]

    def status(self) -> ServerStatus:
        """The row ``list_servers`` and ``context-broker check`` show."""
        return ServerStatus(
            name=self.name,
            transport=self.config.kind,
            state=self.state,
            tool_count=len(self.tools),
            last_error=self.last_error,
            last_refresh=self.last_refresh,
            reconnects=self.reconnects,
            trust=self.trust,
            name_clashes=tuple(self.name_clashes),
        )


def app_only(tool: types.Tool) -> bool:
    """Whether the MCP Apps extension marks ``tool`` for its App alone: a
    ``_meta.ui.visibility`` list without ``"model"`` (absent: visible to both)."""
    ui = (tool.meta or {}).get("ui")
    visibility = ui.get("visibility") if isinstance(ui, dict) else None
    return isinstance(visibility, list) and "model" not in visibility


class ServerTable:
    """Every configured downstream server's state, by name (sorted)."""

    def __init__(self, servers: Mapping[str, DownstreamConfig], redactor: Redactor) -> None:
        self._by_name = {
            name: ServerState(name, cfg, redactor) for name, cfg in sorted(servers.items())
        }
        self._removed: set[str] = set()  # taken out by a reload: named so in errors

    def __iter__(self) -> Iterator[ServerState]:
        return iter(self._by_name.values())

    def names(self) -> list[str]:
        return list(self._by_name)

    def configs(self) -> dict[str, DownstreamConfig]:
        """The settings in force, by server name."""
        return {name: state.config for name, state in self._by_name.items()}

    def add(self, state: ServerState) -> None:
        """Put ``state`` in the table, replacing a server of the same name."""
        self._by_name[state.name] = state
        self._by_name = dict(sorted(self._by_name.items()))
        self._removed.discard(state.name)

    def remove(self, name: str) -> ServerState | None:
        """Take the server named ``name`` out of the table; it is returned, or None."""
        self._removed.add(name)
        return self._by_name.pop(name, None)

    def find(self, name: str) -> ServerState | None:
        return self._by_name.get(name)

    def get(self, name: str) -> ServerState:
        """The server named ``name``; ``UnknownServerError`` naming the configured ones."""
        server = self._by_name.get(name)
        if server is None:
            known = ", ".join(self._by_name) or "none"
            why = " any more (removed from the config)" if name in self._removed else ""
            raise UnknownServerError(
                f"no downstream server named {name!r}{why}; configured servers: {known}",
                server=name,
            )
        return server

    def live(self) -> list[tuple[ServerState, Connection]]:
        """The servers connected right now, with their connections."""
        return [(s, s.connection) for s in self if s.connected and s.connection is not None]


@dataclass(frozen=True)
class ServerChanges:
    """How one configuration of servers differs from the running one, by server name."""

    added: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()
    restarted: tuple[str, ...] = ()  # defined differently: connected again with the new settings
    retuned: tuple[str, ...] = ()  # only :data:`LIVE_SETTINGS` changed: applied in place

    def __bool__(self) -> bool:
        return bool(self.added or self.removed or self.restarted or self.retuned)


def diff_servers(
    running: Mapping[str, DownstreamConfig], wanted: Mapping[str, DownstreamConfig]
) -> ServerChanges:
    """What it takes to go from the ``running`` servers to the ``wanted`` ones."""
    restarted, retuned = [], []
    for name in sorted(set(running) & set(wanted)):
        old, new = running[name], wanted[name]
        if old == new:
            continue
        live = {key: getattr(new, key) for key in LIVE_SETTINGS}
        if old.model_copy(update=live) == new:
            retuned.append(name)
        else:
            restarted.append(name)
    return ServerChanges(
        added=tuple(sorted(set(wanted) - set(running))),
        removed=tuple(sorted(set(running) - set(wanted))),
        restarted=tuple(restarted),
        retuned=tuple(retuned),
    )
