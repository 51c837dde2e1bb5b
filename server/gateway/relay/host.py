"""What a downstream server asks while a host's call is in flight, asked of that host.

A downstream tool may ask its client for user input (``elicitation/create``), a model
completion (``sampling/createMessage``) or the client's roots (``roots/list``), and send log
messages; on the 2026-07-28 wire the same requests come embedded in an
``InputRequiredResult``. The broker is that client, and the one who can answer is the host
whose call is running. :func:`calling_for` marks the host of the call the current task
makes (the gateway's tools set it around a forwarded call); each downstream connection's
:class:`Relay` keeps the hosts of its calls in flight and gives the SDK client session the
callbacks that ask them.

When no host can answer (no call in flight, a call made for no host such as the stdio
short path's, calls of several hosts at once, a host that did not declare the capability, a
2026-07-28 host connection with no back-channel) the
downstream gets ``-32601`` with a message saying why, at once rather than a hang; a host's
own error is passed back as it is. Log messages go to the host of the call in flight (on a
2026-07-28 host's call's stream too), unless below the level it set, and are dropped
otherwise.

A downstream's log message or question names no request on the wire (progress does, by its
token, and reaches the host of that token's call). A question is asked while the request it
belongs to is in flight, so it belongs to a host's request when every request the broker has
in flight on that session (calls, reads, subscriptions) is that host's. A log message may come
after its request ended, so it goes to a host only when, besides, no other live host
connection has used the session (HTTP and SSE servers give each host connection a session of
its own, see :mod:`.eras`; a stdio server's one session is shared). Otherwise it is not given
to anyone: it is dropped and counted (:attr:`Relay.dropped`, and a log line, INFO for the
first of each kind), never sent to another host.

So on a shared session (a stdio server's, or one a 2026-07-28 host shares with hosts that
declared the same) a host that leaves a question unanswered would leave every other host's
questions there refused until the server's ``timeout``. It cannot: once a question is refused
because several hosts' calls are in flight, every question still waiting for its host on that
session is given up within :data:`CONTENDED` seconds (the downstream gets ``-32001`` for it,
for that host's call alone), so the session is free again for the others.
"""

from __future__ import annotations

import itertools
import logging
from collections import Counter
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar
from weakref import WeakKeyDictionary, WeakSet

import anyio
import mcp_types as types
from mcp.client.session import ClientRequestContext
from mcp.server.session import ServerSession
from mcp.shared.exceptions import MCPError, NoBackChannelError
from mcp.shared.message import ServerMessageMetadata
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import BaseModel, ValidationError

from ...wire.sdk_compat import connection_of, connection_token, request_holder

__all__ = ["Host", "Relay", "calling_for", "current_host", "set_log_level", "severity", "shown"]

log = logging.getLogger(__name__)

_Answer = TypeVar("_Answer", bound=BaseModel)

CONTENDED = 5.0
"""How long a question may still wait for its host once another question on the same session
was refused because of it (several hosts' calls in flight)."""


# Keys of a host's request ``_meta`` not sent downstream as they are: the broker's own, and
# the progress token (the broker asks for progress with its own and relays it under the host's).
_OWN_META = frozenset({"session_id", "progressToken", "progress_token"})
# The 2026-07-28 request metadata (protocol version, client info and capabilities, log level).
_MODERN_KEYS = "io.modelcontextprotocol/"


class Asker(Protocol):
    """Where a 2026-07-28 host's call puts a question (:class:`.asking.Exchange`)."""

    async def ask(self, request: types.InputRequest) -> dict[str, Any] | types.ErrorData: ...


@dataclass(frozen=True)
class Host:
    """The host connection that made a call: its SDK session, the id of its request (the
    downstream's questions ride that request's stream, over HTTP too) and the request's
    ``_meta`` as the host sent it."""

    session: ServerSession
    request_id: types.RequestId
    meta: Mapping[str, Any] | None = None
    exchange: Asker | None = None
    """A 2026-07-28 host's call's exchange (see :mod:`.asking`): questions go in the call's
    answer; None for a handshake-era host, asked on its connection."""

    @property
    def key(self) -> str:
        """The host connection's key, which no later connection can have."""
        return connection_token(self.session)

    @property
    def holder(self) -> str:
        """Who may hand back what this request was given (a ``requestState``): over HTTP
        whoever holds the bearer token it carried, else the stream it came on."""
        return request_holder(self.session)

    @property
    def modern(self) -> bool:
        """Whether the host speaks the 2026-07-28 wire (no back-channel, ``_meta`` per request)."""
        return self.session.protocol_version in MODERN_PROTOCOL_VERSIONS

    def declared(self) -> types.ClientCapabilities:
        return self.session.client_capabilities or types.ClientCapabilities()

    def client_info(self) -> types.Implementation | None:
        """The name and version the host gave in its ``initialize`` (handshake era)."""
        params = self.session.client_params
        return params.client_info if params is not None else None

    def forwarded_meta(self, modern: bool) -> dict[str, Any]:
        """The request's ``_meta`` as the host sent it, less the broker's own keys: what a
        downstream reads (trace context and whatever else the host put there; to a server on
        the 2026-07-28 wire (``modern``), the host's request metadata too)."""
        return {
            k: v
            for k, v in (self.meta or {}).items()
            if k not in _OWN_META and (modern or not k.startswith(_MODERN_KEYS))
        }


