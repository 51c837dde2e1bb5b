"""The server's settings: the domain's ``BrokerConfig`` plus the transport tables.

One TOML file holds both and is loaded once, by :func:`load_config` (the domain's loader run
against :class:`AppConfig`): unknown keys are rejected with the table named, secrets are never
echoed, ``CONTEXT_BROKER_<SECTION>__<KEY>`` environment variables override single keys.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

from pydantic import Field, model_validator

from contextcore import config as domain
from contextcore.config import BrokerConfig, ConfigModel, ListedTools
from contextcore.errors import ConfigError
from contextcore.items import IncludeMode
from contextcore.profiles import unknown_servers

__all__ = [
    "AppConfig",
    "CodeConfig",
    "DownstreamConfig",
    "DownstreamToolConfig",
    "GatewayConfig",
    "HttpConfig",
    "OAuthConfig",
    "ServerConfig",
    "TelemetryConfig",
    "load_config",
    "parse_config",
]


class HttpConfig(ConfigModel):
    """Streamable HTTP and SSE transport settings."""

    host: str = "127.0.0.1"
    port: int = Field(8765, ge=0, le=65535)
    auth_token: str | None = None
    auth_token_env: str | None = None
    # Names the variable holding the /ui cookie key; replicas that share it share sign-ins.
    ui_cookie_key_env: str | None = None
    allowed_hosts: tuple[str, ...] = ()
    allowed_origins: tuple[str, ...] = ()
    max_body_bytes: int = Field(4 * 1024 * 1024, ge=1024)
    session_idle_timeout: float = Field(300.0, gt=0)


class ServerConfig(ConfigModel):
    """The broker's own server settings."""

    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"
    max_message_chars: int = Field(1_000_000, ge=1)
    watch_config: bool = False
    # Forwarded calls answered straight from the stdio wire and the downstream fast lane;
    # off, every request goes through the MCP SDK's sessions (CONTEXT_BROKER_FAST_PATH=0).
    fast_path: bool = True
    # What a host's tools/list shows of the broker's own tools: "model" (what a model needs to
    # work: build_request_context, get_context_items, call_tool and run_code), "all", or a
    # list of names.
    # Every broker tool answers a call by its name whatever is listed.
    tools: ListedTools = "model"
    # A handshake-era host (one host per connection) is also listed the tools its latest
    # request context selected, with tools/list_changed; the text then names those its list
    # has instead of describing them. Off by default: over a conversation the text alone
    # costs less (benchmarks/conversation_bill.py --relist), and one connection of a
    # desktop host serves every conversation.
    relist_selected: bool = False
    http: HttpConfig = HttpConfig()


class GatewayConfig(ConfigModel):
    """How downstream connections are kept alive."""

    backoff_base: float = Field(0.5, gt=0)
    backoff_max: float = Field(30.0, gt=0)
    debounce: float = Field(0.25, ge=0)
    record_max_chars: int = Field(20_000, ge=100)
    startup_budget: float = Field(5.0, ge=0)
    pin_file: Path = Path("context-broker.pins.json")
    max_description_chars: int = Field(2_000, ge=100)
    max_tools_per_server: int = Field(200, ge=1)
    # resources/subscribe: how many downstream resources one host connection may be
    # subscribed to at once (all released when it closes).
    max_subscriptions_per_host: int = Field(1024, ge=1)
    # resources/subscribe: how many all host connections together may hold on one downstream
    # server.
    max_subscriptions_per_server: int = Field(4096, ge=1)
    # OAuth tokens and client registrations of downstream servers; written private (0600).
    # Unset: tokens.json in the user's state folder ($XDG_STATE_HOME/context-broker, else
    # ~/.local/state/context-broker), never beside the config, which may sit in a git tree.
    token_file: Path | None = None
    # Where those tokens live: "file" (token_file) or "store" (the [persistence] store, shared
    # by replicas); unset, the store when it is PostgreSQL or Redis, else the file.
    token_store: Literal["file", "store"] | None = None


class TelemetryConfig(ConfigModel):
    """OpenTelemetry traces: one span per tool call, exported over OTLP/HTTP when
    ``otlp_endpoint`` is set (e.g. ``http://localhost:4318/v1/traces``)."""

    otlp_endpoint: str = ""
    service_name: str = "context-broker"


