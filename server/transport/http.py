"""The HTTP transports: Streamable HTTP at ``/mcp`` and legacy SSE at ``/sse`` (messages at
``/messages/``), each profile's at ``/mcp/NAME`` and ``/sse/NAME`` (messages at
``/messages/NAME/``), behind ``HttpGuard``, served by uvicorn on a socket bound here."""

from __future__ import annotations

import contextlib
import ipaddress
import logging
import os
import socket
from collections.abc import AsyncIterator, Mapping
from typing import Any, Literal

import uvicorn
from context_broker.server.settings import HttpConfig
from mcp.server import Server
from mcp.server.sse import SseServerTransport
from mcp.server.transport_security import TransportSecuritySettings
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import BaseRoute, Mount, Route
from starlette.types import ASGIApp, Receive, Scope, Send

from contextcore.config import ProfileConfig
from contextcore.errors import ConfigError

from .http_guard import LOOPBACK_HOSTS, GuardSettings, HttpGuard

__all__ = ["HttpTransport", "build_http_app", "guard_settings", "run_http"]

log = logging.getLogger(__name__)

HttpTransport = Literal["http", "sse"]
MCP_PATH = "/mcp"
SSE_PATH = "/sse"
MESSAGES_PATH = "/messages/"
_WILDCARD_BINDS = ("0.0.0.0", "::", "")


def _auth_token(http: HttpConfig, environ: os._Environ[str] | dict[str, str]) -> str | None:
    if http.auth_token_env:
        token = environ.get(http.auth_token_env, "")
        if not token:
            # Fail closed: a configured but empty token must not mean "no auth".
            raise ConfigError(
                f"server.http.auth_token_env names {http.auth_token_env!r}, but that "
                "environment variable is not set or empty; set it or remove auth_token_env",
                field="server.http.auth_token_env",
            )
        return token
    return http.auth_token or None


def _profile_tokens(
    profiles: Mapping[str, ProfileConfig],
    environ: os._Environ[str] | dict[str, str],
    own: str | None,
) -> tuple[tuple[str, str], ...]:
    """(token, profile) for every variable a profile's ``token_env`` names; each token must
    differ from the others and from the broker's ``own``."""
    pairs = []
    for name, profile in profiles.items():
        for variable in profile.token_env:
            token = environ.get(variable, "")
            if not token:  # fail closed, as auth_token_env does
                raise ConfigError(
                    f"profiles.{name}.token_env names {variable!r}, but that environment "
                    "variable is not set or empty; set it or remove it from token_env",
                    field=f"profiles.{name}.token_env",
                )
            pairs.append((token, name))
    tokens = [t for t, _ in pairs] + ([own] if own is not None else [])
    if len(set(tokens)) != len(tokens):
        raise ConfigError(
            "two profiles' token_env variables, or one and server.http.auth_token, hold the "
            "same token; give each profile its own",
            field="profiles",
        )
    return tuple(pairs)


MIN_COOKIE_KEY_CHARS = 32


def _cookie_key(http: HttpConfig, environ: os._Environ[str] | dict[str, str]) -> bytes | None:
    """The ``/ui`` cookie key from the variable ``ui_cookie_key_env`` names (None: a random
    key per process)."""
    name = http.ui_cookie_key_env
    if not name:
        return None
    key = environ.get(name, "")
    if len(key) < MIN_COOKIE_KEY_CHARS:
        # Fail closed: a short or missing shared key must not quietly sign cookies.
        raise ConfigError(
            f"server.http.ui_cookie_key_env names {name!r}, but that environment variable "
            f"is {'shorter than that' if key else 'not set'}; set it to a random key of "
            f"{MIN_COOKIE_KEY_CHARS} or more characters (the same on every replica) or remove "
            "ui_cookie_key_env",
            field="server.http.ui_cookie_key_env",
        )
    return key.encode()


