"""The composition root: everything ``serve`` runs, built once from the config.

:func:`build_runtime` builds, in order: the observer (metrics, tracing), the session store, the
broker (catalog, embedder, search, sessions; its store and search engine wrapped in the
observer's spans before the broker gets them), the hosts' ``tools/list_changed`` notifier, the
gateway (which calls that notifier), the config reloader, the history service, the
host-facing gateway tools, the MCP server, the stdio pass-through and the HTTP routes. Each
object receives its collaborators in its constructor; the transports only run what is built.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mcp.server import Server
from starlette.routing import BaseRoute

from contextcore.catalog import Catalog
from contextcore.config import ListedTools
from contextcore.errors import ConfigError
from contextcore.profiles import unknown_servers
from contextcore.services.history import HistoryService

from .gateway import ExposedChangeFn, Gateway, GatewaySettings, ToolGate, resolve_servers
from .gateway.oauth.store import open_tokens
from .host.code_mode import CodeRunner
from .host.gateway_tools import RESERVED_NAMES, GatewayTools, HostNotifier
from .host.mcp_server import build_server
from .observability import Observer, build_tracer_provider
from .parts import AppParts, build_parts
from .reload import ConfigReloader
from .settings import AppConfig, DownstreamConfig
from .stores import build_store
from .summarizers import SummarizerFactory
from .transport.passthrough import DirectCalls
from .transport.routes import http_routes
from .version import broker_version
from .wire.sdk_compat import fast_path_enabled

__all__ = ["Runtime", "build_gateway", "build_runtime", "new_gateway"]


@dataclass(frozen=True)
class Runtime:
    """The built broker server: what the stdio and HTTP transports run."""

    config: AppConfig
    parts: AppParts
    observer: Observer
    history: HistoryService
    gateway: Gateway
    """The downstream connections (none yet when the config names no server: a reload may
    add them)."""
    gateway_tools: GatewayTools
    code: CodeRunner | None
    """Code mode's ``run_code`` (None: ``[code] enabled = false``)."""
    reloader: ConfigReloader
    server: Server[Any]
    direct: DirectCalls | None
    """The stdio pass-through of plain forwarded calls (None: fast path off)."""
    routes: list[BaseRoute]
    """What the HTTP transport serves beside ``/mcp``: health, metrics, ``/ui/``."""
    profiles: Mapping[str, Server[Any]] = field(default_factory=dict)
    """One MCP server per ``[profiles.NAME]``: what its hosts see (``/mcp/NAME``, or
    ``serve --profile NAME`` over stdio)."""

    def server_for(self, profile: str | None) -> Server[Any]:
        """The MCP server of ``profile`` (None: the whole broker); ``ConfigError`` if the
        config has no such profile."""
        if profile is None:
            return self.server
        found = self.profiles.get(profile)
        if found is None:
            known = ", ".join(self.profiles) or "none"
            raise ConfigError(
                f"unknown profile {profile!r}; the config's profiles: {known}", field="profile"
            )
        return found


