"""The person's part of the authorization code grant: a browser, and a loopback redirect.

:class:`LoopbackReceiver` opens the authorization URL with Python's :mod:`webbrowser` (so the
``BROWSER`` environment variable is honoured) and receives the redirect on
``http://127.0.0.1:PORT/callback`` with a listener that lives only while it waits. The listener
is bound before the browser starts, so the redirect can never arrive too early.
"""

from __future__ import annotations

import logging
import threading
import webbrowser
from collections.abc import Callable
from contextlib import AbstractContextManager, suppress
from dataclasses import dataclass
from urllib.parse import parse_qs, urlsplit

import anyio
import anyio.abc
from anyio.streams.stapled import MultiListener
from mcp.client.auth import AuthorizationCodeResult, OAuthFlowError

__all__ = ["CALLBACK_PATH", "BrowserPolicy", "LoopbackReceiver", "free_port"]

log = logging.getLogger(__name__)

CALLBACK_PATH = "/callback"
_MAX_REQUEST = 16 * 1024
_PAGE = (
    "<!doctype html><meta charset=utf-8><title>context-broker</title>"
    "<p>{text}</p><p>You can close this window.</p>"
)

HoldFn = Callable[[], AbstractContextManager[None]]
"""Suspends the caller's deadline while a person is at the browser."""


def free_port() -> int:
    """A loopback port that is free now (for a redirect URI chosen before listening)."""
    import socket

    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@dataclass
class BrowserPolicy:
    """Whether a sign-in opens a browser: yes, until one went unanswered (timed out); from
    then on the URL is only logged, until a sign-in succeeds again."""

    unanswered: bool = False


class LoopbackReceiver:
    """Opens the authorization URL and waits for its redirect, at most ``timeout`` seconds."""

    def __init__(
        self,
        server: str,
        port: int,
        *,
        timeout: float,
        hold: HoldFn,
        browser: BrowserPolicy | None = None,
    ) -> None:
        self.server = server
        self.port = port
        self.timeout = timeout
        self._hold = hold
        self._browser = browser or BrowserPolicy()
        self._listener: MultiListener[anyio.abc.SocketStream] | None = None

    @property
    def redirect_uri(self) -> str:
        return f"http://127.0.0.1:{self.port}{CALLBACK_PATH}"

    async def open(self, authorization_url: str) -> None:
        """Listen on the redirect port, then send the browser to ``authorization_url``."""
        if self._listener is None:
            self._listener = await anyio.create_tcp_listener(
                local_host="127.0.0.1", local_port=self.port
            )
        if self._browser.unanswered:  # not a new tab per reconnect while no one answers
            log.warning(
                "to authorize downstream %r, open this URL in a browser (or run "
                "`context-broker auth login %s`): %s",
                self.server,
                self.server,
                authorization_url,
            )
            return
        # webbrowser blocks until a BROWSER command exits; that command may be the one
        # following the redirect to this very listener, so it must not hold the event loop.
        threading.Thread(
            target=_open_browser, args=(self.server, authorization_url), daemon=True
        ).start()

    async def wait(self) -> AuthorizationCodeResult:
        """The code (or the authorization server's error) of the redirect."""
        listener = self._listener
        if listener is None:
            raise OAuthFlowError("no authorization in progress")
        socket = listener.listeners[0]  # one address: 127.0.0.1
        assert isinstance(socket, anyio.abc.SocketListener)
        try:
            with self._hold(), anyio.fail_after(self.timeout):
                while True:
                    result = await _answer_one(socket)
                    if result is not None:
                        self._browser.unanswered = False
                        return result
        except TimeoutError:
            self._browser.unanswered = True
            raise OAuthFlowError(
                f"no authorization of server {self.server!r} within {self.timeout:g}s; sign in "
                f"with `context-broker auth login {self.server}`"
            ) from None
        finally:
            self._listener = None
            await listener.aclose()


def _open_browser(server: str, url: str) -> None:
    try:
        opened = webbrowser.open(url)
    except Exception as exc:  # a broken BROWSER command: the person can still open the URL
        log.debug("webbrowser failed: %r", exc)
        opened = False
    if opened:
        log.info("authorizing downstream %r in the browser", server)
    else:
        log.warning("to authorize downstream %r, open this URL in a browser: %s", server, url)


async def _answer_one(listener: anyio.abc.SocketListener) -> AuthorizationCodeResult | None:
    """Serve one HTTP request; the result when it was the redirect, else None."""
    stream = await listener.accept()
    async with stream:
        head = b""
        with anyio.move_on_after(10):
            while b"\r\n\r\n" not in head and len(head) < _MAX_REQUEST:
                head += await stream.receive()
        target = head.split(b"\r\n", 1)[0].split(b" ")
        path = target[1].decode("latin-1") if len(target) >= 2 else ""
        parts = urlsplit(path)
        if parts.path != CALLBACK_PATH:
            await _respond(stream, 404, "Not found.")
            return None
        query = {k: v[0] for k, v in parse_qs(parts.query).items()}
        if "error" in query:
            await _respond(stream, 400, "The authorization was not granted.")
            detail = query.get("error_description") or query["error"]
            raise OAuthFlowError(f"the authorization server answered: {detail}")
        if "code" not in query:
            await _respond(stream, 400, "The redirect carried no authorization code.")
            return None
        await _respond(stream, 200, "The broker is authorized.")
        return AuthorizationCodeResult(
            code=query["code"], state=query.get("state"), iss=query.get("iss")
        )


async def _respond(stream: anyio.abc.SocketStream, status: int, text: str) -> None:
    body = _PAGE.format(text=text).encode()
    reason = {200: "OK", 400: "Bad Request", 404: "Not Found"}[status]
    head = (
        f"HTTP/1.1 {status} {reason}\r\nContent-Type: text/html; charset=utf-8\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    )
    with suppress(anyio.BrokenResourceError, anyio.ClosedResourceError):
        await stream.send(head.encode() + body)
