"""The downstream gateway: MCP servers behind the broker, gathered into the catalog and proxied.

Build one with :meth:`Gateway.from_config` and run it as an async context manager inside the
server's lifespan; see :class:`Gateway` for the callbacks.
"""

from .errors import (
    DownstreamError,
    GatewayError,
    SecretError,
    ServersFileError,
    ServerUnavailableError,
    UnknownServerError,
    UnknownToolError,
)
from .gateway import ExposedChangeFn, Gateway
from .models import ConnectionState, ExposedTool, GatewaySettings, ServerStatus
from .naming.names import assign_names, sanitize, split_resource_uri, wrap_resource_uri
from .server_state import ServerState, ServerTable
from .servers_file import load_servers_file, parse_servers, resolve_servers
from .trust.gate import ToolGate, TrustReport
from .trust.secrets import RedactingFilter, Redactor, expand_env, expand_server

__all__ = [
    "ConnectionState",
    "DownstreamError",
    "ExposedChangeFn",
    "ExposedTool",
    "Gateway",
    "GatewayError",
    "GatewaySettings",
    "RedactingFilter",
    "Redactor",
    "SecretError",
    "ServerState",
    "ServerStatus",
    "ServerTable",
    "ServerUnavailableError",
    "ServersFileError",
    "ToolGate",
    "TrustReport",
    "UnknownServerError",
    "UnknownToolError",
    "assign_names",
    "expand_env",
    "expand_server",
    "load_servers_file",
    "parse_servers",
    "resolve_servers",
    "sanitize",
    "split_resource_uri",
    "wrap_resource_uri",
]
