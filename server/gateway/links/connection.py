"""One live session with one downstream MCP server, over stdio, Streamable HTTP or SSE.

:func:`open_connection` enters the transport and the client session (see :mod:`.transports`)
into the caller's ``AsyncExitStack`` and agrees on the protocol version (see
:mod:`.handshake`). The returned :class:`Connection` notices the end of the transport
(``closed``), so the supervisor can reconnect; requests are bounded by the server's
configured timeout. What the server asks during a call is relayed to the host that made it
(see :mod:`.relay`); each call goes downstream as the host's (see :meth:`Connection.call_tool`).
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import AsyncExitStack, asynccontextmanager
from typing import IO, Any, TypeVar

import anyio
import httpx2
import mcp_types as types
from context_broker.server.settings import DownstreamConfig
from mcp import ClientSession, MCPError
from mcp.client._input_required import (
    InputRequiredRoundsExceededError,
    run_input_required_driver,
)
from mcp.client.session import ClientRequestContext, IncomingMessage
from mcp.shared.dispatcher import ProgressFnT
from pydantic import TypeAdapter, ValidationError

from ...wire.sdk_compat import send_raw
from ..errors import UnreadableAnswer
from ..relay.host import Host, Relay, current_host
from .eras import HandshakeLanes, Lane, NoHandshake
from .handshake import handshake, negotiate
from .stdio_link import StdioLink
from .transports import client_session, open_transport, read_tail

__all__ = ["Connection", "NotificationFn", "open_connection"]

log = logging.getLogger(__name__)

NotificationFn = Callable[[types.ServerNotification], Awaitable[None]]
_CALL_RESULT: TypeAdapter[types.CallToolResult] = TypeAdapter(types.CallToolResult)
_CALL_OUTCOME: TypeAdapter[types.CallToolResult | types.InputRequiredResult] = TypeAdapter(
    types.CallToolResult | types.InputRequiredResult
)
_R = TypeVar("_R")
_RESPONSES: TypeAdapter[types.InputResponses] = TypeAdapter(types.InputResponses)
_SendFn = Callable[
    [types.InputResponses | None, str | None],
    Awaitable[types.CallToolResult | types.InputRequiredResult],
]


def _call_params(name: str, arguments: dict[str, Any] | None) -> dict[str, Any]:
    params: dict[str, Any] = {"name": name}
    if arguments is not None:
        params["arguments"] = arguments
    return params


def _checked_call_result(result: dict[str, Any]) -> dict[str, Any] | MCPError:
    """``result`` if it is a valid ``CallToolResult``, else the error saying it is not."""
    try:
        _CALL_RESULT.validate_python(result, by_name=False)
    except ValidationError as exc:
        detail = f"malformed tools/call result: {exc.error_count()} errors"
        return UnreadableAnswer(types.INTERNAL_ERROR, detail)
    return result


class Connection:
    """An initialized session with one downstream server."""

    def __init__(
        self,
        name: str,
        session: ClientSession,
        closed: anyio.Event,
        stderr: IO[bytes] | None,
        link: StdioLink | None = None,
        relay: Relay | None = None,
        lanes: HandshakeLanes | None = None,
    ) -> None:
        self.name = name
        self.session = session
        self.closed = closed
        self._stderr = stderr
        self._link = link
        self._main = Lane(session, relay or Relay(name, 30.0))
        self._lanes = lanes

    @property
    def capabilities(self) -> types.ServerCapabilities:
        return self.session.server_capabilities or types.ServerCapabilities()

    def stderr_tail(self) -> str:
        """The last lines the server wrote to stderr (stdio only), for error messages."""
        return read_tail(self._stderr)

    async def list_tools(self) -> list[types.Tool]:
        """Every tool, following pagination."""
        with self._main.relay.call():  # held in flight: the server's messages meanwhile
            return await _all_pages(self.session.list_tools, "tools")

    @property
    def fast(self) -> bool:
        """Whether the server has a fast lane (stdio): :meth:`call_tool_soon` reaches it."""
        return self._link is not None

    @property
    def modern(self) -> bool:
        """Whether the server is reached on the 2026-07-28 wire."""
        return self.session.discover_result is not None

    async def serve(self) -> None:
        """Run what the connection keeps beside its session (the handshake-era sessions of
        :mod:`.eras`) until cancelled; the supervisor runs it while connected."""
        if self._lanes is not None:
            await self._lanes.run()

    @asynccontextmanager
    async def _lane(self, host: Host | None) -> AsyncIterator[Lane]:
        """The session a call made for ``host`` goes over: over HTTP or SSE, a handshake-era
        one declaring the host's capabilities, unless host and server both speak the
        2026-07-28 wire (the host's ``_meta`` says them then); else the connection's own
        (a stdio server's one session: another would be another process, with its own
        state)."""
        if host is None or self._lanes is None or (host.modern and self.modern):
            yield self._main
            return
        owner = None if host.modern else host.key  # a handshake-era host: its own session
        async with self._lanes.use(host.declared(), host.client_info(), self._main, owner) as lane:
            yield lane

    async def stateful_session(self) -> ClientSession:
        """The session for requests that set up state on one connection of the server
        (``resources/subscribe``, a handshake-era method): a handshake-era session kept open
        beside a 2026-07-28 one over HTTP (see :meth:`.eras.HandshakeLanes.pinned`), else
        the connection's own."""
        return (await self._stateful_lane()).session

    async def _stateful_lane(self) -> Lane:
        if self._lanes is None or not self.modern:
            return self._main
        try:
            return await self._lanes.pinned()
        except NoHandshake:
            return self._main

    @asynccontextmanager
    async def stateful(self) -> AsyncIterator[ClientSession]:
        """:meth:`stateful_session`, a request sent on it in the block held in flight for
        the host :func:`.relay.calling_for` set (or for none), so what the server says
        meanwhile is never taken for another host's (see :mod:`.relay`)."""
        lane = await self._stateful_lane()
        with lane.relay.call():
            yield lane.session

    def _sender(
        self,
        session: ClientSession,
        name: str,
        arguments: dict[str, Any] | None,
        timeout: float | None,
        progress_callback: ProgressFnT | None = None,
        meta: Mapping[str, Any] | None = None,
    ) -> _SendFn:
        """Sends the ``tools/call`` of ``name`` with ``meta`` (a host's), again with the
        host's answers and the server's request state when the server asked for input."""

        async def send(
            responses: types.InputResponses | None, state: str | None
        ) -> types.CallToolResult | types.InputRequiredResult:
            params = _call_params(name, arguments)
            if responses is not None:
                params["inputResponses"] = _RESPONSES.dump_python(
                    responses, by_alias=True, mode="json", exclude_none=True
                )
            if state is not None:
                params["requestState"] = state
            raw = await send_raw(
                session,
                "tools/call",
                params,
                meta=meta or {},
                timeout=timeout,
                on_progress=progress_callback,
            )
            return _CALL_OUTCOME.validate_python(raw, by_name=False)

        return send

    async def _finished(
        self,
        lane: Lane,
        outcome: types.CallToolResult | types.InputRequiredResult,
        send: _SendFn,
    ) -> types.CallToolResult:
        """The call's result, once every ``InputRequiredResult`` was answered by the host."""
        if isinstance(outcome, types.CallToolResult):
            return outcome

        async def answer(
            key: str, request: types.InputRequest
        ) -> types.InputResponse | types.ErrorData:
            meta = request.params.meta if request.params else None
            context = ClientRequestContext(session=lane.session, request_id=key, meta=meta)
            return await lane.session.dispatch_input_request(context, request)

        try:
            return await run_input_required_driver(outcome, dispatch=answer, retry=send)
        except InputRequiredRoundsExceededError as exc:  # the call failed, not the connection
            detail = f"asked for input {exc.max_rounds} times without giving a result"
            raise MCPError(types.INTERNAL_ERROR, detail) from None

    async def call_tool(
        self,
        name: str,
        arguments: dict[str, Any] | None,
        *,
        timeout: float | None,
        progress_callback: ProgressFnT | None = None,
        retry: Mapping[str, Any] | None = None,
    ) -> types.CallToolResult | types.InputRequiredResult:
        """Call a tool as the host it is made for (:func:`.relay.current_host`) and return its
        result as sent (no client-side output validation).

        A 2026-07-28 host's call to a server on that wire carries the host's ``_meta`` and
        ``retry`` (its ``inputResponses`` and ``requestState``), and an
        ``InputRequiredResult`` goes back to it unchanged. Otherwise what the server asks
        meanwhile goes to the host through :mod:`.relay`, also when it asks with an
        ``InputRequiredResult``; a handshake-era host's call goes over a session declaring
        its own capabilities (see :meth:`_lane`)."""
        host = current_host()
        if host is not None and host.modern and self.modern:
            params = _call_params(name, arguments)
            return await self.request(
                "tools/call",
                params,
                _CALL_OUTCOME,
                timeout=timeout,
                retry=retry,
                on_progress=progress_callback,
            )
        async with self._lane(host) as lane:
            meta = _forwarded(host, lane)
            send = self._sender(lane.session, name, arguments, timeout, progress_callback, meta)
            with lane.relay.call():
                return await self._finished(lane, await send(None, None), send)

    async def request(
        self,
        method: str,
        params: Mapping[str, Any],
        result: TypeAdapter[_R],
        *,
        timeout: float | None,
        retry: Mapping[str, Any] | None = None,
        on_progress: ProgressFnT | None = None,
    ) -> _R:
        """Send ``method`` as the host it is made for (see :meth:`call_tool`): a 2026-07-28
        host's with its ``_meta`` and ``retry``, its answer (an ``InputRequiredResult`` too)
        read by ``result`` as sent; a handshake-era host's over its session (:meth:`_lane`),
        where what the server asks meanwhile reaches the host."""
        host = current_host()
        if host is not None and host.modern and self.modern:
            params = {**params, **(retry or {})}
        async with self._lane(host) as lane:
            with lane.relay.call():
                raw = await send_raw(
                    lane.session,
                    method,
                    params,
                    meta=_forwarded(host, lane),
                    timeout=timeout,
                    on_progress=on_progress,
                )
        return result.validate_python(raw, by_name=False)

    def call_tool_soon(
        self,
        name: str,
        arguments: dict[str, Any] | None,
        done: Callable[[dict[str, Any] | MCPError], None],
        *,
        timeout: float | None,
        tell: Callable[[bytes], bool] | None = None,
    ) -> Callable[[str], None]:
        """Call a tool on the fast lane (see :attr:`fast`), no task waiting: the request is
        written now and ``done`` is called with the result (checked to be a valid
        ``CallToolResult``, as the server sent it) or the ``MCPError`` when the answer is
        read; ``tell`` gets the server's log message lines meanwhile, as sent (see
        :meth:`StdioLink.request_soon`). Returns the function that gives the call up (with
        a reason). Raises ``MCPError`` if it cannot be sent."""
        link = self._link
        if link is None:
            raise MCPError(types.INTERNAL_ERROR, f"{self.name} has no fast lane")

        def checked(outcome: dict[str, Any] | MCPError) -> None:
            done(outcome if isinstance(outcome, MCPError) else _checked_call_result(outcome))

        request_id = link.request_soon(
            "tools/call", _call_params(name, arguments), checked, timeout=timeout, tell=tell
        )
        return lambda reason: link.cancel_soon(request_id, reason)

    async def list_resources(self) -> list[types.Resource]:
        """Every resource, following pagination (empty when the server has none)."""
        if self.capabilities.resources is None:
            return []
        with self._main.relay.call():
            return await _all_pages(self.session.list_resources, "resources")

    async def list_prompts(self) -> list[types.Prompt]:
        """Every prompt, following pagination (empty when the server has none)."""
        if self.capabilities.prompts is None:
            return []
        with self._main.relay.call():
            return await _all_pages(self.session.list_prompts, "prompts")


async def open_connection(
    stack: AsyncExitStack,
    name: str,
    config: DownstreamConfig,
    *,
    stderr: IO[bytes] | None,
    on_notification: NotificationFn,
    on_transport_error: Callable[[Exception], Awaitable[None]],
    fast_path: bool = True,
    auth: httpx2.Auth | None = None,
) -> Connection:
    """Start the transport and session inside ``stack`` and run the handshake.

    The caller bounds the whole call with a cancel scope; requests made later through the
    returned connection default to ``config.timeout``. A stdio server's stderr goes to
    ``stderr`` (see :func:`.transports.spool_stderr`) so failures can quote it, redacted. With
    ``fast_path`` a stdio server is spawned by :mod:`.stdio_link` (forwarded calls take its
    request lane); without, by the SDK's ``stdio_client``, every request through the session.
    ``auth`` signs an HTTP or SSE server's requests (OAuth, see :mod:`.oauth`).
    """
    read, write, link = await open_transport(stack, config, stderr, fast_path, auth)

    async def handle(message: IncomingMessage) -> None:
        if isinstance(message, Exception):
            await on_transport_error(message)
        else:
            await on_notification(message)

    relay = Relay(name, config.timeout)
    closed = anyio.Event()
    session, watched = await client_session(stack, read, write, config, relay, handle, closed)
    await negotiate(session, config)
    # On the 2026-07-28 wire a result without resultType reads as complete.
    watched.modern = session.discover_result is not None

    async def open_lane(
        lane_stack: AsyncExitStack,
        capabilities: types.ClientCapabilities,
        info: types.Implementation | None,
    ) -> Lane:
        lane_read, lane_write, _ = await open_transport(lane_stack, config, None, False, auth)
        lane = Lane(session, Relay(name, config.timeout))
        lane.session, _ = await client_session(
            lane_stack, lane_read, lane_write, config, lane.relay, handle, lane.closed
        )
        await handshake(lane.session, capabilities=capabilities, client_info=info)
        return lane

    remote = config.kind in ("http", "sse")
    lanes = HandshakeLanes(name, open_lane, wait=config.timeout) if remote else None
    return Connection(name, session, closed, stderr, link, relay, lanes)


def _forwarded(host: Host | None, lane: Lane) -> dict[str, Any]:
    """The ``_meta`` a host's request carries downstream over ``lane`` (see
    :meth:`.relay.Host.forwarded_meta`)."""
    if host is None:
        return {}
    return host.forwarded_meta(lane.session.discover_result is not None)


async def _all_pages(fetch: Any, field: str) -> list[Any]:
    """Every item of a paginated list call (``fetch(params=...)``), following cursors."""
    out: list[Any] = []
    cursor: str | None = None
    while True:
        params = types.PaginatedRequestParams(cursor=cursor) if cursor else None
        page = await fetch(params=params)
        out += getattr(page, field)
        cursor = page.next_cursor
        if not cursor:
            return out
