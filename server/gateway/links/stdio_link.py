"""The stdio transport to a downstream server, with a fast lane for forwarded tool calls.

It does what the SDK's ``stdio_client`` does for the client session (spawn the server in its
own process group with the SDK's default environment, newline-delimited JSON-RPC both ways,
stderr to the given file, and on exit: close stdin, wait, then terminate the process group;
a small watcher process kills the group when the broker dies without that exit),
and adds :meth:`StdioLink.request_soon`: a request written straight to the server's stdin
whose response line is handed back as JSON straight from the reader, never entering the
session's streams. Forwarded tool calls take it, so the broker's hop costs little more than
relaying two lines. Timeouts, cancellation and a lost connection behave as the SDK's
requests do: ``MCPError`` with ``REQUEST_TIMEOUT`` or ``CONNECTION_CLOSED``, and a courtesy
``notifications/cancelled`` to the server for a request given up.

POSIX only; on Windows the gateway keeps the SDK's transport.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import logging
import os
import subprocess
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager, suppress
from typing import IO, Any

import anyio
import anyio.abc
import mcp_types as types
from mcp import MCPError
from mcp.client.stdio import StdioServerParameters
from mcp.shared.message import SessionMessage
from mcp_types import CONNECTION_CLOSED, REQUEST_TIMEOUT
from pydantic import ValidationError

from ...wire.jsonrpc_lines import (
    MAX_LINE_BYTES,
    LineSplitter,
    message_line,
    notification_line,
    peer_message,
    read_object,
    request_line,
    safe_loads,
    top_level_id,
)
from ...wire.sdk_compat import default_environment, terminate_process_tree
from ..errors import UnreadableAnswer

__all__ = ["StdioLink", "open_stdio_link"]

log = logging.getLogger(__name__)

_EXIT_GRACE = 2.0  # seconds for the server to exit after its stdin closes
_KILL_GRACE = 2.0  # seconds between SIGTERM and SIGKILL of its process group
_FLUSH_GRACE = 0.5  # seconds for already accepted session messages to be written
_POLL = 0.01
_ids = itertools.count(1)


Outcome = dict[str, Any] | MCPError
"""A lane request's end: its ``result`` object as the server sent it, or the ``MCPError``."""
OutcomeFn = Callable[[Outcome], None]
TellFn = Callable[[bytes], bool]
"""Takes a server's log message (a ``notifications/message`` line the link wrote from the
parsed notification, see :func:`_log_message`) (True) or leaves it to the session (False)."""


class _Waiter:
    """One lane request in flight: whom to tell how it ended, and its timeout's timer."""

    __slots__ = ("done", "method", "tell", "timer")

    def __init__(self, method: str, done: OutcomeFn, tell: TellFn | None = None) -> None:
        self.method = method
        self.done = done
        self.tell = tell
        self.timer: asyncio.TimerHandle | None = None