def _is_loopback(host: str) -> bool:
    if host.strip("[]").lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def guard_settings(
    http: HttpConfig,
    host: str,
    environ: os._Environ[str] | dict[str, str] | None = None,
    *,
    insecure: bool = False,
    profiles: Mapping[str, ProfileConfig] | None = None,
) -> GuardSettings:
    """What the guard enforces for a server bound to ``host``: loopback names always, the
    bind address itself, and the configured hosts. Bound to every interface with no
    ``allowed_hosts``, the Host check is off (and a warning says so).

    Bound to a non-loopback address, the server needs a bearer token; without one it refuses
    to start (``ConfigError``) unless ``insecure`` is set. ``allowed_hosts`` does not count:
    it guards browsers against DNS rebinding, and any other client can send any Host header.
    A token of a profile's ``token_env`` counts: with one, every request needs a token.
    """
    environ = os.environ if environ is None else environ
    token = _auth_token(http, environ)
    cookie_key = _cookie_key(http, environ)
    selecting = _profile_tokens(profiles or {}, environ, token)
    if not _is_loopback(host) and token is None and not selecting:
        if not insecure:
            raise ConfigError(
                f"refusing to listen on {host!r} without server.http.auth_token_env (or "
                "auth_token): anyone who can reach that address could use the broker and its "
                "downstream servers, whatever allowed_hosts says; set a bearer token, or pass "
                "--insecure to serve unauthenticated on purpose",
                field="server.http.auth_token_env",
            )
        log.warning(
            "--insecure: listening on %r with NO AUTHENTICATION; anyone who can reach this "
            "address can call every downstream tool",
            host,
        )
    allowed = [*http.allowed_hosts]
    if host in _WILDCARD_BINDS:
        if not allowed:
            log.warning(
                "bound to %r with no server.http.allowed_hosts: Host/Origin validation is OFF; "
                "list the names clients use to reach this server",
                host,
            )
            return GuardSettings(
                (), (), token, http.max_body_bytes, cookie_key, selecting, _token_source(http)
            )
    else:
        allowed.append(f"[{host}]" if ":" in host else host)
    allowed += LOOPBACK_HOSTS
    return GuardSettings(
        tuple(dict.fromkeys(allowed)),
        http.allowed_origins,
        token,
        http.max_body_bytes,
        cookie_key,
        selecting,
        _token_source(http),
    )


def _token_source(http: HttpConfig) -> str:
    """Where the bearer token is set, as a refused request is told."""
    if http.auth_token_env:
        return f"the environment variable {http.auth_token_env} (server.http.auth_token_env)"
    return "server.http.auth_token"


class _SseEndpoint:
    """``GET /sse``: one MCP connection per event stream."""

    def __init__(self, server: Server[Any], transport: SseServerTransport) -> None:
        self.server = server
        self.transport = transport

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        async with self.transport.connect_sse(scope, receive, send) as (read, write):
            await self.server.run(read, write, self.server.create_initialization_options())


def build_http_app(
    server: Server[Any],
    transport: HttpTransport,
    guard: GuardSettings,
    *,
    session_idle_timeout: float = 300.0,
    routes: list[BaseRoute] | None = None,
    profiles: Mapping[str, Server[Any]] | None = None,
) -> ASGIApp:
    """The ASGI app for one HTTP transport, wrapped in the guard. A Streamable HTTP session
    with no request in flight for ``session_idle_timeout`` seconds is closed (its id then
    answers 404, so the client starts a new one). ``routes`` (health, metrics, ``/ui/``)
    are served beside the transport, behind the same guard. Each of ``profiles`` (one MCP
    server per profile) is served at ``/mcp/NAME`` (``/sse/NAME``); another name answers
    404 saying which profiles there are."""
    named = dict(profiles or {})
    # Profiles first: the plain /messages/ mount would take /messages/NAME/ too.
    apps = [
        _endpoint_app(s, transport, f"/{name}", guard, session_idle_timeout)
        for name, s in named.items()
    ]
    apps.append(_endpoint_app(server, transport, "", guard, session_idle_timeout))
    unknown = _UnknownProfile(tuple(named))
    app = Starlette(
        routes=[
            *(route for sub in apps for route in sub.router.routes),
            Route(MCP_PATH + "/{name}", endpoint=unknown.answer, methods=["GET", "POST", "DELETE"]),
            Route(SSE_PATH + "/{name}", endpoint=unknown.answer, methods=["GET"]),
            *(routes or []),
        ],
        lifespan=_lifespans(apps),
    )
    return HttpGuard(app, guard)


