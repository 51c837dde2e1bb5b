"""Which host connections subscribed to which downstream resources (``resources/subscribe``).

A host subscribes to a resource by its exposed URI; the broker subscribes once on the
resource's server (only if it declared ``resources.subscribe``), by the server's own URI and
on the connection's stateful session, for however many hosts want it, and unsubscribes there
when the last one leaves. A server forgets its subscriptions with its connection, so they
are made again on the next one. A downstream's ``notifications/resources/updated`` goes to
each host that subscribed to that resource, naming it by the URI the host used.

Only a URI its server listed, or one a template it listed gives, can be subscribed to (the
``target`` function says which). A host connection holds a bounded number of subscriptions,
and all host connections together a bounded number on each server; every one a host holds is
released (downstream too, with the last host that wanted it) when its connection closes.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from typing import Protocol

import anyio
import mcp_types as types
from mcp import ClientSession

from ...wire.sdk_compat import connection_of, connection_token
from ..errors import GatewayError
from ..links.connection import Connection
from ..server_state import ServerTable
from ..trust.secrets import Redactor

__all__ = [
    "MAX_SUBSCRIPTIONS_PER_HOST",
    "MAX_SUBSCRIPTIONS_PER_SERVER",
    "HostSession",
    "Subscriptions",
    "TargetFn",
]

log = logging.getLogger(__name__)

Target = tuple[str, str]  # (server, original uri)
TargetFn = Callable[[str], Awaitable[Target]]
"""The server and original URI of an exposed resource URI its server offers
(``UnknownToolError`` if none)."""
_SEND_TIMEOUT = 5.0
MAX_SUBSCRIPTIONS_PER_HOST = 1024
"""Resource subscriptions one host connection may hold, unless configured otherwise
(``[gateway] max_subscriptions_per_host``)."""
MAX_SUBSCRIPTIONS_PER_SERVER = 4096
"""Resource subscriptions all host connections together may hold on one downstream server,
unless configured otherwise (``[gateway] max_subscriptions_per_server``)."""


class HostSession(Protocol):
    """What a subscribed host connection is told with."""

    async def send_resource_updated(self, uri: str) -> None: ...


class _Hosts:
    """Host connections by exposed resource URI, and the downstream resource each names."""

    def __init__(self) -> None:
        self._hosts: dict[str, dict[str, HostSession]] = {}
        self._targets: dict[str, Target] = {}
        self._uris: dict[str, set[str]] = {}  # host connection -> the URIs it subscribed to
        self._counts: Counter[str] = Counter()  # server -> subscriptions hosts hold on it

    def has(self, uri: str, host: HostSession) -> bool:
        return connection_token(host) in self._hosts.get(uri, {})

    def held(self, host: HostSession) -> list[str]:
        """The URIs ``host`` is subscribed to."""
        return sorted(self._uris.get(connection_token(host), ()))

    def on_server(self, server: str) -> int:
        """How many subscriptions all hosts together hold on ``server``'s resources."""
        return self._counts[server]

    def add(self, uri: str, target: Target, host: HostSession) -> bool:
        """Remember that ``host`` wants updates of ``uri``; True if no host wanted them
        before (the broker then subscribes on the resource's server)."""
        hosts = self._hosts.setdefault(uri, {})
        first = not hosts
        key = connection_token(host)
        if key not in hosts:
            self._counts[target[0]] += 1
        hosts[key] = host
        self._uris.setdefault(key, set()).add(uri)
        self._targets[uri] = target
        return first

    def remove(self, uri: str, host: HostSession) -> Target | None:
        """Forget ``host``'s subscription to ``uri``; the downstream resource when no host
        wants its updates any more (the broker then unsubscribes there), else None."""
        hosts = self._hosts.get(uri)
        key = connection_token(host)
        if hosts is None or hosts.pop(key, None) is None:
            return None
        self._drop_uri(key, uri)
        self._uncount(uri)
        if hosts:
            return None
        del self._hosts[uri]
        return self._targets.pop(uri)

    def _uncount(self, uri: str) -> None:
        server = self._targets[uri][0]
        self._counts[server] -= 1
        if self._counts[server] <= 0:
            del self._counts[server]

    def _drop_uri(self, key: str, uri: str) -> None:
        uris = self._uris.get(key)
        if uris is not None:
            uris.discard(uri)
            if not uris:
                del self._uris[key]

    def targets(self, server: str) -> list[Target]:
        """The resources of ``server`` some host is subscribed to, by their own URIs."""
        return sorted({t for t in self._targets.values() if t[0] == server})

    async def updated(self, server: str, original: str) -> int:
        """Tell every host subscribed to ``server``'s resource ``original`` that it changed,
        by the URI each subscribed with; a host that cannot be told is forgotten. Returns
        how many hosts were told."""
        told = 0
        for uri, target in list(self._targets.items()):
            if target != (server, original):
                continue
            for key, host in list(self._hosts.get(uri, {}).items()):
                try:
                    with anyio.fail_after(_SEND_TIMEOUT):
                        await host.send_resource_updated(uri)
                    told += 1
                except Exception as exc:  # a host that went away must not stop the others
                    log.debug("could not send resources/updated for %s: %s", uri, exc)
                    self._forget(uri, key)
        return told

    def _forget(self, uri: str, key: str) -> None:
        hosts = self._hosts.get(uri, {})
        if hosts.pop(key, None) is not None:
            self._uncount(uri)
        self._drop_uri(key, uri)
        if not hosts:
            self._hosts.pop(uri, None)
            self._targets.pop(uri, None)


