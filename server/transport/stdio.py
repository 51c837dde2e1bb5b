"""A stdio transport on the event loop's own pipe I/O.

The SDK's ``stdio_server`` reads and writes through worker threads (``anyio.wrap_file``), two
thread hand-offs per message; on a busy two-core host that is most of a proxied call's
overhead. Here stdin and stdout are non-blocking pipes driven by the event loop, and the
SDK's ``stdio_server`` gets them as its explicit streams. fd 0 and fd 1 are diverted while
serving (to the null device and to stderr), so stray output from handlers or child processes
never reaches the protocol stream. When stdin or stdout is not a pipe (a regular file, the
null device), the SDK's own transport is used unchanged.

Lines are read here, not by the SDK: each becomes a message through
``.jsonrpc_lines.read_message``, and a line that is none is answered here with a JSON-RPC
error under its id (or logged and skipped when it has no usable id), so no request goes
unanswered and no line can take the process down.
"""

from __future__ import annotations

import asyncio
import logging
import os
import stat
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

import anyio
import anyio.abc
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.server.stdio import stdio_server
from mcp.shared.message import SessionMessage
from mcp_types import INTERNAL_ERROR, JSONRPCError, JSONRPCResponse

from ..wire.jsonrpc_lines import MAX_LINE_BYTES, Rejected, error_line, message_line, read_message

if TYPE_CHECKING:
    from .passthrough import DirectCalls

__all__ = ["fast_stdio_server"]

log = logging.getLogger(__name__)

_LINE_LIMIT = MAX_LINE_BYTES  # one JSON-RPC message per line; the server limits size itself
_FLUSH_GRACE = 2.0  # seconds for the last answers to be written when the server stops


class _Lines:
    """Lines of a pipe; lines ``take`` handles (returns True for) are not yielded."""

    def __init__(
        self, reader: asyncio.StreamReader, take: Callable[[bytes], bool] | None = None
    ) -> None:
        self.reader = reader
        self._take = take

    def __aiter__(self) -> _Lines:
        return self

    async def __anext__(self) -> bytes:
        while True:
            try:
                line = await self.reader.readline()
            except ValueError:  # longer than _LINE_LIMIT: dropped, its tail read as a line
                log.warning("skipped a line longer than %d bytes from the host", _LINE_LIMIT)
                continue
            if not line:
                raise StopAsyncIteration
            if line.strip() and (self._take is None or not self._take(line)):
                return line


class _Writer:
    """``write``/``flush`` over a pipe, as the SDK's writer expects from an async text file."""

    def __init__(self, writer: asyncio.StreamWriter) -> None:
        self._writer = writer

    async def write(self, text: str) -> None:
        self._writer.write(text.encode("utf-8"))

    def write_line(self, data: bytes) -> None:
        """Queue one complete message line (written whole, never interleaved)."""
        self._writer.write(data)

    async def flush(self) -> None:
        await self._writer.drain()


def _is_pipe_like(fd: int) -> bool:
    """Whether the event loop can watch ``fd``: a pipe, a socket or a terminal (not the null
    device, a character device that epoll refuses)."""
    mode = os.fstat(fd).st_mode
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode) or (stat.S_ISCHR(mode) and os.isatty(fd))


@asynccontextmanager
async def _pipes() -> AsyncIterator[tuple[_Lines, _Writer]]:
    loop = asyncio.get_running_loop()
    wire_in, wire_out = os.dup(0), os.dup(1)
    saved_in, saved_out = os.dup(0), os.dup(1)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.dup2(2, 1)
    os.close(devnull)
    in_file = os.fdopen(wire_in, "rb", buffering=0)
    out_file = os.fdopen(wire_out, "wb", buffering=0)
    transports: list[Any] = []
    try:
        reader = asyncio.StreamReader(limit=_LINE_LIMIT)
        read_transport, _ = await loop.connect_read_pipe(
            lambda: asyncio.StreamReaderProtocol(reader), in_file
        )
        transports.append(read_transport)
        write_transport, protocol = await loop.connect_write_pipe(
            lambda: asyncio.streams.FlowControlMixin(), out_file
        )
        transports.append(write_transport)
        writer = asyncio.StreamWriter(write_transport, protocol, None, loop)
        yield _Lines(reader), _Writer(writer)
    finally:
        for transport in transports:
            transport.close()
        os.dup2(saved_in, 0)
        os.dup2(saved_out, 1)
        os.close(saved_in)
        os.close(saved_out)


async def _read(lines: _Lines, writer: _Writer, send: MemoryObjectSendStream[Any]) -> None:
    """Hand each line's message to the server; answer or skip the lines that are none."""
    async with send:
        async for line in lines:
            try:
                message = read_message(line)
            except Exception:  # a bug here must cost one line, not the connection
                log.exception("skipped a line from the host that could not be read")
                continue
            if not isinstance(message, Rejected):
                await send.send(SessionMessage(message))
            elif not message.answered:
                log.warning("skipped a line from the host: %s", message.message)
            else:
                log.warning(
                    "answered request %r with an error: %s", message.request_id, message.message
                )
                writer.write_line(error_line(message.request_id, message.code, message.message))
                await writer.flush()


async def _write(receive: MemoryObjectReceiveStream[SessionMessage], writer: _Writer) -> None:
    """Write the server's messages, one line each; one that cannot be written costs only
    itself (a response becomes an error response), never the connection."""
    async with receive:
        async for item in receive:
            message = item.message
            try:
                writer.write_line(message_line(message))
            except ValueError:
                log.exception("cannot write a %s", type(message).__name__)
                if not isinstance(message, JSONRPCResponse | JSONRPCError) or message.id is None:
                    continue
                failed = "the server's answer could not be encoded as JSON"
                writer.write_line(error_line(message.id, INTERNAL_ERROR, failed))
            await writer.flush()


@asynccontextmanager
async def fast_stdio_server(direct: DirectCalls | None = None) -> AsyncIterator[tuple[Any, Any]]:
    """``(read_stream, write_stream)`` for ``Server.run`` over this process's stdio; with
    ``direct``, the calls it takes are answered without the SDK (see ``.passthrough``)."""
    try:
        usable = _is_pipe_like(0) and _is_pipe_like(1)
        asyncio.get_running_loop()
    except (OSError, RuntimeError):
        usable = False
    if not usable:
        async with stdio_server() as streams:
            yield streams
        return
    async with _pipes() as (lines, writer), anyio.create_task_group() as tg:
        if direct is not None:
            direct.start(writer.write_line)
            lines = _Lines(lines.reader, direct.take)
        to_server, read_stream = anyio.create_memory_object_stream[SessionMessage | Exception](0)
        write_stream, from_server = anyio.create_memory_object_stream[SessionMessage](0)
        written = anyio.Event()

        async def write() -> None:
            try:
                await _write(from_server, writer)
            finally:
                written.set()

        tg.start_soon(_read, lines, writer, to_server)
        tg.start_soon(write)
        async with read_stream, write_stream:
            yield read_stream, write_stream
        with anyio.move_on_after(_FLUSH_GRACE):
            await written.wait()
        tg.cancel_scope.cancel()