class CodeConfig(ConfigModel):
    """Code mode: the ``run_code`` tool, where a model's program calls downstream tools in a
    sandbox (pydantic-monty worker processes) and only its answer reaches the model."""

    enabled: bool = True
    # Seconds a run may compute (time spent waiting for tools does not count).
    timeout: float = Field(10.0, gt=0, le=600)
    # Seconds a whole run may take, waiting for tools included; past it the worker is killed.
    run_timeout: float = Field(120.0, gt=0)
    max_memory_mb: int = Field(64, ge=1, le=16_384)
    max_recursion_depth: int = Field(200, ge=10, le=10_000)
    # Tool calls one run may make (other waits of the program: twice as many).
    max_calls: int = Field(50, ge=1, le=10_000)
    # Bytes the variables a session keeps between runs may take in the store.
    max_state_bytes: int = Field(1_000_000, ge=1_000)
    # Characters of printed output a result keeps (the rest is cut, saying so).
    max_output_chars: int = Field(10_000, ge=100)
    # Sandbox worker processes (kept warm: one at least, at most this many at once).
    workers: int = Field(2, ge=1, le=64)


class DownstreamToolConfig(ConfigModel):
    """Per-tool overrides of one downstream server; a disabled tool is neither listed,
    selected nor callable."""

    include: IncludeMode | None = None
    enabled: bool = True


class OAuthConfig(ConfigModel):
    """OAuth to one downstream HTTP server (``[servers.NAME.oauth]``): the authorization code
    grant with a person at a browser (default), or the client credentials grant for brokers
    that run with no one present (with ``client_secret`` or ``private_key_pem``)."""

    grant: Literal["authorization_code", "client_credentials"] = "authorization_code"
    client_id: str | None = None
    client_secret: str | None = None
    private_key_pem: str | None = None
    signing_algorithm: str = "RS256"
    scopes: tuple[str, ...] = ()
    # The authorization server the credentials belong to; tokens are only asked of it.
    # Required with 'client_secret' or 'private_key_pem': they are sent to no other server.
    issuer: str | None = None
    # An HTTPS URL of this client's metadata document, used as its client_id where the
    # authorization server accepts those (instead of registering).
    client_metadata_url: str | None = None
    # Port of the loopback redirect (http://127.0.0.1:PORT/callback); 0 picks a free one.
    redirect_port: int = Field(0, ge=0, le=65535)

    @model_validator(mode="after")
    def _complete(self) -> OAuthConfig:
        if self.client_secret is not None and self.private_key_pem is not None:
            raise ValueError("set at most one of 'client_secret' or 'private_key_pem'")
        if self.grant == "client_credentials":
            if self.client_id is None:
                raise ValueError("grant 'client_credentials' needs 'client_id'")
            if self.client_secret is None and self.private_key_pem is None:
                raise ValueError(
                    "grant 'client_credentials' needs 'client_secret' or 'private_key_pem'"
                )
        elif self.private_key_pem is not None:
            raise ValueError("'private_key_pem' works with grant = 'client_credentials' only")
        if self.client_secret is not None and self.client_id is None:
            raise ValueError("'client_secret' needs the 'client_id' it belongs to")
        if self.issuer is None and (self.client_secret, self.private_key_pem) != (None, None):
            credential = "client_secret" if self.client_secret is not None else "private_key_pem"
            raise ValueError(
                f"'{credential}' needs 'issuer', the URL of the authorization server it belongs "
                "to: without it the credential would go to whichever server the downstream names"
            )
        if self.issuer is not None and urlsplit(self.issuer).scheme not in ("http", "https"):
            raise ValueError("'issuer' must be the authorization server's http(s) URL")
        return self


