"""Signing a browser in to the ``/ui/`` pages of a broker that has a bearer token: a plain
browser cannot send ``Authorization``, so ``GET /ui/?token=...`` (or the login form, which
posts to ``/ui/login``) sets a cookie for ``/ui`` only. The cookie holds an HMAC of the token
under a key drawn at startup, never the token itself; a restart signs every browser out. Replicas
behind one balancer share a key instead (``server.http.ui_cookie_key_env``), so a browser signed
in on one is signed in on all. ``/mcp`` and the other routes keep requiring the header."""

from __future__ import annotations

import hashlib
import hmac
import secrets
from http.cookies import CookieError, SimpleCookie
from urllib.parse import parse_qs

from starlette.datastructures import Headers
from starlette.types import Receive, Scope, Send

from .charts import esc

__all__ = ["COOKIE", "UiLogin", "is_ui_path"]

COOKIE = "context_broker_ui"
_LOGIN_PATH = "/ui/login"
_PAGE_PATHS = ("/ui", "/ui/")
_LOGIN_CSP = (
    "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; base-uri 'none'; "
    "frame-ancestors 'none'"
)
_STYLE = (
    "body{font:14px/1.45 system-ui,sans-serif;margin:48px auto;max-width:460px;color:#1f2328}"
    "input{font:inherit;padding:6px 8px;width:100%;box-sizing:border-box;margin:6px 0 12px}"
    "button{font:inherit;padding:6px 14px}.error{color:#cf222e}"
)


def is_ui_path(path: str) -> bool:
    """Whether a request path belongs to the ``/ui/`` pages (where the cookie counts)."""
    return path == "/ui" or path.startswith("/ui/")


def _is_page(scope: Scope) -> bool:
    return bool(scope["path"] in _PAGE_PATHS and scope["method"] in ("GET", "HEAD"))


def _login_page(problem: str | None) -> bytes:
    note = f'<p class="error" role="alert">{esc(problem)}</p>' if problem else ""
    return (
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
        f"<title>Context broker: sign in</title><style>{_STYLE}</style></head><body>"
        "<h1>Context broker</h1>"
        "<p>This broker needs its bearer token (<code>server.http.auth_token</code> or the "
        "variable named by <code>auth_token_env</code>) to show its pages.</p>"
        f'{note}<form method="post" action="{_LOGIN_PATH}">'
        '<label for="token">Token</label>'
        '<input id="token" name="token" type="password" autocomplete="current-password" '
        'required autofocus><button type="submit">Sign in</button></form></body></html>'
    ).encode()


class UiLogin:
    """The ``/ui`` session of one guarded server: checks the cookie and answers the sign-in
    requests. ``key`` is drawn at random when not given."""

    def __init__(self, token: str, key: bytes | None = None) -> None:
        self._token = token.encode()
        digest = hmac.new(key or secrets.token_bytes(32), self._token, hashlib.sha256)
        self._session = digest.hexdigest()

    def token_ok(self, given: str) -> bool:
        """Whether ``given`` is the bearer token (in constant time)."""
        return hmac.compare_digest(given.strip().encode(), self._token)

    def has_session(self, headers: Headers) -> bool:
        """Whether the request carries this server's ``/ui`` session cookie."""
        cookies = SimpleCookie()
        try:
            cookies.load(headers.get("cookie", ""))
        except CookieError:
            return False
        morsel = cookies.get(COOKIE)
        return morsel is not None and hmac.compare_digest(morsel.value, self._session)

    @staticmethod
    def signs_in(scope: Scope) -> bool:
        """Whether the request is a sign-in: the form's POST, or a page opened with
        ``?token=`` (answered here even with a valid session, so the token leaves the URL)."""
        if scope["path"] == _LOGIN_PATH:
            return bool(scope["method"] == "POST")
        query = parse_qs(scope.get("query_string", b"").decode("latin-1"))
        return _is_page(scope) and "token" in query

    @staticmethod
    def is_page(scope: Scope) -> bool:
        """Whether the request opens the pages (the login page answers it without
        credentials, instead of a bare 401)."""
        return _is_page(scope)

    async def answer(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Sign in (303 to ``/ui/`` with the cookie) when the request carries the right
        token, else the login page with 401 (naming a wrong token)."""
        given: list[str] | None
        if scope["path"] == _LOGIN_PATH:
            body = b""
            more = True
            while more:
                message = await receive()
                body += message.get("body", b"")
                more = bool(message.get("more_body", False))
            given = parse_qs(body.decode("utf-8", "replace")).get("token", [""])
        else:
            given = parse_qs(scope.get("query_string", b"").decode("latin-1")).get("token")
        if given is not None and self.token_ok(given[0]):
            await self._signed_in(scope, send)
            return
        problem = "That token is not right; paste the broker's bearer token." if given else None
        await _send(
            send,
            401,
            _login_page(problem),
            [
                (b"content-type", b"text/html; charset=utf-8"),
                (b"www-authenticate", b'Bearer realm="context-broker"'),
            ],
        )

    async def _signed_in(self, scope: Scope, send: Send) -> None:
        secure = "; Secure" if scope.get("scheme") == "https" else ""
        cookie = f"{COOKIE}={self._session}; Path=/ui; HttpOnly; SameSite=Strict{secure}"
        await _send(send, 303, b"", [(b"location", b"/ui/"), (b"set-cookie", cookie.encode())])


async def _send(send: Send, status: int, body: bytes, headers: list[tuple[bytes, bytes]]) -> None:
    raw = [
        *headers,
        (b"content-length", str(len(body)).encode()),
        (b"cache-control", b"no-store"),
        (b"content-security-policy", _LOGIN_CSP.encode()),
        # Not "no-referrer": Chromium then posts the form with ``Origin: null``.
        (b"referrer-policy", b"same-origin"),
    ]
    await send({"type": "http.response.start", "status": status, "headers": raw})
    await send({"type": "http.response.body", "body": body})