# The host of the call the current task forwards: set by the gateway's tools around the
# call, read by the connection that sends it (the same task), so no signature in between
# has to carry it.
_CALLER: ContextVar[Host | None] = ContextVar("gateway_caller", default=None)


@contextmanager
def calling_for(host: Host | None) -> Iterator[None]:
    """Mark ``host`` as the one a downstream call made in this block is made for."""
    token = _CALLER.set(host)
    try:
        yield
    finally:
        _CALLER.reset(token)


_SEVERITY = {
    level: rank
    for rank, level in enumerate(
        ("debug", "info", "notice", "warning", "error", "critical", "alert", "emergency")
    )
}
# The level each host connection set with logging/setLevel, kept as long as the connection.
_LOG_LEVELS: WeakKeyDictionary[object, int] = WeakKeyDictionary()


def severity(level: object) -> int | None:
    """The rank of an MCP log level (``debug`` lowest), or None for no level MCP knows."""
    return _SEVERITY.get(level) if isinstance(level, str) else None


def shown(level: object, floor: int) -> bool:
    """Whether a log message at ``level`` reaches a host that set ``floor`` (a message of no
    known level always does, as the downstream's own filter would not know it either)."""
    rank = severity(level)
    return rank is None or rank >= floor


def set_log_level(session: ServerSession, level: str) -> None:
    """Remember the ``logging/setLevel`` of a host connection: a downstream's log messages
    below it are not passed on to that host, as the downstream would not have sent them."""
    rank = severity(level)
    if rank is not None:
        _LOG_LEVELS[connection_of(session)] = rank


def current_host() -> Host | None:
    """The host the call made in this task is made for (see :func:`calling_for`)."""
    return _CALLER.get()


def _refused(why: str) -> types.ErrorData:
    return types.ErrorData(code=types.METHOD_NOT_FOUND, message=why)


async def _put(
    exchange: Asker, request: types.InputRequest, result: type[_Answer]
) -> _Answer | types.ErrorData:
    """``request`` put to a 2026-07-28 host in its call's answer; its response read as
    ``result``."""
    answer = await exchange.ask(request)
    if isinstance(answer, types.ErrorData):
        return answer
    try:
        return result.model_validate(answer, by_name=False)
    except ValidationError as exc:
        return types.ErrorData(
            code=types.INVALID_PARAMS,
            message=f"{request.method}: the host's answer is not valid "
            f"({exc.error_count()} errors)",
        )