class Subscriptions:
    """The broker's subscriptions on downstream servers for its hosts: which hosts want
    which resource (see :class:`_Hosts`), made once per resource on its server's stateful
    session, made again on a new connection, and each update passed on."""

    def __init__(
        self,
        servers: ServerTable,
        redactor: Redactor,
        target: TargetFn,
        *,
        max_per_server: int = MAX_SUBSCRIPTIONS_PER_SERVER,
    ) -> None:
        self._servers = servers
        self._redactor = redactor
        self._target = target
        self._max_per_server = max_per_server
        self._hosts = _Hosts()
        self._subscribed_on: dict[str, Connection] = {}  # server -> where its subscriptions are
        self._watched: set[str] = set()  # host connections whose leaving releases theirs

    def subscribable(self) -> bool:
        """Whether hosts may subscribe to downstream resources: some server declared
        ``resources.subscribe``, or one has not answered yet (what it offers is not known,
        and a capability cannot be given to a connected host later)."""
        for server in self._servers:
            if server.config.enabled and not server.first_attempt_done.is_set():
                return True
            caps = server.connection.capabilities.resources if server.connection else None
            if caps is not None and caps.subscribe:
                return True
        return False

    async def subscribe(
        self, uri: str, host: HostSession, *, limit: int = MAX_SUBSCRIPTIONS_PER_HOST
    ) -> None:
        """Send ``host`` the updates of the resource exposed as ``uri``: subscribed on its
        server (once for all hosts, on the connection's stateful session), which must have
        declared ``resources.subscribe``, and listed it (or a template giving it). A host
        holds at most ``limit`` subscriptions, all hosts together at most the
        ``max_per_server`` given at construction on one server (a ``GatewayError`` says so
        before anything is asked of a server); all a host holds are released when its
        connection closes (see :meth:`release`)."""
        held = self._hosts.held(host)
        if len(held) >= limit and not self._hosts.has(uri, host):
            raise GatewayError(
                f"resource {uri[:200]!r}: this connection already holds {len(held)} resource "
                f"subscriptions, the most one host may ([gateway] max_subscriptions_per_host "
                f"= {limit}); unsubscribe from some first"
            )
        server_name, original = await self._target(uri)
        server = self._servers.get(server_name)
        conn = server.live(original)
        try:
            async with conn.stateful() as session:
                self._check_offered(session, uri, server_name)
                self._check_room(uri, host, server_name)  # no wait between it and the add
                if not self._hosts.add(uri, (server_name, original), host):
                    self._watch(host)
                    return
                request = types.SubscribeRequest(params=types.SubscribeRequestParams(uri=original))
                try:
                    await session.send_request(request, types.EmptyResult)
                except BaseException:
                    self._hosts.remove(uri, host)
                    raise
        except GatewayError:
            raise
        except Exception as exc:
            raise server.call_failed(conn, f"resource {original!r}", exc, tool=None) from None
        self._subscribed_on[server_name] = conn
        self._watch(host)

    def _check_room(self, uri: str, host: HostSession, server_name: str) -> None:
        """Refuse a new subscription past the bound on ``server_name`` of all hosts together."""
        held = self._hosts.on_server(server_name)
        if held >= self._max_per_server and not self._hosts.has(uri, host):
            raise GatewayError(
                f"resource {uri[:200]!r}: hosts already hold {held} subscriptions to resources "
                f"of server {server_name!r}, the most all hosts together may ([gateway] "
                f"max_subscriptions_per_server = {self._max_per_server}); try again once some "
                "are released",
                server=server_name,
            )

    @staticmethod
    def _check_offered(session: ClientSession, uri: str, server_name: str) -> None:
        caps = (session.server_capabilities or types.ServerCapabilities()).resources
        if caps is None or not caps.subscribe:
            raise GatewayError(
                f"resource {uri[:200]!r}: downstream server {server_name!r} does not offer "
                "subscriptions (it did not declare resources.subscribe); read it again to see "
                "whether it changed",
                server=server_name,
            )

    def _watch(self, host: HostSession) -> None:
        """Release ``host``'s subscriptions when its connection closes: on the SDK
        connection's own teardown (a host that has none, such as a listen stream, releases
        its own)."""
        key = connection_token(host)
        teardown = getattr(connection_of(host), "exit_stack", None)
        if key in self._watched or not isinstance(teardown, AsyncExitStack):
            return
        self._watched.add(key)
        teardown.push_async_callback(self._left, host, key)

    async def _left(self, host: HostSession, key: str) -> None:
        self._watched.discard(key)
        released = await self.release(host)
        if released:
            log.debug("a host connection closed; released its %d subscriptions", released)

    async def release(self, host: HostSession) -> int:
        """Unsubscribe ``host`` from everything it is subscribed to (the broker's own
        subscriptions on servers go with the last host that wanted them); how many."""
        held = self._hosts.held(host)
        for uri in held:
            await self.unsubscribe(uri, host)
        return len(held)

    async def unsubscribe(self, uri: str, host: HostSession) -> None:
        """Stop sending ``host`` the updates of ``uri``; the last host to leave a resource
        unsubscribes the broker on its server (a failure there is only logged)."""
        target = self._hosts.remove(uri, host)
        server = self._servers.find(target[0]) if target is not None else None
        if target is None or server is None or server.connection is None:
            return
        request = types.UnsubscribeRequest(params=types.UnsubscribeRequestParams(uri=target[1]))
        try:
            with anyio.fail_after(server.config.timeout):
                async with server.connection.stateful() as session:
                    await session.send_request(request, types.EmptyResult)
        except Exception as exc:
            log.info(
                "%s",
                self._redactor.redact(f"downstream {target[0]!r}: unsubscribe failed: {exc!r}"),
            )

    async def renew(self, server_name: str, conn: Connection) -> None:
        """Subscribe again on a server's new connection to the resources hosts still want
        (a server forgets subscriptions with the connection they were made on); a failure
        is logged. Called once the connection serves (its stateful session may take a
        moment to be ready)."""
        if self._subscribed_on.get(server_name, conn) is conn:
            return
        self._subscribed_on[server_name] = conn
        server = self._servers.find(server_name)
        timeout = server.config.timeout if server is not None else 10.0
        try:
            with anyio.fail_after(timeout):
                await _when_ready(conn)
                async with conn.stateful() as session:
                    for _, original in self._hosts.targets(server_name):
                        params = types.SubscribeRequestParams(uri=original)
                        await session.send_request(
                            types.SubscribeRequest(params=params), types.EmptyResult
                        )
        except Exception as exc:
            message = f"downstream {server_name!r}: subscribing again failed: {exc!r}"
            log.warning("%s", self._redactor.redact(message))

    async def updated(self, server: str, original: str) -> int:
        """Pass on ``server``'s ``resources/updated`` for ``original`` to the hosts
        subscribed to it; how many were told."""
        return await self._hosts.updated(server, original)


async def _when_ready(conn: Connection) -> ClientSession:
    """The connection's stateful session, once what keeps it is running (it starts beside the
    connection, so a moment after it)."""
    while True:
        try:
            return await conn.stateful_session()
        except RuntimeError:  # not serving yet
            await anyio.sleep(0.05)
