"""The wire under a downstream connection: spawning a stdio server (on the fast lane of
:mod:`.stdio_link`, or by the SDK's ``stdio_client``) or reaching an HTTP or SSE one, the
server's stderr spooled for error messages, and the client session over it whose questions
and log messages go to a :class:`~.relay.Relay`."""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from contextlib import AsyncExitStack
from pathlib import Path
from types import TracebackType
from typing import IO, Any

import anyio
import httpx2
import mcp_types as types
from context_broker.server.settings import DownstreamConfig
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.client.session import MessageHandlerFnT
from mcp.client.sse import sse_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.message import SessionMessage

from ...wire.sdk_compat import ReadStream, default_environment
from ..errors import GatewayError
from ..naming.names import sanitize
from ..relay.host import Relay
from .handshake import CLIENT_INFO
from .stdio_link import StdioLink, open_stdio_link

__all__ = ["WatchedReadStream", "client_session", "open_transport", "read_tail", "spool_stderr"]

_STDERR_TAIL = 2000


class WatchedReadStream:
    """A read stream that sets ``closed`` when the transport ends (EOF or closed). Once
    :attr:`modern` is set (a 2026-07-28 connection), a result without ``resultType`` is
    read as ``"complete"``, as that revision tells clients to (the SDK's result check
    would otherwise refuse it)."""

    def __init__(self, inner: ReadStream[SessionMessage | Exception], closed: anyio.Event) -> None:
        self._inner = inner
        self._closed = closed
        self.modern = False

    @property
    def last_context(self) -> Any:
        return getattr(self._inner, "last_context", None)

    async def receive(self) -> SessionMessage | Exception:
        try:
            message = await self._inner.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
            self._closed.set()
            raise
        if self.modern and isinstance(message, SessionMessage):
            response = message.message
            if isinstance(response, types.JSONRPCResponse):
                response.result.setdefault("resultType", "complete")
        return message

    async def aclose(self) -> None:
        self._closed.set()
        await self._inner.aclose()

    def __aiter__(self) -> WatchedReadStream:
        return self

    async def __anext__(self) -> SessionMessage | Exception:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    async def __aenter__(self) -> WatchedReadStream:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc_val: BaseException | None,
        exc_tb: TracebackType | None,
    ) -> None:
        await self.aclose()


def read_tail(stream: IO[bytes] | None) -> str:
    """The last ~2000 characters of a spooled stderr file."""
    if stream is None or stream.closed:
        return ""
    try:
        stream.flush()
        size = stream.seek(0, 2)
        stream.seek(max(0, size - _STDERR_TAIL))
        text = stream.read().decode("utf-8", "replace")
        stream.seek(0, 2)
    except (OSError, ValueError):
        return ""
    return text.strip()


def command_problem(config: DownstreamConfig) -> str | None:
    """Why a stdio server's ``command`` cannot be started (not on the ``PATH`` it runs with,
    no such file, not executable), with the fix; None when it can."""
    command = config.command or ""
    where = Path(config.cwd) if config.cwd else Path.cwd()
    if os.sep in command or (os.altsep and os.altsep in command):
        path = Path(command).expanduser()
        path = path if path.is_absolute() else where / path
        if not path.is_file():
            shown = "" if str(path) == command else f" ({str(path)!r})"
            return (
                f"command {command!r} does not exist{shown}; give the right path in the "
                "server's `command` (a relative one is read from its `cwd`, else from the "
                "folder of the file that lists the server)"
            )
        if not os.access(path, os.X_OK):
            return f"command {command!r} is not executable ({str(path)!r}); chmod +x it"
        return None
    search = (default_environment() | dict(config.env)).get("PATH", os.defpath)
    if shutil.which(command, path=search) is not None:
        return None
    shown = os.pathsep.join(search.split(os.pathsep)[:4])
    more = " ..." if search.count(os.pathsep) >= 4 else ""
    return (
        f"command {command!r} is not on the PATH it runs with ({shown}{more}); install it, or "
        "give its absolute path in the server's `command` (a host app such as Claude Desktop "
        "starts the broker with a shorter PATH than your shell's)"
    )


async def open_transport(
    stack: AsyncExitStack,
    config: DownstreamConfig,
    stderr: IO[bytes] | None,
    fast_path: bool,
    auth: httpx2.Auth | None,
) -> tuple[ReadStream[SessionMessage | Exception], Any, StdioLink | None]:
    kind = config.kind
    if kind == "stdio":
        assert config.command is not None
        missing = command_problem(config)
        if missing is not None:
            raise GatewayError(missing)
        params = StdioServerParameters(
            command=config.command,
            args=list(config.args),
            env=dict(config.env) or None,
            cwd=config.cwd,
        )
        if fast_path and sys.platform != "win32":
            link = await stack.enter_async_context(open_stdio_link(params, stderr))
            return link.read_stream, link.write_stream, link
        read, write = await stack.enter_async_context(stdio_client(params, errlog=stderr))  # type: ignore[arg-type, unused-ignore]
        return read, write, None
    assert config.url is not None
    if kind == "http":
        client = await stack.enter_async_context(
            httpx2.AsyncClient(
                headers=dict(config.headers),
                timeout=httpx2.Timeout(config.timeout, read=max(300.0, config.timeout)),
                auth=auth,
            )
        )
        read, write = await stack.enter_async_context(
            streamable_http_client(config.url, http_client=client)
        )
        return read, write, None
    if kind == "sse":
        read, write = await stack.enter_async_context(
            sse_client(config.url, headers=dict(config.headers), timeout=config.timeout, auth=auth)
        )
        return read, write, None
    raise AssertionError(kind)


def spool_stderr(stack: AsyncExitStack, name: str, config: DownstreamConfig) -> IO[bytes] | None:
    """A temporary file for a stdio server's stderr (closed with ``stack``); None for HTTP."""
    if config.kind != "stdio":
        return None
    spool = tempfile.TemporaryFile(prefix=f"mcp-{sanitize(name)}-stderr-")  # noqa: SIM115
    return stack.enter_context(spool)


async def client_session(
    stack: AsyncExitStack,
    read: ReadStream[SessionMessage | Exception],
    write: Any,
    config: DownstreamConfig,
    relay: Relay,
    handle: MessageHandlerFnT,
    closed: anyio.Event,
) -> tuple[ClientSession, WatchedReadStream]:
    """A client session over ``read``/``write`` in ``stack`` whose questions and log
    messages go to ``relay``, and its read stream; ``closed`` is set when its transport
    ends."""
    watched = WatchedReadStream(read, closed)
    session = ClientSession(
        watched,
        write,
        read_timeout_seconds=config.timeout,
        sampling_callback=relay.sample,
        elicitation_callback=relay.elicit,
        list_roots_callback=relay.list_roots,
        logging_callback=relay.log,
        message_handler=handle,
        client_info=CLIENT_INFO,
    )
    await stack.enter_async_context(session)
    return session, watched
