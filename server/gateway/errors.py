"""Exceptions raised by the downstream gateway.

    GatewayError                 every gateway failure; ``server`` and ``tool`` name the target
     ├── ServersFileError        a servers file (mcpServers or servers JSON) cannot be used
     ├── SecretError             a ``${env:NAME}`` reference names an unset variable
     ├── UnknownServerError      no downstream server by that name
     ├── UnknownToolError        the server does not list that tool (or prompt, or resource)
     ├── ServerUnavailableError  the server is not connected right now (starting, down, disabled)
     ├── ToolHeldError           the tool's definition is held back until a person approves it
     ├── PinFileError            the pin file cannot be read or written, or nothing to approve
     ├── TokenFileError          the OAuth token file cannot be read or written
     └── DownstreamError         the downstream failed a request (timeout, protocol error, crash)

Messages never contain secret values: they pass the gateway's redactor before being raised.
"""

from __future__ import annotations

from mcp import MCPError
from mcp_types import ErrorData

__all__ = [
    "DownstreamError",
    "GatewayError",
    "PinFileError",
    "SecretError",
    "ServerUnavailableError",
    "ServersFileError",
    "TokenFileError",
    "ToolHeldError",
    "UnknownServerError",
    "UnknownToolError",
    "UnreadableAnswer",
]


class GatewayError(Exception):
    """Root of every error the gateway raises on purpose. ``error``: the JSON-RPC error a
    downstream answered with, as it sent it (secrets masked), when that is the failure
    (see :class:`DownstreamError`); None for the gateway's own."""

    def __init__(
        self,
        message: str,
        *,
        server: str | None = None,
        tool: str | None = None,
        error: ErrorData | None = None,
    ) -> None:
        super().__init__(message)
        self.server = server
        self.tool = tool
        self.error = error

    @property
    def message(self) -> str:
        return str(self.args[0]) if self.args else ""


class ServersFileError(GatewayError):
    """A Claude Desktop / Cursor / VS Code servers file cannot be used."""


class SecretError(GatewayError):
    """A ``${env:NAME}`` reference names a variable that is not set."""


class UnknownServerError(GatewayError):
    """No downstream server has that name."""


class UnknownToolError(GatewayError):
    """The downstream server does not offer that tool, prompt or resource."""


class ServerUnavailableError(GatewayError):
    """The downstream server is configured but not connected right now."""


class DownstreamError(GatewayError):
    """A downstream request failed: timeout, protocol error, its JSON-RPC error (``error``)
    or a dead connection."""


class UnreadableAnswer(MCPError):
    """An answer of a downstream the broker could not read (a malformed result, a broken
    line): an error made by the broker, not one the server sent."""


class ToolHeldError(GatewayError):
    """The tool is held back: new or changed since approved, or flagged under strict trust."""


class PinFileError(GatewayError):
    """The pin file cannot be read or written, or an approval matched nothing."""


class TokenFileError(GatewayError):
    """The OAuth token file cannot be read or written."""
