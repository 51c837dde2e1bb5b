"""Handshake-era sessions with a downstream the broker reaches on the 2026-07-28 wire, for the
calls of handshake-era hosts.

A host that connected with the ``initialize`` handshake (2025-11-25 and before) expects a
downstream to behave as it does on that wire: to ask it for sampling, elicitation and roots
during a call and to send it log messages, and to see the capabilities that host declared.
On the 2026-07-28 wire a server cannot ask anything mid-call, so a call made for such a host
goes to the downstream over a handshake-era session of its own: one per set of client
capabilities and client info hosts declared, opened on first use (up to :data:`LIMIT` per
server, the least recently used idle one closed beyond that), each with its own
:class:`~.relay.Relay`, so what the downstream asks reaches the host whose call is running.
"""

from __future__ import annotations

import json
import logging
from collections import OrderedDict
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field

import anyio
import anyio.abc
import mcp_types as types
from mcp import ClientSession

from .relay import Relay

__all__ = ["LIMIT", "HandshakeLanes", "Lane", "NoHandshake", "NotServing", "OpenLane"]

log = logging.getLogger(__name__)

LIMIT = 8
"""Handshake-era sessions kept open per downstream server."""


class NotServing(RuntimeError):
    """The connection's lanes are not running yet (a moment after it connects)."""


class NoHandshake(RuntimeError):
    """The server opened no handshake-era session (it speaks only the 2026-07-28 wire)."""


@dataclass
class Lane:
    """A downstream session and the relay of the calls made on it."""

    session: ClientSession
    relay: Relay
    closed: anyio.Event = field(default_factory=anyio.Event)  # its transport ended
    busy: int = 0
    pinned: bool = False  # never closed for room
    scope: anyio.CancelScope = field(default_factory=anyio.CancelScope)


OpenLane = Callable[
    [AsyncExitStack, types.ClientCapabilities, types.Implementation | None], Awaitable[Lane]
]
"""Opens a handshake-era session declaring those capabilities and client info, in a stack."""


def lane_key(capabilities: types.ClientCapabilities, info: types.Implementation | None) -> str:
    dump = capabilities.model_dump(by_alias=True, mode="json", exclude_none=True)
    who = info.model_dump(by_alias=True, mode="json", exclude_none=True) if info else None
    return json.dumps([dump, who], sort_keys=True)


class HandshakeLanes:
    """The handshake-era sessions of one downstream connection; :meth:`run` keeps them open
    for the connection's lifetime (the supervisor runs it beside the connection)."""

    def __init__(self, server: str, open_lane: OpenLane, limit: int = LIMIT) -> None:
        self._server = server
        self._open = open_lane
        self._limit = limit
        self._lanes: OrderedDict[str, Lane] = OrderedDict()
        self._lock = anyio.Lock()
        self._tg: anyio.abc.TaskGroup | None = None
        self._unspoken: str | None = None  # why the server opens no handshake-era session

    async def run(self) -> None:
        """Hold the sessions until cancelled; they close with it."""
        async with anyio.create_task_group() as tg:
            self._tg = tg
            try:
                await anyio.sleep_forever()
            finally:
                self._tg = None
                tg.cancel_scope.cancel()

    @asynccontextmanager
    async def use(
        self,
        capabilities: types.ClientCapabilities,
        info: types.Implementation | None,
        fallback: Lane,
    ) -> AsyncIterator[Lane]:
        """The lane for hosts that declared ``capabilities`` and ``info``, held busy (never
        closed for room) while the block runs; ``fallback`` (the connection's own) when the
        server has no handshake-era sessions to give."""
        try:
            lane = await self._get(lane_key(capabilities, info), capabilities, info)
        except (NoHandshake, NotServing):
            lane = fallback
        lane.busy += 1
        try:
            yield lane
        finally:
            lane.busy -= 1

    async def _get(
        self, key: str, capabilities: types.ClientCapabilities, info: types.Implementation | None
    ) -> Lane:
        if self._unspoken is not None:
            raise NoHandshake(self._unspoken)
        async with self._lock:
            lane = self._lanes.get(key)
            if lane is None:
                lane = await self._open_lane(key, capabilities, info)
                self._lanes[key] = lane
                self._make_room()
            self._lanes.move_to_end(key)
            return lane

    async def _open_lane(
        self, key: str, capabilities: types.ClientCapabilities, info: types.Implementation | None
    ) -> Lane:
        """A new lane; a server that cannot open one (it speaks only the 2026-07-28 wire) is
        not asked again on this connection."""
        if self._tg is None:
            raise NotServing(f"downstream {self._server!r} is not serving yet")
        try:
            lane: Lane = await self._tg.start(self._keep, key, capabilities, info)
        except Exception as exc:
            self._unspoken = f"{type(exc).__name__}: {exc}"
            log.info(
                "downstream %r: no handshake-era session (%s); handshake-era hosts' calls go "
                "over the 2026-07-28 connection",
                self._server,
                self._unspoken,
            )
            raise NoHandshake(self._unspoken) from None
        return lane

    async def pinned(self) -> Lane:
        """A lane declaring no capabilities that is never closed for room: where requests
        that set up state on the server's side of one connection (``resources/subscribe``)
        go, so what the server later sends about them keeps arriving."""
        lane = await self._get("pinned", types.ClientCapabilities(), None)
        lane.pinned = True
        return lane

    def _make_room(self) -> None:
        """Close the least recently used idle lanes beyond the limit."""
        for key in list(self._lanes):
            if len(self._lanes) <= self._limit:
                return
            lane = self._lanes[key]
            if lane.busy == 0 and not lane.pinned:
                del self._lanes[key]
                lane.scope.cancel()

    async def _keep(
        self,
        key: str,
        capabilities: types.ClientCapabilities,
        info: types.Implementation | None,
        *,
        task_status: anyio.abc.TaskStatus[Lane],
    ) -> None:
        """Open a lane, hand it over, and keep it open until closed for room, its transport
        ends or the connection goes. Failing to open raises in the caller of ``start``."""
        lane: Lane | None = None
        try:
            async with AsyncExitStack() as stack:
                lane = await self._open(stack, capabilities, info)
                with lane.scope:
                    task_status.started(lane)
                    await lane.closed.wait()
        except Exception as exc:
            if lane is None:
                raise
            # A lost lane is opened again on its next use.
            log.info("downstream %r: a handshake-era session ended: %r", self._server, exc)
        finally:
            if lane is not None and self._lanes.get(key) is lane:
                del self._lanes[key]