class StdioLink:
    """A running downstream process: session streams plus the fast request lane."""

    def __init__(
        self, process: anyio.abc.Process, stdin: asyncio.StreamWriter, prefix: str
    ) -> None:
        self.process = process
        self._stdin = stdin
        self._prefix = prefix
        self._prefix_bytes = json.dumps(prefix).encode()[:-1]  # '"<prefix>' as on the wire
        self._ids = itertools.count(1)
        self._pending: dict[str, _Waiter] = {}
        self._closed = False
        self._to_session, self.read_stream = anyio.create_memory_object_stream[
            SessionMessage | Exception
        ](0)
        self.write_stream, self._from_session = anyio.create_memory_object_stream[SessionMessage](0)

    # -- the fast lane ---------------------------------------------------------------------

    def request_soon(
        self,
        method: str,
        params: dict[str, Any],
        done: OutcomeFn,
        *,
        timeout: float | None,
        tell: TellFn | None = None,
    ) -> str:
        """Write one request now; ``done`` is called once, from the read loop, with its
        ``result`` object as the server sent it or an ``MCPError`` (the server's error
        response, ``REQUEST_TIMEOUT`` after ``timeout`` seconds, ``CONNECTION_CLOSED`` if the
        server is gone). No task waits for it: the answer is handled where it is read.
        While it is in flight, ``tell`` is offered the server's log messages in the order
        they are read (before the answer that follows them), each as a ``notifications/message``
        line written anew from the parsed notification, never the server's own bytes.
        Returns the request's id, for :meth:`cancel_soon`. Raises ``MCPError`` (and ``done``
        is not called) when the request cannot be written."""
        if self._closed:
            raise MCPError(CONNECTION_CLOSED, "Connection closed")
        request_id = f"{self._prefix}{next(self._ids)}"
        waiter = _Waiter(method, done, tell)
        self._send_now(request_line(request_id, method, params))
        self._pending[request_id] = waiter
        if timeout is not None:
            waiter.timer = asyncio.get_running_loop().call_later(
                timeout, self._time_out, request_id, timeout
            )
        return request_id

    def cancel_soon(self, request_id: str, reason: str) -> None:
        """Give up a request: its ``done`` is never called and the server is told (courtesy
        ``notifications/cancelled``, not waited for)."""
        waiter = self._pending.pop(request_id, None)
        if waiter is None:
            return
        if waiter.timer is not None:
            waiter.timer.cancel()
        notice = notification_line(
            "notifications/cancelled", {"requestId": request_id, "reason": reason}
        )
        with suppress(MCPError):
            self._send_now(notice)

    def _time_out(self, request_id: str, timeout: float) -> None:
        waiter = self._pending.get(request_id)
        if waiter is None:
            return
        self.cancel_soon(request_id, f"timed out after {timeout}s")
        _tell(waiter, MCPError(REQUEST_TIMEOUT, f"Request {waiter.method!r} timed out"))

    def _settle(self, request_id: str, outcome: Outcome) -> None:
        waiter = self._pending.pop(request_id, None)
        if waiter is None:
            return
        if waiter.timer is not None:
            waiter.timer.cancel()
        _tell(waiter, outcome)

    def _send_now(self, data: bytes) -> None:
        """Queue one line on the server's stdin without waiting (a whole line per write, so
        the lane and the session's writer never interleave inside a line)."""
        if self._stdin.is_closing():
            self._close_lane()
            raise MCPError(CONNECTION_CLOSED, "Connection closed")
        self._stdin.write(data)

    async def _send(self, data: bytes) -> None:
        try:
            self._send_now(data)
            await self._stdin.drain()
        except (ConnectionError, OSError):
            self._close_lane()
            raise MCPError(CONNECTION_CLOSED, "Connection closed") from None

    def _close_lane(self) -> None:
        self._closed = True
        for request_id in list(self._pending):
            self._settle(request_id, MCPError(CONNECTION_CLOSED, "Connection closed"))

    # -- pumps -----------------------------------------------------------------------------

    async def read_loop(self) -> None:
        """Split stdout into lines: fast-lane responses to their waiters, the rest parsed
        for the session. Ends at EOF; then every waiter fails and the session sees EOF."""
        stdout = self.process.stdout
        assert stdout is not None
        lines = LineSplitter()
        try:
            async with self._to_session:
                async for chunk in stdout:
                    skipped = lines.skipped
                    for line in lines.feed(chunk):
                        if not self._lane_response(line) and not self._told(line):
                            await self._deliver(line)
                    if lines.skipped > skipped:
                        log.warning(
                            "skipped a line longer than %d bytes from a downstream server",
                            MAX_LINE_BYTES,
                        )
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError) as exc:
            log.debug("downstream stdout ended: %s", exc)
        finally:
            self._close_lane()
            await _drain(stdout)

    def _lane_response(self, line: bytes) -> bool:
        if not self._pending or self._prefix_bytes not in line:
            return False
        try:
            message = safe_loads(line)
        except ValueError as exc:
            return self._unreadable_response(line, exc)
        if not isinstance(message, dict) or "method" in message:
            return False
        request_id = message.get("id")
        if not isinstance(request_id, str) or request_id not in self._pending:
            return False
        method = self._pending[request_id].method
        self._settle(request_id, _outcome(method, message))
        return True

    def _told(self, line: bytes) -> bool:
        """Offer a server's log message to the lane requests in flight that listen for them,
        as a line the link writes itself from what it parsed (see :func:`_log_message`), so
        nothing else a server writes reaches them: a line that only contains the method's
        name (a response under some other request's id, say) goes to the session, which
        reads it as what it is."""
        if b"notifications/message" not in line:
            return False
        listening = [w.tell for w in self._pending.values() if w.tell is not None]
        if not listening:
            return False
        told = _log_message(line)
        return told is not None and any(tell(told) for tell in listening)

    def _unreadable_response(self, line: bytes, exc: ValueError) -> bool:
        """An unparsable line answering a lane request fails that request at once."""
        request_id, _ = top_level_id(line)
        if not isinstance(request_id, str) or request_id not in self._pending:
            return False
        log.warning("unreadable response %r from a downstream server: %s", request_id, exc)
        failed = UnreadableAnswer(
            types.INTERNAL_ERROR, f"unreadable response from the server: {exc}"
        )
        self._settle(request_id, failed)
        return True

    async def _deliver(self, line: bytes) -> None:
        try:
            parsed: SessionMessage | Exception = SessionMessage(peer_message(line))
        except ValueError as exc:
            log.warning("unparsable message from a downstream server: %s", exc)
            parsed = exc
        # When the session is gone, reading goes on so the fast lane and the drain still work.
        with suppress(anyio.BrokenResourceError, anyio.ClosedResourceError):
            await self._to_session.send(parsed)

    async def write_loop(self) -> None:
        """Write the session's messages to stdin until the session closes its stream."""
        try:
            async with self._from_session:
                async for item in self._from_session:
                    await self._send(message_line(item.message))
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, MCPError):
            await self._to_session.aclose()  # the session sees the end, not a hung request


