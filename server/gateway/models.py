"""The gateway's public value types: settings, per-server status, exposed tools."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Literal

import mcp_types as types
from context_broker.tools.gateway import ServerRow

from contextcore.config import LimitsConfig
from contextcore.items import IncludeMode

if TYPE_CHECKING:
    from .oauth.store import TokenStore
    from .trust.gate import TrustReport

__all__ = ["ConnectionState", "ExposedTool", "GatewaySettings", "ServerStatus"]

ConnectionState = Literal["starting", "connected", "reconnecting", "failed", "disabled"]


@dataclass(frozen=True)
class GatewaySettings:
    """Reconnect and refresh policy, shared by every downstream server.

    The n-th reconnect waits ``min(backoff_max, backoff_base * 2**n)`` seconds; retries go on
    at ``backoff_max`` for as long as the gateway runs. A ``tools/list_changed`` burst is
    folded into one refresh ``debounce`` seconds after its first notification.
    """

    backoff_base: float = 0.5
    backoff_max: float = 30.0
    debounce: float = 0.25
    pin_poll: float = 1.0  # seconds between checks of the pin file for approvals
    fast_path: bool = True  # stdio servers get the request lane (see server.wire.sdk_compat)
    tokens: TokenStore | None = None  # OAuth tokens of downstream servers (None: in memory)
    # A server whose OAuth sign-in needs a person opens a browser; off (check, eval), its
    # connection fails with the `auth login` hint instead.
    sign_in: bool = True
    # Downstream resources one host connection may be subscribed to at once.
    max_subscriptions_per_host: int = 1024
    # Downstream resources all host connections together may be subscribed to on one server.
    max_subscriptions_per_server: int = 4096
    # The broker's own tool names: no downstream tool is exposed as one (given by the host side).
    reserved: frozenset[str] = frozenset()
    # A downstream result's size at most (bytes, as JSON), cut beyond: [limits] max_result_bytes.
    max_result_bytes: int = LimitsConfig().max_result_bytes

    def backoff(self, attempt: int) -> float:
        """Delay before reconnect attempt ``attempt`` (0-based)."""
        return min(self.backoff_max, self.backoff_base * 2.0 ** min(attempt, 30))


@dataclass(frozen=True)
class ServerStatus:
    """What ``list_servers`` and ``context-broker check`` show for one downstream server."""

    name: str
    transport: Literal["stdio", "http", "sse"]
    state: ConnectionState
    tool_count: int
    last_error: str | None
    last_refresh: datetime | None
    reconnects: int
    trust: TrustReport | None = None  # what the tool gate held, flagged, clipped or dropped
    name_clashes: tuple[str, ...] = ()  # tools not exposed: their name is another's

    @property
    def connected(self) -> bool:
        return self.state == "connected"

    def row(self) -> ServerRow:
        """What ``list_servers`` shows (``model_dump(by_alias=True)``: what ``check --json``
        prints); secrets are already scrubbed from ``last_error``."""
        return ServerRow(
            name=self.name,
            transport=self.transport,
            state=self.state,
            connected=self.connected,
            tool_count=self.tool_count,
            last_error=self.last_error,
            last_refresh=self.last_refresh.isoformat() if self.last_refresh else None,
            reconnects=self.reconnects,
            trust=self.trust.row() if self.trust is not None else None,
            name_clashes=list(self.name_clashes),
        )


@dataclass(frozen=True)
class ExposedTool:
    """A downstream tool as the gateway knows it: its exposed name, origin and definition."""

    name: str
    server: str
    tool: str
    definition: types.Tool
    include: IncludeMode
    available: bool
    enabled: bool = True

    def as_mcp_tool(self) -> types.Tool:
        """The downstream definition under the exposed name (schemas forwarded verbatim)."""
        return self.definition.model_copy(update={"name": self.name})