def _endpoint_app(
    server: Server[Any],
    transport: HttpTransport,
    suffix: str,
    guard: GuardSettings,
    session_idle_timeout: float,
) -> Starlette:
    """One MCP server's endpoint (``/mcp`` or ``/sse`` with ``suffix``), as its own app."""
    # The guard already checks Host and Origin more precisely; the SDK's own check would
    # reject a port-less Host such as plain "localhost".
    security = TransportSecuritySettings(enable_dns_rebinding_protection=False)
    if transport == "http":
        return server.streamable_http_app(
            streamable_http_path=MCP_PATH + suffix,
            max_request_body_size=guard.max_body_bytes,
            transport_security=security,
            session_idle_timeout=session_idle_timeout,
        )
    messages = f"/messages{suffix}/"
    sse = SseServerTransport(
        messages, security_settings=security, max_request_body_size=guard.max_body_bytes
    )
    return Starlette(
        routes=[
            Route(SSE_PATH + suffix, endpoint=_SseEndpoint(server, sse), methods=["GET"]),
            Mount(messages, app=sse.handle_post_message),
        ]
    )


def _lifespans(apps: list[Starlette]) -> Any:
    """One lifespan running every endpoint app's (their session managers)."""

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        async with contextlib.AsyncExitStack() as stack:
            for sub in apps:
                await stack.enter_async_context(sub.router.lifespan_context(sub))
            yield

    return lifespan


class _UnknownProfile:
    """``/mcp/NAME`` of a profile the config does not have: 404 naming the ones it has."""

    def __init__(self, names: tuple[str, ...]) -> None:
        self.names = names

    async def answer(self, request: Request) -> JSONResponse:
        name = request.path_params["name"][:100]
        known = ", ".join(self.names) if self.names else "none"
        message = (
            f"unknown profile {name!r}; this broker's profiles: {known} (served at "
            f"{MCP_PATH}/NAME); {MCP_PATH} serves every server and item"
        )
        error = {"code": -32600, "message": message}
        return JSONResponse({"jsonrpc": "2.0", "id": None, "error": error}, status_code=404)


def _bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise ConfigError(
            f"cannot listen on {host}:{port}: {exc.strerror}; choose another --port",
            field="server.http.port",
        ) from exc
    sock.listen(128)
    sock.set_inheritable(True)
    return sock


async def run_http(app: ASGIApp, transport: HttpTransport, host: str, port: int) -> None:
    """Serve ``app`` until SIGINT/SIGTERM; logs (to stderr) the URL actually listened on, so
    ``--port 0`` picks a free port."""
    sock = _bind(host, port)
    actual = sock.getsockname()[1]
    shown = f"[{host}]" if ":" in host else host
    path = MCP_PATH if transport == "http" else SSE_PATH
    config = uvicorn.Config(
        app,
        log_config=None,  # uvicorn's default config logs access lines to stdout
        access_log=False,
        lifespan="on",
        timeout_graceful_shutdown=3,
    )
    log.info("context broker listening on http://%s:%d%s", shown, actual, path)
    log.info(
        "pages for a browser: http://%s:%d/ui/ (with a bearer token, open "
        "http://%s:%d/ui/?token=<token> once to sign in)",
        shown,
        actual,
        shown,
        actual,
    )
    await uvicorn.Server(config).serve(sockets=[sock])
