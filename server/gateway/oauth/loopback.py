"""The person's part of the authorization code grant: a browser, and a loopback redirect.

:class:`LoopbackReceiver` opens the authorization URL with Python's :mod:`webbrowser` (so the
``BROWSER`` environment variable is honoured) and receives the redirect on
``http://127.0.0.1:PORT/callback`` with a listener that lives only while it waits. The listener
is bound before the browser starts, so the redirect can never arrive too early.

Any local process can connect to that port, so only a redirect carrying the ``state`` of the
sign-in in progress (its code or its error) ends the wait; every other connection (one closing
without a request, a callback with no or another ``state``) is answered, or dropped, and the
wait goes on. Connections are served side by side, so one that sends nothing holds up none.
"""

from __future__ import annotations

import logging
import secrets
import threading
import webbrowser
from collections.abc import Callable
from contextlib import AbstractContextManager, suppress
from dataclasses import dataclass
from urllib.parse import parse_qs, urlsplit

import anyio
import anyio.abc
from anyio.streams.stapled import MultiListener
from context_broker.server.version import broker_program
from mcp.client.auth import AuthorizationCodeResult, OAuthFlowError

__all__ = ["CALLBACK_PATH", "BrowserPolicy", "LoopbackReceiver", "free_port"]

log = logging.getLogger(__name__)

CALLBACK_PATH = "/callback"
_MAX_REQUEST = 16 * 1024
_READ_TIMEOUT = 10.0  # seconds one connection may take to send its request
_MAX_CONNECTIONS = 16  # served at once; further ones wait to be accepted
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
        self._state: str | None = None  # of the sign-in in progress

    @property
    def redirect_uri(self) -> str:
        return f"http://127.0.0.1:{self.port}{CALLBACK_PATH}"

    async def open(self, authorization_url: str) -> None:
        """Listen on the redirect port, then send the browser to ``authorization_url``."""
        self._state = _state_of(authorization_url)
        if self._listener is None:
            self._listener = await anyio.create_tcp_listener(
                local_host="127.0.0.1", local_port=self.port
            )
        if self._browser.unanswered:  # not a new tab per reconnect while no one answers
            log.warning(
                "to authorize downstream %r, open this URL in a browser (or run "
                "`%s auth login %s`): %s",
                self.server,
                broker_program(),
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
        """The code (or the authorization server's error) of the redirect that carries the
        sign-in's ``state``."""
        listener, state = self._listener, self._state
        if listener is None:
            raise OAuthFlowError("no authorization in progress")
        socket = listener.listeners[0]  # one address: 127.0.0.1
        assert isinstance(socket, anyio.abc.SocketListener)
        try:
            if state is None:  # nothing could tell its redirect from another one
                raise OAuthFlowError("the authorization URL carries no state")
            with self._hold(), anyio.fail_after(self.timeout):
                result = await _receive(socket, state)
            self._browser.unanswered = False
            return result
        except TimeoutError:
            self._browser.unanswered = True
            raise OAuthFlowError(
                f"no authorization of server {self.server!r} within {self.timeout:g}s; sign in "
                f"with `{broker_program()} auth login {self.server}`"
            ) from None
        finally:
            self._listener = self._state = None
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


def _state_of(authorization_url: str) -> str | None:
    """The ``state`` parameter of an authorization URL (the SDK always sets one)."""
    values = parse_qs(urlsplit(authorization_url).query).get("state")
    return values[0] if values else None


async def _receive(listener: anyio.abc.SocketListener, state: str) -> AuthorizationCodeResult:
    """Serve connections side by side until one brings the redirect with ``state``: its code,
    or ``OAuthFlowError`` for the authorization server's error."""
    outcome: list[AuthorizationCodeResult | OAuthFlowError] = []
    slots = anyio.Semaphore(_MAX_CONNECTIONS)

    async with anyio.create_task_group() as group:

        async def serve(stream: anyio.abc.SocketStream) -> None:
            result: AuthorizationCodeResult | OAuthFlowError | None
            try:
                result = await _answer_one(stream, state)
            except OAuthFlowError as exc:
                result = exc
            except Exception as exc:  # whatever a local client sends must not end the wait
                log.debug("loopback redirect: a connection failed: %r", exc)
                result = None
            finally:
                slots.release()
            if result is not None and not outcome:
                outcome.append(result)
                group.cancel_scope.cancel()

        while True:
            await slots.acquire()
            group.start_soon(serve, await listener.accept())
    if isinstance(outcome[0], OAuthFlowError):
        raise outcome[0]
    return outcome[0]


async def _answer_one(stream: anyio.abc.SocketStream, state: str) -> AuthorizationCodeResult | None:
    """Serve one HTTP request; the result when it was the redirect with ``state``, else None
    (a connection that closes, stalls or asks for anything else changes nothing)."""
    async with stream:
        head = b""
        with anyio.move_on_after(_READ_TIMEOUT):
            try:
                while b"\r\n\r\n" not in head and len(head) < _MAX_REQUEST:
                    head += await stream.receive()
            except (anyio.EndOfStream, anyio.BrokenResourceError, anyio.ClosedResourceError):
                return None
        target = head.split(b"\r\n", 1)[0].split(b" ")
        path = target[1].decode("latin-1") if len(target) >= 2 else ""
        parts = urlsplit(path)
        if parts.path != CALLBACK_PATH:
            await _respond(stream, 404, "Not found.")
            return None
        query = {k: v[0] for k, v in parse_qs(parts.query).items()}
        if not secrets.compare_digest(query.get("state", "").encode(), state.encode()):
            await _respond(stream, 400, "This redirect is not the sign-in in progress.")
            return None
        if "error" in query:
            await _respond(stream, 400, "The authorization was not granted.")
            detail = query.get("error_description") or query["error"]
            raise OAuthFlowError(f"the authorization server answered: {detail}")
        if "code" not in query:
            await _respond(stream, 400, "The redirect carried no authorization code.")
            return None
        await _respond(stream, 200, "The broker is authorized.")
        return AuthorizationCodeResult(code=query["code"], state=state, iss=query.get("iss"))


async def _respond(stream: anyio.abc.SocketStream, status: int, text: str) -> None:
    body = _PAGE.format(text=text).encode()
    reason = {200: "OK", 400: "Bad Request", 404: "Not Found"}[status]
    head = (
        f"HTTP/1.1 {status} {reason}\r\nContent-Type: text/html; charset=utf-8\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    )
    with suppress(anyio.BrokenResourceError, anyio.ClosedResourceError):
        await stream.send(head.encode() + body)