class DownstreamConfig(ConfigModel):
    """One downstream MCP server: ``command`` (stdio) or ``url`` (http or sse).

    A ``[servers.NAME]`` table with neither adds its settings to the server ``NAME`` of
    ``mcp_servers_file`` (see ``server.gateway.servers_file``); only such a table may lack both.
    """

    command: str | None = None
    args: tuple[str, ...] = ()
    env: dict[str, str] = Field(default_factory=dict)
    cwd: Path | None = None
    url: str | None = None
    transport: Literal["stdio", "http", "sse"] | None = None
    headers: dict[str, str] = Field(default_factory=dict)
    include: IncludeMode | None = None
    enabled: bool = True
    timeout: float = Field(30.0, gt=0)
    record_calls: bool = True
    call_policy: Literal["any", "selected"] = "any"
    trust: Literal["pin", "auto", "strict"] = "pin"
    # Under trust = "pin": hold a tool first seen after the server's first listing.
    hold_new_tools: bool = True
    max_tools: int | None = Field(None, ge=1)
    max_description_chars: int | None = Field(None, ge=100)
    tools: dict[str, DownstreamToolConfig] = Field(default_factory=dict)
    oauth: OAuthConfig | None = None
    # None: the newest version both sides speak (see server.gateway.links.connection).
    protocol_version: (
        Literal["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25", "2026-07-28"] | None
    ) = None
    # Text before this server's tool and prompt names; None: "<server>__"; "": its own names
    # (and its resources under their own URIs).
    prefix: str | None = Field(None, pattern=r"^[A-Za-z0-9_-]{0,48}$")

    @model_validator(mode="after")
    def _one_target(self) -> DownstreamConfig:
        if not self.has_target:
            return self  # settings for an imported server: checked once merged with it
        if self.command is not None and self.url is not None:
            raise ValueError("set exactly one of 'command' (stdio) or 'url' (http/sse)")
        if self.command is not None and self.transport not in (None, "stdio"):
            raise ValueError(f"transport {self.transport!r} needs 'url', not 'command'")
        if self.url is not None and self.transport == "stdio":
            raise ValueError("transport 'stdio' needs 'command', not 'url'")
        if self.oauth is not None and self.url is None:
            raise ValueError("'oauth' works with 'url' servers (http or sse) only")
        if self.protocol_version == "2026-07-28" and self.kind != "http":
            raise ValueError("protocol_version '2026-07-28' works with 'url' http servers only")
        return self

    @property
    def has_target(self) -> bool:
        """Whether it says what to start or reach (``command`` or ``url``); without, it only
        adds settings to a server of ``mcp_servers_file``."""
        return self.command is not None or self.url is not None

    @property
    def kind(self) -> Literal["stdio", "http", "sse"]:
        """The transport actually used."""
        if self.command is not None:
            return "stdio"
        return self.transport if self.transport in ("http", "sse") else "http"


class AppConfig(BrokerConfig):
    """The whole config file: the domain's tables and the server's, every one with defaults."""

    server: ServerConfig = ServerConfig()
    gateway: GatewayConfig = GatewayConfig()
    telemetry: TelemetryConfig = TelemetryConfig()
    code: CodeConfig = CodeConfig()
    servers: dict[str, DownstreamConfig] = Field(default_factory=dict)
    mcp_servers_file: Path | None = None


def _profiles_checked(config: AppConfig, source: str) -> AppConfig:
    """``config`` if its profiles name only configured servers and each server table says what
    to start or reach, else ``ConfigError``. With an ``mcp_servers_file`` the servers are
    known once it is read (see ``resolve_servers`` and ``build_runtime``)."""
    if config.mcp_servers_file is None:
        for name, server in config.servers.items():
            if not server.has_target:
                raise ConfigError(
                    f"{source}: servers.{name}: set 'command' (stdio) or 'url' (http/sse); a "
                    "table without them only adds settings to a server of mcp_servers_file, "
                    "and this config names no such file",
                    field=f"servers.{name}",
                )
        problem = unknown_servers(config.profiles, config.servers)
        if problem is not None:
            raise ConfigError(f"{source}: {problem}", field="profiles")
    return config


def parse_config(
    data: Mapping[str, Any],
    *,
    base_dir: Path,
    source: str = "config",
    environ: Mapping[str, str] | None = None,
) -> AppConfig:
    """Validate a config mapping; raise ``ConfigError`` naming every bad key."""
    config = domain.parse_config(
        data, base_dir=base_dir, source=source, environ=environ, schema=AppConfig
    )
    return _profiles_checked(config, source)


def load_config(path: Path, *, environ: Mapping[str, str] | None = None) -> AppConfig:
    """Read and validate a TOML config file."""
    return _profiles_checked(domain.load_config(path, environ=environ, schema=AppConfig), str(path))
