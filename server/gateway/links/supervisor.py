"""Keeps one downstream server connected: connect, serve, refresh, reconnect with backoff.

Each server runs in its own task with its own ``AsyncExitStack``, so a server that crashes,
hangs or is misconfigured only ever changes its own state. The connect phase (spawn or HTTP
connect, ``initialize``, ``tools/list``) is bounded by the server's ``timeout`` through a
cancel scope whose deadline is lifted once the server answered.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Awaitable, Callable, Coroutine, Iterator, Mapping
from contextlib import AsyncExitStack
from typing import Any

import anyio
import httpx2
import mcp_types as types
from context_broker.server.settings import DownstreamConfig

from ..errors import GatewayError
from ..models import GatewaySettings
from ..oauth.client import build_auth, paused
from ..oauth.loopback import BrowserPolicy
from ..oauth.store import TokenFile, TokenStore
from ..server_state import ServerState
from ..servers_file import DEPTH_ENV, broker_depth
from ..trust.secrets import Redactor, expand_server
from .connection import Connection, open_connection
from .transports import read_tail, spool_stderr

__all__ = ["Supervisor"]

log = logging.getLogger(__name__)

ToolsFn = Callable[[ServerState, list[types.Tool], Connection], None]
NoticeFn = Callable[[str, types.ServerNotification], Awaitable[None]]
ServingFn = Callable[[str, Connection], Coroutine[Any, Any, None]]
_PASSED_ON = (
    types.ResourceUpdatedNotification,
    types.ResourceListChangedNotification,
    types.PromptListChangedNotification,
)


class Supervisor:
    """Runs one server's connect → serve → reconnect loop; reports through callbacks.

    ``on_tools(server, tools, connection)`` is called after every successful listing (the
    gateway updates the catalog and marks the server connected); ``on_notice(server name,
    notification)`` gets the server's ``resources/updated`` and its resource and prompt
    list changes, to pass on to hosts; ``on_serving(server name, connection)`` runs beside
    each new connection (subscriptions are made again on it).
    """

    def __init__(
        self,
        server: ServerState,
        *,
        settings: GatewaySettings,
        redactor: Redactor,
        environ: Mapping[str, str],
        on_tools: ToolsFn,
        on_notice: NoticeFn | None = None,
        on_serving: ServingFn | None = None,
        on_state: Callable[[], None] | None = None,
    ) -> None:
        self.server = server
        self.on_state = on_state
        self.on_notice = on_notice
        self.on_serving = on_serving
        self.settings = settings
        self.redactor = redactor
        self.environ = environ
        self.on_tools = on_tools
        self.tokens = settings.tokens or TokenStore(TokenFile(None))
        self._browser = BrowserPolicy()

    def _set(self, **changes: Any) -> None:
        for key, value in changes.items():
            setattr(self.server, key, value)
        if self.on_state is not None and ("state" in changes or "last_error" in changes):
            self.on_state()

    async def run(self) -> None:
        try:
            config, secrets = expand_server(self.server.name, self.server.config, self.environ)
        except GatewayError as exc:
            self._set(state="failed", last_error=exc.message)
            self.server.first_attempt_done.set()
            return
        self.redactor.add(secrets)
        if config.kind == "stdio":
            marker = {DEPTH_ENV: str(broker_depth(self.environ) + 1)}
            config = config.model_copy(update={"env": {**config.env, **marker}})
        attempt = 0
        while True:
            if await self._session_once(config):
                attempt = 0  # a session that worked starts the backoff over
            self.server.first_attempt_done.set()
            delay = self.settings.backoff(attempt)
            attempt += 1
            self._set(state="reconnecting", connection=None)
            log.info("downstream %r: reconnecting in %.2fs", self.server.name, delay)
            await anyio.sleep(delay)
            self.server.reconnects += 1

    async def _session_once(self, config: DownstreamConfig) -> bool:
        """Connect, serve until the transport ends; True if the connection was established."""
        connected = False
        tail = ""
        with anyio.CancelScope(deadline=anyio.current_time() + config.timeout) as scope:
            try:
                async with AsyncExitStack() as stack:
                    stderr = spool_stderr(stack, self.server.name, config)
                    try:
                        auth = self._auth(config, scope)
                        conn = await open_connection(
                            stack,
                            self.server.name,
                            config,
                            stderr=stderr,
                            on_notification=self._on_notification,
                            on_transport_error=self._on_transport_error,
                            fast_path=self.settings.fast_path,
                            auth=auth,
                        )
                        tools = await conn.list_tools()
                        scope.deadline = math.inf
                        connected = True
                        self.on_tools(self.server, tools, conn)
                        self.server.first_attempt_done.set()
                        await self._serve(conn)
                    except Exception:
                        tail = read_tail(stderr)
                        raise
                    tail = read_tail(stderr)
                    self._record_failure(None, tail)
            except Exception as exc:
                self._record_failure(exc, tail)
        if scope.cancelled_caught:
            self._set(
                last_error=f"no answer within {config.timeout:g}s (handshake or tools/list); "
                "raise servers.<name>.timeout if the server is just slow to start",
            )
        return connected

    def _auth(self, config: DownstreamConfig, scope: anyio.CancelScope) -> httpx2.Auth | None:
        """The OAuth signer of a server with an ``oauth`` table; while a person signs in, the
        connect deadline ``scope`` is stopped."""
        if config.oauth is None:
            return None
        return build_auth(
            self.server.name,
            config,
            self.tokens,
            hold=lambda: paused(scope),
            on_secret=self.redactor.add,
            browser=self._browser,
            sign_in=self.settings.sign_in,
        )

    async def _serve(self, conn: Connection) -> None:
        async with anyio.create_task_group() as tg:
            tg.start_soon(self._refresher, conn)
            tg.start_soon(conn.serve)
            if self.on_serving is not None:
                tg.start_soon(self.on_serving, self.server.name, conn)
            await conn.closed.wait()
            tg.cancel_scope.cancel()

    async def _refresher(self, conn: Connection) -> None:
        while True:
            await self.server.refresh_wanted.wait()
            await anyio.sleep(self.settings.debounce)  # fold a burst into one listing
            self.server.refresh_wanted = anyio.Event()
            try:
                with anyio.fail_after(self.server.config.timeout):
                    tools = await conn.list_tools()
            except Exception as exc:
                self._record_failure(exc, "")
                continue
            self.on_tools(self.server, tools, conn)

    async def _on_notification(self, message: types.ServerNotification) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            self.server.refresh_wanted.set()
        elif isinstance(message, _PASSED_ON) and self.on_notice is not None:
            try:
                await self.on_notice(self.server.name, message)
            except Exception:  # passing it on must never end the server's session
                log.exception(
                    "downstream %r: could not pass on %s", self.server.name, message.method
                )

    async def _on_transport_error(self, exc: Exception) -> None:
        log.warning(
            "%s", self.redactor.redact(f"downstream {self.server.name!r}: transport error: {exc!r}")
        )

    def _record_failure(self, exc: BaseException | None, stderr_tail: str) -> None:
        if exc is None:
            detail = "connection closed by the server"
        else:
            detail = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
        if isinstance(exc, BaseExceptionGroup):
            detail = "; ".join(f"{type(e).__name__}: {e}" for e in _leaves(exc))
        if stderr_tail:
            detail += f" (stderr: {stderr_tail[-300:]})"
        message = self.redactor.redact(detail)
        self._set(last_error=message)
        log.warning("downstream %r failed: %s", self.server.name, message)


def _leaves(group: BaseExceptionGroup[BaseException]) -> Iterator[BaseException]:
    """The exceptions inside ``group`` and its nested groups: what a person can act on."""
    for exc in group.exceptions:
        if isinstance(exc, BaseExceptionGroup):
            yield from _leaves(exc)
        else:
            yield exc