def _outcome(method: str, message: dict[str, Any]) -> Outcome:
    """A response object's outcome: its result, or its error as an ``MCPError``."""
    error = message.get("error")
    if error is not None:
        try:
            data = types.ErrorData.model_validate(error)
        except ValidationError:
            return MCPError(types.INTERNAL_ERROR, f"malformed error response to {method!r}")
        return MCPError(data.code, data.message, data.data)
    result = message.get("result")
    if not isinstance(result, dict):
        return MCPError(types.INTERNAL_ERROR, f"malformed response to {method!r}: no result")
    return result


def _log_message(line: bytes) -> bytes | None:
    """``line`` written anew when it is a well-formed ``notifications/message`` notification
    (no id, valid log params), else None. Only the parsed params are written, never the
    server's bytes."""
    message = read_object(line)
    if (
        message is None
        or message.get("jsonrpc") != "2.0"
        or message.get("method") != "notifications/message"
        or "id" in message
        or not message.keys() <= {"jsonrpc", "method", "params"}
    ):
        return None
    try:
        params = types.LoggingMessageNotificationParams.model_validate(message.get("params"))
    except ValidationError:
        return None
    dumped = params.model_dump(by_alias=True, mode="json", exclude_unset=True)
    return notification_line("notifications/message", dumped)


def _tell(waiter: _Waiter, outcome: Outcome) -> None:
    """Hand ``outcome`` on; a failing handler costs its own call, never the read loop."""
    try:
        waiter.done(outcome)
    except Exception:
        log.exception("handling the answer to a %s request failed", waiter.method)


async def _drain(stdout: anyio.abc.ByteReceiveStream) -> None:
    """Read and drop what is left, so a server flushing output can still exit."""
    with anyio.CancelScope(shield=True), suppress(Exception):
        while True:
            await stdout.receive()


