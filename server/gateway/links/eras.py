"""Handshake-era sessions with an HTTP or SSE downstream, one per host, for hosts' calls.

A host that connected with the ``initialize`` handshake (2025-11-25 and before) expects a
downstream to behave as it does on that wire: to ask it for sampling, elicitation and roots
during a call and to send it log messages, and to see the capabilities that host declared.
So a call made for such a host goes to the downstream over a handshake-era session of its
own: one per host connection, declaring that host's client capabilities and client info,
opened on first use (up to :data:`LIMIT` per server, the least recently used idle one closed
to make room), each with its own :class:`~.relay.Relay`, so whatever the downstream says on
it (a question, a log message, however late) belongs to that one host: attribution by
session, never by timing. A 2026-07-28 host's call to a server not on that wire goes over a
session declaring its capabilities, shared by hosts that declared the same (its questions
reach it through its call's exchange, :mod:`.asking`). When every lane is busy, a call that
needs a new one waits for one to go idle (bounded) and then gets :class:`NoRoom`, a clear
error, without any session having been opened for it.
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

from ..relay.host import Relay

__all__ = ["LIMIT", "HandshakeLanes", "Lane", "NoHandshake", "NoRoom", "NotServing", "OpenLane"]

log = logging.getLogger(__name__)

LIMIT = 8
"""Handshake-era sessions kept open per downstream server."""


class NotServing(RuntimeError):
    """The connection's lanes are not running yet (a moment after it connects)."""


class NoHandshake(RuntimeError):
    """The server opened no handshake-era session (it speaks only the 2026-07-28 wire)."""


class NoRoom(RuntimeError):
    """Every handshake-era session the server may have is busy with other hosts' calls, and
    none went idle in time."""


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


def lane_key(
    capabilities: types.ClientCapabilities,
    info: types.Implementation | None,
    owner: str | None = None,
) -> str:
    dump = capabilities.model_dump(by_alias=True, mode="json", exclude_none=True)
    who = info.model_dump(by_alias=True, mode="json", exclude_none=True) if info else None
    return json.dumps([dump, who, owner], sort_keys=True)


class HandshakeLanes:
    """The handshake-era sessions of one downstream connection; :meth:`run` keeps them open
    for the connection's lifetime (the supervisor runs it beside the connection)."""

    def __init__(
        self, server: str, open_lane: OpenLane, limit: int = LIMIT, wait: float = 30.0
    ) -> None:
        self._server = server
        self._open = open_lane
        self._limit = limit
        self._wait = wait  # seconds a call waits for a lane to go idle when all are busy
        self._lanes: OrderedDict[str, Lane] = OrderedDict()
        self._lock = anyio.Lock()
        self._idle = anyio.Event()  # set (and replaced) when a lane goes idle or away
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
        owner: str | None = None,
    ) -> AsyncIterator[Lane]:
        """The lane for hosts that declared ``capabilities`` and ``info`` (and, given an
        ``owner``, for that one host connection alone), held busy (never closed for room)
        while the block runs; ``fallback`` (the connection's own) when the server has no
        handshake-era sessions to give."""
        try:
            lane = await self._get(lane_key(capabilities, info, owner), capabilities, info)
        except (NoHandshake, NotServing):
            lane = fallback
        lane.busy += 1
        try:
            yield lane
        finally:
            lane.busy -= 1
            if lane.busy == 0:
                self._went_idle()

    def _went_idle(self) -> None:
        self._idle.set()
        self._idle = anyio.Event()

    async def _get(
        self, key: str, capabilities: types.ClientCapabilities, info: types.Implementation | None
    ) -> Lane:
        """The lane of ``key``, opened when there is none, once there is room for it: the
        least recently used idle lane is closed for it; when every lane is busy, this waits
        (at most ``wait`` seconds) for one to go idle, else raises :class:`NoRoom`."""
        if self._unspoken is not None:
            raise NoHandshake(self._unspoken)
        deadline = anyio.current_time() + self._wait
        while True:
            async with self._lock:
                lane = self._lanes.get(key)
                if lane is None and self._make_room():
                    lane = await self._open_lane(key, capabilities, info)
                    self._lanes[key] = lane
                if lane is not None:
                    self._lanes.move_to_end(key)
                    return lane
                idle = self._idle
            with anyio.move_on_after(deadline - anyio.current_time()) as waiting:
                await idle.wait()
            if waiting.cancelled_caught:
                break
        raise NoRoom(
            f"downstream {self._server!r}: all {self._limit} handshake-era sessions are busy "
            f"with calls of hosts that declared other capabilities, and none went idle within "
            f"{self._wait:g}s; try again when those calls are done"
        )

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

    def _make_room(self) -> bool:
        """Whether one more lane may open, closing the least recently used idle lanes to
        make room for it (never a busy or pinned one)."""
        for key in list(self._lanes):
            if len(self._lanes) < self._limit:
                return True
            lane = self._lanes[key]
            if lane.busy == 0 and not lane.pinned:
                del self._lanes[key]
                lane.scope.cancel()
        return len(self._lanes) < self._limit

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
                self._went_idle()