class Relay:
    """One downstream connection's calls in flight and the hosts they were made for; its
    ``elicit``/``sample``/``list_roots``/``log`` are the client session's callbacks.
    ``timeout`` bounds each question to a host."""

    def __init__(self, server: str, timeout: float) -> None:
        self._server = server
        self._timeout = timeout
        self._inflight: dict[int, Host | None] = {}  # by ticket; None: made for no host
        # The host connections that made requests on this session, while they live.
        self._users: WeakSet[object] = WeakSet()
        self._ids = itertools.count()
        self._waiting: dict[int, anyio.CancelScope] = {}  # questions waiting for their host
        self.dropped: Counter[str] = Counter()
        """Messages and questions of the server that no host was given, by kind."""

    @contextmanager
    def call(self) -> Iterator[None]:
        """Hold a request made in this block (a call, a subscription, ...) as in flight for
        the host :func:`calling_for` set (or for none)."""
        ticket = next(self._ids)
        host = _CALLER.get()
        self._inflight[ticket] = host
        if host is not None:
            self._users.add(connection_of(host.session))
        try:
            yield
        finally:
            del self._inflight[ticket]

    def _host(self, what: str, asking: bool = True) -> Host | types.ErrorData:
        """The one host the server's question (``asking``) or notification can be for, or
        why there is none (the message is then dropped and counted in :attr:`dropped`): it
        belongs to a host's request only while every request in flight on this session is
        that host's; a request made for no host, or another host's, leaves it unknown. A
        2026-07-28 host can be told things on its call's stream, but not asked."""
        hosts = {None if host is None else host.key: host for host in self._inflight.values()}
        if not hosts:
            return self._dropped(what, f"no call to {self._server!r} is in flight")
        if len(hosts) > 1:
            if asking and self._waiting:
                self._contend()
                why = (
                    "calls of several hosts are in flight; cannot tell whom (a question "
                    f"waiting for another host is given up within {CONTENDED:g}s; ask again then)"
                )
                return self._dropped(what, why)
            return self._dropped(what, "calls of several hosts are in flight; cannot tell whom")
        host = next(iter(hosts.values()))
        if host is None:
            return self._dropped(what, f"no host can be asked during this call to {self._server!r}")
        if asking and host.modern and host.exchange is None:
            return _refused(f"{what}: the host's connection has no channel for requests")
        mine = connection_of(host.session)
        if not asking and any(user is not mine for user in self._users):
            # A question can only come from a request in flight, all of them this host's; a
            # log message may be about a request that already ended, another host's.
            return self._dropped(what, "other hosts use this session too; cannot tell whose")
        return host

    def _dropped(self, what: str, why: str) -> types.ErrorData:
        """Count a message or question no host is given, and say why."""
        self.dropped[what] += 1
        log.log(
            logging.INFO if self.dropped[what] == 1 else logging.DEBUG,
            "downstream %r: %s not relayed to any host (%s); %d dropped so far",
            self._server,
            what,
            why,
            self.dropped[what],
        )
        return _refused(f"{what}: {why}")

    def _contend(self) -> None:
        """Give every question waiting for its host on this session at most
        :data:`CONTENDED` seconds more."""
        deadline = anyio.current_time() + CONTENDED
        for scope in self._waiting.values():
            scope.deadline = min(scope.deadline, deadline)

    async def _ask(
        self, host: Host, request: types.ServerRequest, result: type[_Answer]
    ) -> _Answer | types.ErrorData:
        """Send ``request`` to ``host`` on its call's stream (a 2026-07-28 host: in its call's
        answer); its error comes back as is. Given up early when another host's question on
        this session is refused meanwhile (see :meth:`_contend`)."""
        ticket = next(self._ids)
        with anyio.CancelScope() as scope:
            self._waiting[ticket] = scope
            try:
                return await self._sent(host, request, result)
            finally:
                del self._waiting[ticket]
        return types.ErrorData(
            code=types.REQUEST_TIMEOUT,
            message=f"{request.method}: the host did not answer, and another host needed this "
            f"session; given up after {CONTENDED:g}s",
        )

    async def _sent(
        self, host: Host, request: types.ServerRequest, result: type[_Answer]
    ) -> _Answer | types.ErrorData:
        """``request`` sent to ``host`` (see :meth:`_ask`), bounded by the server's timeout."""
        if host.exchange is not None and not isinstance(request, types.PingRequest):
            return await _put(host.exchange, request, result)
        related = ServerMessageMetadata(related_request_id=host.request_id)
        try:
            with anyio.fail_after(self._timeout):
                return await host.session.send_request(request, result, metadata=related)
        except NoBackChannelError:
            return _refused(f"{request.method}: the host's connection has no channel for requests")
        except MCPError as exc:
            return exc.error
        except TimeoutError:
            return types.ErrorData(
                code=types.REQUEST_TIMEOUT,
                message=f"{request.method}: the host did not answer within {self._timeout:g}s",
            )

    async def elicit(
        self, context: ClientRequestContext, params: types.ElicitRequestParams
    ) -> types.ElicitResult | types.ErrorData:
        """``elicitation/create``: asked of a host that declared the mode it uses."""
        host = self._host("elicitation")
        if isinstance(host, types.ErrorData):
            return host
        declared = host.declared().elicitation
        url = isinstance(params, types.ElicitRequestURLParams)
        if declared is None or (url and declared.url is None):
            return _refused(f"the host does not support {'URL' if url else 'form'} elicitation")
        return await self._ask(host, types.ElicitRequest(params=params), types.ElicitResult)

    async def sample(
        self, context: ClientRequestContext, params: types.CreateMessageRequestParams
    ) -> types.CreateMessageResult | types.CreateMessageResultWithTools | types.ErrorData:
        """``sampling/createMessage``: asked of a host that declared sampling (with tools,
        when the request has tools)."""
        host = self._host("sampling")
        if isinstance(host, types.ErrorData):
            return host
        declared = host.declared().sampling
        if declared is None or (params.tools and declared.tools is None):
            return _refused(
                "the host does not support sampling" + (" with tools" if params.tools else "")
            )
        result = types.CreateMessageResultWithTools if params.tools else types.CreateMessageResult
        return await self._ask(host, types.CreateMessageRequest(params=params), result)

    async def list_roots(
        self, context: ClientRequestContext
    ) -> types.ListRootsResult | types.ErrorData:
        """``roots/list``: asked of a host that declared roots."""
        host = self._host("roots")
        if isinstance(host, types.ErrorData):
            return host
        if host.declared().roots is None:
            return _refused("the host does not support roots")
        return await self._ask(host, types.ListRootsRequest(), types.ListRootsResult)

    async def log(self, params: types.LoggingMessageNotificationParams) -> None:
        """A downstream log message: to the host of the call in flight, if there is one."""
        host = self._host("logging", asking=False)
        if isinstance(host, types.ErrorData):
            log.debug("downstream %r log message not relayed: %s", self._server, host.message)
            return
        if not shown(params.level, _LOG_LEVELS.get(connection_of(host.session), 0)):
            return
        note = types.LoggingMessageNotification(params=params)
        try:
            await host.session.send_notification(note, related_request_id=host.request_id)
        except Exception as exc:  # the host may be gone; the call goes on
            log.debug("could not relay a log message of %r: %s", self._server, exc)
