"""The checks in front of every HTTP request: Host and Origin (DNS rebinding), the bearer
token, and the request body size. Rejections carry a JSON-RPC error body that says why."""

from __future__ import annotations

import hmac
import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from urllib.parse import urlsplit

from starlette.datastructures import Headers
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ..ui.login import UiLogin, is_ui_path

__all__ = ["AUTHENTICATED", "LOOPBACK_HOSTS", "GuardSettings", "HttpGuard", "profile_path"]

log = logging.getLogger(__name__)

LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "[::1]")
# Probes a balancer sends without credentials; they say only whether the broker is up.
TOKEN_FREE_PATHS = frozenset({"/healthz", "/readyz"})
AUTHENTICATED = "context_broker.authenticated"
"""Scope key the guard sets on a token-free path: whether the request carried the token
(or none is configured), so the route can keep its details for those that did."""


@dataclass(frozen=True)
class GuardSettings:
    """What the guard enforces. ``allowed_hosts`` entries are ``host`` or ``host:port`` or
    ``host:*``; an empty tuple turns the Host/Origin check off. ``ui_cookie_key`` signs the
    ``/ui`` cookie (None: a random key per process). ``profile_tokens`` holds (token,
    profile) pairs: such a token authenticates too, for that profile's endpoints only."""

    allowed_hosts: tuple[str, ...]
    allowed_origins: tuple[str, ...]
    auth_token: str | None
    max_body_bytes: int
    ui_cookie_key: bytes | None = None
    profile_tokens: tuple[tuple[str, str], ...] = ()
    token_source: str = "server.http.auth_token"
    """Where the token comes from, as a 401 names it."""


def profile_path(path: str, profile: str) -> str | None:
    """Where a request of a host whose token selects ``profile`` goes: the plain MCP
    endpoints become the profile's, its own stay; anything else is not for it (None)."""
    if path in ("/mcp", "/mcp/"):
        return f"/mcp/{profile}"
    if path in ("/sse", "/sse/"):
        return f"/sse/{profile}"
    own = (f"/mcp/{profile}", f"/sse/{profile}")
    return path if path in own or path.startswith(f"/messages/{profile}/") else None


def _split(hostport: str) -> tuple[str, str]:
    """``"[::1]:8080"`` → ``("[::1]", "8080")``; ``"localhost"`` → ``("localhost", "")``."""
    if hostport.startswith("["):
        end = hostport.find("]") + 1
        rest = hostport[end:]
        return hostport[:end], rest[1:] if rest.startswith(":") else rest
    name, _, port = hostport.partition(":")
    return name, port


def host_allowed(host: str, allowed: Sequence[str]) -> bool:
    """Whether a Host header value (or an Origin's host[:port]) matches ``allowed``; a
    pattern without a port, or with ``:*``, allows any port."""
    name, port = _split(host.strip().lower())
    if not name or not (port == "" or port.isdigit()):
        return False
    for pattern in allowed:
        p_name, p_port = _split(pattern.lower())
        if p_name == name and p_port in ("", "*", port):
            return True
    return False


async def _reject(
    send: Send, status: int, message: str, headers: dict[str, str] | None = None
) -> None:
    body = json.dumps(
        {"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": message}}
    ).encode()
    raw = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    raw += [(k.lower().encode(), v.encode()) for k, v in (headers or {}).items()]
    await send({"type": "http.response.start", "status": status, "headers": raw})
    await send({"type": "http.response.body", "body": body})