async def _stop(process: anyio.abc.Process, stdin: asyncio.StreamWriter) -> None:
    """Close stdin, give the server time to exit, then terminate its process group (always:
    what the server started and left behind goes too)."""
    stdin.close()
    with anyio.move_on_after(_EXIT_GRACE):
        while process.returncode is None:
            await anyio.sleep(_POLL)
    await terminate_process_tree(process, _KILL_GRACE)
    if process.returncode is None:
        with anyio.move_on_after(_KILL_GRACE):
            while process.returncode is None:
                await anyio.sleep(_POLL)
        if process.returncode is None:
            log.warning("downstream process %d survived SIGKILL; abandoning it", process.pid)
    if process.stdout is not None:
        with suppress(OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
            await process.stdout.aclose()


# A shell outside the server's process group, blocked reading a pipe whose write end only the
# broker holds. EOF comes when the broker dies in any way (SIGKILL included); then it kills the
# server's whole group. On a normal stop the broker stops the group itself, then the watcher.
_WATCH = 'read -r _ || :; kill -s KILL -- "-$0" 2>/dev/null'


class _Watcher:
    """Kills a process group if the broker dies without stopping it."""

    def __init__(self, process: anyio.abc.Process, write_end: int) -> None:
        self._process = process
        self._write_end = write_end

    @classmethod
    async def start(cls, pgid: int) -> _Watcher | None:
        """The watcher of group ``pgid``; None (with a warning) where no shell can run it."""
        read_end, write_end = os.pipe()
        try:
            process = await anyio.open_process(
                ["/bin/sh", "-c", _WATCH, str(pgid)],
                stdin=read_end,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,
            )
        except OSError as exc:
            os.close(write_end)
            log.warning(
                "cannot start /bin/sh to watch downstream process %d (%s): if the broker is "
                "killed with SIGKILL, that server's processes will keep running",
                pgid,
                exc.strerror,
            )
            return None
        except BaseException:
            os.close(write_end)
            raise
        finally:
            os.close(read_end)
        return cls(process, write_end)

    async def stop(self) -> None:
        """Kill and reap the watcher (its group must already be stopped), then drop the pipe."""
        with suppress(ProcessLookupError):
            self._process.kill()
        with anyio.CancelScope(shield=True), anyio.move_on_after(_KILL_GRACE):
            await self._process.wait()
        os.close(self._write_end)


@asynccontextmanager
async def open_stdio_link(
    server: StdioServerParameters, errlog: IO[bytes] | None
) -> AsyncIterator[StdioLink]:
    """Spawn ``server`` and run its pumps until the block exits; stopping is shielded and
    every wait in it bounded, so a cancelled caller neither leaks the process nor hangs.

    The server runs in its own process group, which is stopped when the block exits and, by a
    watcher process, when the broker dies without running this code (``SIGKILL``).
    """
    read_end, write_end = os.pipe()
    try:
        process = await anyio.open_process(
            [server.command, *server.args],
            stdin=read_end,
            env=default_environment() | (server.env or {}),
            stderr=errlog,
            cwd=server.cwd,
            start_new_session=True,
        )
    except BaseException:
        os.close(write_end)
        raise
    finally:
        os.close(read_end)
    stdin = await _pipe_writer(write_end)
    try:
        watcher = await _Watcher.start(process.pid)
    except BaseException:
        with anyio.CancelScope(shield=True):
            await _stop(process, stdin)
        raise
    try:
        async with _pumped(process, stdin) as link:
            yield link
    finally:
        if watcher is not None:
            await watcher.stop()


async def _pipe_writer(fd: int) -> asyncio.StreamWriter:
    """A stream writer on the pipe ``fd`` (the server's stdin), owned by the link: lane
    requests are queued on it without a wait, as the host's stdio lines are."""
    loop = asyncio.get_running_loop()
    pipe = os.fdopen(fd, "wb", buffering=0)
    transport, protocol = await loop.connect_write_pipe(asyncio.streams.FlowControlMixin, pipe)
    return asyncio.StreamWriter(transport, protocol, None, loop)


@asynccontextmanager
async def _pumped(
    process: anyio.abc.Process, stdin: asyncio.StreamWriter
) -> AsyncIterator[StdioLink]:
    link = StdioLink(process, stdin, prefix=f"cb-{next(_ids)}-")
    writer_done = anyio.Event()

    async def write() -> None:
        try:
            await link.write_loop()
        finally:
            writer_done.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(link.read_loop)
        tg.start_soon(write)
        try:
            yield link
        finally:
            with anyio.CancelScope(shield=True):
                link.write_stream.close()
                link.read_stream.close()
                with anyio.move_on_after(_FLUSH_GRACE):
                    await writer_done.wait()
                await _stop(process, stdin)
            tg.cancel_scope.cancel()
