"""``context-broker serve``: build the broker once from the config, then serve it over
stdio, Streamable HTTP or legacy SSE."""

from __future__ import annotations

import logging
import os
import threading
from pathlib import Path
from typing import Any, Literal

import anyio
from mcp.server import Server

from contextcore.config import ListedTools
from contextcore.errors import ConfigError, ContextCoreError

from .gateway import Gateway
from .host.code_mode import CodeRunner
from .parts import AppParts
from .reload import serve_with_reload
from .runtime import Runtime, build_runtime
from .settings import load_config
from .transport.http import build_http_app, guard_settings, run_http
from .transport.passthrough import DirectCalls
from .transport.stdio import fast_stdio_server
from .wire.sdk_compat import fast_path_enabled

__all__ = ["serve"]

log = logging.getLogger(__name__)

Transport = Literal["stdio", "http", "sse"]
_LOAD_GRACE = 60.0  # seconds a model load may take to finish after serving ended


async def _serve_stdio(server: Server[Any], direct: DirectCalls | None) -> None:
    async with fast_stdio_server(direct) as (read, write):
        await server.run(read, write, server.create_initialization_options())


async def _with_gateway(gateway: Gateway, code: CodeRunner | None, main: Any, *args: Any) -> None:
    """Run ``main(*args)`` with the downstream connections up (started in the background;
    with no server configured, the gateway only waits for a reload to add some), then stop
    code mode's sandbox workers."""
    async with gateway:
        try:
            await main(*args)
        finally:
            if code is not None:
                await code.aclose()


def serve(
    config_path: Path,
    *,
    transport: Transport = "stdio",
    host: str | None = None,
    port: int | None = None,
    log_level_given: bool = False,
    insecure: bool = False,
    profile: str | None = None,
    tools: ListedTools | None = None,
) -> int:
    """Run the server until the client disconnects (stdio) or a signal stops it (HTTP);
    ``insecure`` allows a non-loopback bind without a bearer token. Over stdio, ``profile``
    limits the host to that profile (``ConfigError`` if the config has none such).
    ``tools`` replaces the config's ``[server] tools``."""
    config = load_config(config_path)
    if tools is not None:  # serve --tools
        config = config.model_copy(
            update={"server": config.server.model_copy(update={"tools": tools})}
        )
    if not log_level_given:
        logging.getLogger().setLevel(config.server.log_level)
    if not fast_path_enabled(config.server.fast_path):
        log.info("fast path off: every request goes through the MCP SDK's sessions")
    http = config.server.http
    bind_host = host or http.host
    # Before anything starts: an unprotected public bind is refused outright.
    if profile is not None and transport != "stdio":
        raise ConfigError(
            "--profile selects a profile over stdio; over HTTP a host picks one by its URL "
            "(/mcp/NAME or /sse/NAME) or by a token of the profile's token_env"
        )
    if profile is not None and profile not in config.profiles:
        known = ", ".join(config.profiles) or "none"
        raise ConfigError(f"unknown profile {profile!r} (--profile); the config's: {known}")
    guard = None
    if transport != "stdio":
        guard = guard_settings(http, bind_host, insecure=insecure, profiles=config.profiles)
    runtime = build_runtime(config, config_path)
    _log_serving(runtime.parts, transport)
    loader = _load_model_in_background(runtime.parts)
    try:
        if transport == "stdio":
            # The pass-through answers calls without the MCP server: not for a profile's host.
            direct = runtime.direct if profile is None else None
            _run(runtime, _serve_stdio, runtime.server_for(profile), direct)
            return 0
        assert guard is not None
        app = build_http_app(
            runtime.server,
            transport,
            guard,
            session_idle_timeout=http.session_idle_timeout,
            routes=runtime.routes,
            profiles=runtime.profiles,
        )
        _run(runtime, run_http, app, transport, bind_host, http.port if port is None else port)
        return 0
    finally:
        _let_model_load_finish(loader)


def _run(runtime: Runtime, main: Any, *args: Any) -> None:
    """Run a transport's ``main(*args)`` with the gateway up and the config reloadable."""
    anyio.run(
        serve_with_reload,
        runtime.reloader,
        _with_gateway,
        runtime.gateway,
        runtime.code,
        main,
        *args,
    )


def _log_serving(parts: AppParts, transport: Transport) -> None:
    counts = parts.catalog.counts()
    log.info(
        "serving %d catalog items (%s) over %s; sessions: %s",
        len(parts.catalog),
        ", ".join(f"{k}: {sum(v.values())}" for k, v in sorted(counts.items())) or "none",
        transport,
        parts.config.persistence.backend,
    )


def _load_model_in_background(parts: AppParts) -> threading.Thread | None:
    """Load the embedding model while the server starts answering, so the first request does
    not wait for it and a missing model is reported at startup, not at the first search."""
    embedder = parts.embedder
    if embedder is None:
        log.info("semantic search is off (search.semantic = false): lexical search only")
        return None

    def load() -> None:
        try:
            embedder.load()
        except ContextCoreError as exc:
            log.warning("SEMANTIC SEARCH UNAVAILABLE, serving with lexical search only: %s", exc)
        else:
            log.info("embedding model %s ready (%s)", embedder.model_name, embedder.status().source)

    loader = threading.Thread(target=load, name="model-load", daemon=True)
    loader.start()
    return loader


def _let_model_load_finish(loader: threading.Thread | None) -> None:
    """Wait for a model load still running when serving ends (the host closed the input
    during startup): at interpreter exit its thread would be stopped inside onnxruntime's
    C++ code, which aborts the process (SIGABRT) instead of exiting cleanly."""
    if loader is None or not loader.is_alive():
        return
    log.info("waiting for the embedding model to finish loading before exiting")
    loader.join(_LOAD_GRACE)
    if loader.is_alive():  # a load that hangs: leave without running the interpreter's exit
        log.warning("the embedding model is still loading after %gs; exiting now", _LOAD_GRACE)
        logging.shutdown()
        os._exit(0)