def build_runtime(config: AppConfig, config_path: Path) -> Runtime:
    """Build the whole broker server from ``config`` (read from ``config_path``, which the
    reloader reads again on SIGHUP or edits). Nothing is started: no connection, no thread."""
    observer = Observer(build_tracer_provider(config.telemetry))
    parts = build_parts(config, store=build_store(config), trace=observer.traced)
    servers = resolve_servers(config, reserved=RESERVED_NAMES)
    problem = unknown_servers(config.profiles, servers)
    if problem is not None:  # servers of an mcp_servers_file are known only now
        raise ConfigError(f"{config_path}: {problem}", field="profiles")
    notifier = HostNotifier()
    # Built even with no server: it costs nothing until a reload gives it its first one.
    gateway = new_gateway(config, parts.catalog, servers, notifier.exposed_changed)
    gateway.resources.lists_changed = notifier.lists_changed
    reloader = ConfigReloader(config_path, parts, gateway)  # before downstream tools arrive
    history = HistoryService(parts.broker, config.history, limits=config.limits)
    gateway_tools = GatewayTools(
        gateway,
        parts.broker,
        history=history,
        notifier=notifier,
        record_max_chars=config.gateway.record_max_chars,
        startup_budget=config.gateway.startup_budget,
        observer=observer,
        relist_selected=config.server.relist_selected,
    )
    code = CodeRunner(gateway_tools, config.code) if config.code.enabled else None
    serving = functools.partial(
        build_server,
        parts.broker,
        version=broker_version(),
        gateway_tools=gateway_tools,
        history=history,
        summarizers=SummarizerFactory(config.history.summarizer),
        models=config.models,
        observer=observer,
        code=code,
    )
    server = serving(tools=config.server.tools)
    profiles = _profile_servers(config, parts, serving)
    fast = fast_path_enabled(config.server.fast_path)
    direct = DirectCalls(gateway_tools) if fast else None
    routes = http_routes(parts, observer, gateway)
    return Runtime(
        config,
        parts,
        observer,
        history,
        gateway,
        gateway_tools,
        code,
        reloader,
        server,
        direct,
        routes,
        profiles,
    )


def _profile_servers(
    config: AppConfig, parts: AppParts, serving: Callable[..., Server[Any]]
) -> dict[str, Server[Any]]:
    """One MCP server per profile, each listing the broker tools the profile chooses (its
    ``broker_tools``, else ``[server] tools``)."""
    out: dict[str, Server[Any]] = {}
    for name, profile in parts.broker.profiles.items():
        chosen: ListedTools | None = config.profiles[name].broker_tools
        out[name] = serving(
            profile=profile, tools=config.server.tools if chosen is None else chosen
        )
    return out


def _has_servers(config: AppConfig) -> bool:
    return bool(config.servers) or config.mcp_servers_file is not None


def build_gateway(
    config: AppConfig,
    catalog: Catalog,
    servers: Mapping[str, DownstreamConfig] | None = None,
    on_exposed_change: ExposedChangeFn | None = None,
    *,
    sign_in: bool = True,
) -> Gateway | None:
    """The downstream gateway (see :func:`new_gateway`), when the config names any server."""
    if not _has_servers(config):
        return None
    return new_gateway(config, catalog, servers, on_exposed_change, sign_in=sign_in)


def new_gateway(
    config: AppConfig,
    catalog: Catalog,
    servers: Mapping[str, DownstreamConfig] | None = None,
    on_exposed_change: ExposedChangeFn | None = None,
    *,
    sign_in: bool = True,
) -> Gateway:
    """The downstream gateway of ``config``'s servers, possibly none; its secret values are
    scrubbed from every log line from here on. ``servers``: the config's servers as
    :func:`resolve_servers` gave them, when the caller already has them; ``sign_in``: whether
    an OAuth sign-in may wait for a person at a browser."""
    g = config.gateway
    settings = GatewaySettings(
        reserved=RESERVED_NAMES,
        backoff_base=g.backoff_base,
        backoff_max=g.backoff_max,
        debounce=g.debounce,
        fast_path=fast_path_enabled(config.server.fast_path),
        tokens=open_tokens(config),
        sign_in=sign_in,
        max_subscriptions_per_host=g.max_subscriptions_per_host,
        max_subscriptions_per_server=g.max_subscriptions_per_server,
        max_result_bytes=config.limits.max_result_bytes,
    )
    gateway = Gateway(
        resolve_servers(config, reserved=RESERVED_NAMES) if servers is None else servers,
        catalog,
        settings=settings,
        gate=ToolGate.from_config(config),  # the pin file and limits every tool list passes
        on_exposed_change=on_exposed_change,
    )
    for handler in logging.getLogger().handlers:
        handler.addFilter(gateway.redactor.filter())
    return gateway
