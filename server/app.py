"""``context-broker serve``: build the broker once from the config, then serve it over
stdio, Streamable HTTP or legacy SSE."""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

import anyio
from mcp.server import Server

from contextcore.config import BrokerConfig, DownstreamConfig, load_config
from contextcore.errors import ContextCoreError
from contextcore.factory import BrokerParts, build_broker
from contextcore.history_service import HistoryService

from .gateway import Gateway, GatewaySettings, ToolGate, resolve_servers
from .gateway_surface import GatewaySurface
from .http import build_http_app, guard_settings, run_http
from .mcp_server import build_server
from .observability import Observer, http_routes, instrument
from .passthrough import DirectCalls
from .reload import ConfigReloader, serve_with_reload
from .sdk_compat import fast_path_enabled
from .stdio import fast_stdio_server
from .stores import build_store
from .summarizers import SummarizerFactory

__all__ = ["build_store", "serve"]

log = logging.getLogger(__name__)

Transport = Literal["stdio", "http", "sse"]


def _version() -> str:
    from .cli import _version as cli_version

    return cli_version()


async def _serve_stdio(server: Server[Any], direct: DirectCalls | None) -> None:
    async with fast_stdio_server(direct) as (read, write):
        await server.run(read, write, server.create_initialization_options())


async def _with_gateway(gateway: Gateway | None, main: Any, *args: Any) -> None:
    """Run ``main(*args)`` with the downstream connections up (started in the background)."""
    if gateway is None:
        await main(*args)
        return
    async with gateway:
        await main(*args)


def serve(
    config_path: Path,
    *,
    transport: Transport = "stdio",
    host: str | None = None,
    port: int | None = None,
    log_level_given: bool = False,
    insecure: bool = False,
) -> int:
    """Run the server until the client disconnects (stdio) or a signal stops it (HTTP);
    ``insecure`` allows a non-loopback bind with neither a token nor ``allowed_hosts``."""
    config = load_config(config_path)
    if not log_level_given:
        logging.getLogger().setLevel(config.server.log_level)
    fast = fast_path_enabled(config.server.fast_path)
    if not fast:
        log.info("fast path off: every request goes through the MCP SDK's sessions")
    http = config.server.http
    bind_host = host or http.host
    # Before anything starts: an unprotected public bind is refused outright.
    guard = None if transport == "stdio" else guard_settings(http, bind_host, insecure=insecure)
    parts: BrokerParts = build_broker(config, store=build_store(config))
    _log_serving(parts, transport)
    observer = instrument(parts, config.telemetry)
    _load_model_in_background(parts)
    servers = resolve_servers(config)
    gateway = build_gateway(config, parts, servers)
    reloader = ConfigReloader(config_path, parts, gateway)  # before downstream tools arrive
    history = HistoryService(parts.broker, config.history, limits=config.limits)
    downstream = _downstream(gateway, parts, servers, history, observer)
    server = build_server(
        parts.broker,
        version=_version(),
        downstream=downstream,
        history=history,
        summarizers=SummarizerFactory(config.history.summarizer),
        models=config.models,
        observer=observer,
    )
    if transport == "stdio":
        direct = DirectCalls(downstream) if downstream is not None and fast else None
        anyio.run(serve_with_reload, reloader, _with_gateway, gateway, _serve_stdio, server, direct)
        return 0
    assert guard is not None
    app = build_http_app(
        server,
        transport,
        guard,
        session_idle_timeout=http.session_idle_timeout,
        routes=http_routes(parts, observer, gateway),
    )
    bind_port = http.port if port is None else port
    args = (gateway, run_http, app, transport, bind_host, bind_port)
    anyio.run(serve_with_reload, reloader, _with_gateway, *args)
    return 0


def _downstream(
    gateway: Gateway | None,
    parts: BrokerParts,
    servers: Mapping[str, DownstreamConfig],
    history: HistoryService,
    observer: Observer,
) -> GatewaySurface | None:
    if gateway is None:
        return None
    return GatewaySurface(
        gateway,
        parts.broker,
        history=history,
        record={name: cfg.record_calls for name, cfg in servers.items()},
        record_max_chars=parts.config.gateway.record_max_chars,
        startup_budget=parts.config.gateway.startup_budget,
        observer=observer,
    )


def _log_serving(parts: BrokerParts, transport: Transport) -> None:
    counts = parts.catalog.counts()
    log.info(
        "serving %d catalog items (%s) over %s; sessions: %s",
        len(parts.catalog),
        ", ".join(f"{k}: {sum(v.values())}" for k, v in sorted(counts.items())) or "none",
        transport,
        parts.config.persistence.backend,
    )


def _load_model_in_background(parts: BrokerParts) -> None:
    """Load the embedding model while the server starts answering, so the first request does
    not wait for it and a missing model is reported at startup, not at the first search."""
    embedder = parts.embedder
    if embedder is None:
        log.info("semantic search is off (search.semantic = false): lexical search only")
        return

    def load() -> None:
        try:
            embedder.load()
        except ContextCoreError as exc:
            log.warning("SEMANTIC SEARCH UNAVAILABLE, serving with lexical search only: %s", exc)
        else:
            log.info("embedding model %s ready (%s)", embedder.model_name, embedder.status().source)

    threading.Thread(target=load, name="model-load", daemon=True).start()


def build_gateway(
    config: BrokerConfig,
    parts: BrokerParts,
    servers: Mapping[str, DownstreamConfig] | None = None,
) -> Gateway | None:
    """The downstream gateway, when the config names any server; its secret values are
    scrubbed from every log line from here on. ``servers``: the config's servers as
    :func:`resolve_servers` gave them, when the caller already has them."""
    if not config.servers and config.mcp_servers_file is None:
        return None
    g = config.gateway
    settings = GatewaySettings(
        backoff_base=g.backoff_base,
        backoff_max=g.backoff_max,
        debounce=g.debounce,
        fast_path=fast_path_enabled(config.server.fast_path),
    )
    if servers is None:
        servers = resolve_servers(config)
    gate = ToolGate.from_config(config)  # the pin file and limits every tool list passes
    gateway = Gateway(servers, parts.catalog, settings=settings, gate=gate)
    for handler in logging.getLogger().handlers:
        handler.addFilter(gateway.redactor.filter())
    return gateway