class HttpGuard:
    """ASGI middleware: 421 for a foreign Host, 403 for a foreign Origin, 401 without the
    bearer token, 413 for a body over the limit; everything else reaches ``app``."""

    def __init__(self, app: ASGIApp, settings: GuardSettings) -> None:
        self.app = app
        self.settings = settings
        # Under /ui a browser may sign in once and show a cookie instead of the header.
        self._login = (
            UiLogin(settings.auth_token, settings.ui_cookie_key)
            if settings.auth_token is not None
            else None
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        path = scope["path"]
        login = self._login if is_ui_path(path) else None
        problem = self._check_headers(
            headers, needs_token=path not in TOKEN_FREE_PATHS and login is None
        )
        if problem is not None:
            await _reject(send, *problem)
            return
        if path in TOKEN_FREE_PATHS:
            scope = {**scope, AUTHENTICATED: self._bearer_ok(headers)}
        elif who := self._who(headers):  # a profile's token: that profile's endpoints only
            routed = profile_path(path, who)
            if routed is None:
                await _reject(send, *self._profile_refused(who))
                return
            scope = {**scope, "path": routed, "raw_path": routed.encode()}
        if scope["method"] in ("POST", "PUT", "PATCH"):
            limited = await self._limited_body(headers, receive, send)
            if limited is None:
                return
            receive = limited
        if login is not None and (
            login.signs_in(scope) or not (self._bearer_ok(headers) or login.has_session(headers))
        ):
            if login.signs_in(scope) or login.is_page(scope):
                await login.answer(scope, receive, send)
            else:
                await _reject(send, *self._token_refused(self.settings.token_source))
            return
        await self.app(scope, receive, send)

    def _check_headers(
        self, headers: Headers, *, needs_token: bool = True
    ) -> tuple[int, str, dict[str, str] | None] | None:
        s = self.settings
        if s.allowed_hosts:
            host = headers.get("host", "")
            if not host_allowed(host, s.allowed_hosts):
                log.warning("rejected a request for Host %r (DNS rebinding protection)", host[:100])
                return (
                    421,
                    (
                        f"Host {host[:100]!r} is not allowed; add it to server.http.allowed_hosts "
                        "if this server should answer to that name"
                    ),
                    None,
                )
            origin = headers.get("origin")
            if origin is not None and not self._origin_allowed(origin):
                log.warning("rejected a request from Origin %r", origin[:100])
                return (
                    403,
                    (
                        f"Origin {origin[:100]!r} is not allowed; add it to "
                        "server.http.allowed_origins to let that web page call this server"
                    ),
                    None,
                )
        if needs_token and self._who(headers) is None:
            return self._token_refused(self.settings.token_source)
        return None

    def _who(self, headers: Headers) -> str | None:
        """Whom the bearer token speaks for: "" for the broker's own token (or anyone, when
        no token is configured), a profile's name for that profile's token, None for a
        missing or wrong token."""
        s = self.settings
        if s.auth_token is None and not s.profile_tokens:
            return ""
        scheme, _, token = headers.get("authorization", "").partition(" ")
        if scheme.lower() != "bearer":
            return None
        given = token.strip().encode()
        if s.auth_token is not None and hmac.compare_digest(given, s.auth_token.encode()):
            return ""
        for secret, profile in s.profile_tokens:
            if hmac.compare_digest(given, secret.encode()):
                return profile
        return None

    def _bearer_ok(self, headers: Headers) -> bool:
        """Whether the request carries the broker's own token (or none is configured)."""
        return self._who(headers) == ""

    @staticmethod
    def _profile_refused(profile: str) -> tuple[int, str, dict[str, str] | None]:
        return (
            403,
            f"this bearer token selects profile {profile!r}: it reaches /mcp and /mcp/"
            f"{profile} (or /sse and /sse/{profile}) only",
            None,
        )

    @staticmethod
    def _token_refused(source: str) -> tuple[int, str, dict[str, str]]:
        return (
            401,
            (
                "missing or wrong bearer token; send 'Authorization: Bearer <token>' with "
                f"the token configured in {source} (a browser: open /ui/?token=...)"
            ),
            {"WWW-Authenticate": 'Bearer realm="context-broker"'},
        )

    def _origin_allowed(self, origin: str) -> bool:
        if origin in self.settings.allowed_origins:
            return True
        if any(
            p.endswith(":*") and origin.startswith(p[:-1]) and origin[len(p) - 1 :].isdigit()
            for p in self.settings.allowed_origins
        ):
            return True
        parts = urlsplit(origin)
        return parts.scheme in ("http", "https") and host_allowed(
            parts.netloc, self.settings.allowed_hosts
        )

    async def _limited_body(self, headers: Headers, receive: Receive, send: Send) -> Receive | None:
        """Read the whole body (bounded) and replay it; None when a 413 was sent."""
        limit = self.settings.max_body_bytes
        declared = headers.get("content-length", "")
        size = int(declared) if declared.isdigit() else 0
        body = bytearray()
        more = True
        trailing: list[Message] = []
        while more and size <= limit:
            message = await receive()
            if message["type"] != "http.request":
                trailing.append(message)
                break
            body += message.get("body", b"")
            size = max(size, len(body))
            more = bool(message.get("more_body", False))
        if size > limit:
            await _reject(
                send,
                413,
                f"request body of {size} bytes exceeds the limit of {limit} bytes "
                "(server.http.max_body_bytes); send a smaller request",
            )
            return None
        queue: list[Message] = [{"type": "http.request", "body": bytes(body), "more_body": False}]
        queue += trailing

        async def replay() -> Message:
            return queue.pop(0) if queue else await receive()

        return replay
