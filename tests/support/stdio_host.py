"""A host on a real ``context-broker serve`` over stdio, speaking newline-delimited JSON-RPC
line by line: raw lines out, answers read back by id, every wait bounded."""

from __future__ import annotations

import json
import subprocess
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
from anyio.streams.buffered import BufferedByteReceiveStream

from tests.support.broker_procs import BROKER, server_env
from tests.support.handshake import INITIALIZE, INITIALIZED

__all__ = ["StdioHost", "stdio_broker"]

_MAX_LINE = 1 << 26  # an answer line longer than this is a defect of its own
_EXIT_WITHIN = 20.0


def _same_id(got: object, want: object) -> bool:
    """JSON-RPC ids compare with their JSON type: ``7`` is not ``"7"``, ``1`` is not ``true``."""
    return got == want and type(got) is type(want)


class StdioHost:
    """Writes lines to a broker's stdin and reads its answers from stdout.

    Messages read while waiting for another id are kept in ``unclaimed`` (in order), every
    line read is kept in ``lines``, and ``check_line`` (when given) sees each line first.
    ``log`` is the broker's stderr, quoted when the broker stops answering."""

    def __init__(
        self,
        process: anyio.abc.Process,
        *,
        within: float = 30.0,
        check_line: Callable[[bytes], None] | None = None,
        log: Path | None = None,
    ) -> None:
        assert process.stdin is not None and process.stdout is not None
        self.process = process
        self.within = within
        self.log = log
        self.unclaimed: list[dict[str, Any]] = []
        self.lines: list[bytes] = []
        self._out = BufferedByteReceiveStream(process.stdout)
        self._check_line = check_line
        self._next_id = 0

    def fresh_id(self, kind: str = "int") -> int | str:
        """An id no earlier request of this host used, an integer or a string."""
        self._next_id += 1
        return 7_300_000_000 + self._next_id if kind == "int" else f"wire-{self._next_id}"

    async def send_raw(self, line: bytes) -> None:
        """Write ``line`` and a newline as they are (bounded: a broker must keep reading)."""
        assert self.process.stdin is not None
        with anyio.fail_after(self.within):
            await self.process.stdin.send(line + b"\n")

    async def send(self, message: Any) -> None:
        """Write one JSON-RPC message (or batch) as a line."""
        await self.send_raw(json.dumps(message).encode())

    async def call(self, request_id: int | str, name: str, arguments: Any, **extra: Any) -> None:
        """Send a ``tools/call`` of ``name``; ``extra`` goes into its params (``_meta``...)."""
        params = {"name": name, "arguments": arguments, **extra}
        await self.send(
            {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}
        )

    async def cancel(self, request_id: int | str, reason: str | None = None) -> None:
        """Send ``notifications/cancelled`` for ``request_id``."""
        params: dict[str, Any] = {"requestId": request_id}
        if reason is not None:
            params["reason"] = reason
        await self.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": params})

    async def _next(self) -> dict[str, Any]:
        try:
            line = await self._out.receive_until(b"\n", _MAX_LINE)
        except (anyio.IncompleteRead, anyio.EndOfStream):
            raise AssertionError(f"the broker closed its output{self._log_tail()}") from None
        self.lines.append(line)
        if self._check_line is not None:
            self._check_line(line)
        return json.loads(line)  # type: ignore[no-any-return]

    async def answer(
        self, request_id: int | str | None, within: float | None = None
    ) -> dict[str, Any]:
        """The response under ``request_id`` (``None``: a response under ``"id": null``),
        waiting at most ``within`` seconds (the host's bound by default). Requests the broker
        sends under the same id are not responses and stay unclaimed."""
        for i, message in enumerate(self.unclaimed):
            if _is_answer(message, request_id):
                return self.unclaimed.pop(i)
        bound = self.within if within is None else within
        try:
            with anyio.fail_after(bound):
                while True:
                    message = await self._next()
                    if _is_answer(message, request_id):
                        return message
                    self.unclaimed.append(message)
        except TimeoutError:
            said = f"no answer under id {request_id!r} within {bound:g}s"
            raise AssertionError(said + self._log_tail()) from None

    async def request(self, method: str, params: Any = None) -> dict[str, Any]:
        """Send a request under a fresh id and return its response."""
        request_id = self.fresh_id()
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
        if params is not None:
            message["params"] = params
        await self.send(message)
        return await self.answer(request_id)

    async def initialize(self) -> dict[str, Any]:
        """The MCP handshake: ``initialize`` (which must succeed), then ``initialized``;
        returns the ``initialize`` result."""
        await self.send(INITIALIZE)
        answer = await self.answer(INITIALIZE["id"])
        assert "result" in answer, answer
        await self.send(INITIALIZED)
        return answer["result"]  # type: ignore[no-any-return]

    def _log_tail(self) -> str:
        if self.log is None or not self.log.exists():
            return ""
        return ":\n" + self.log.read_text(errors="replace")[-3000:]

    async def assert_alive(self) -> None:
        """The broker is still running and answers a ``ping``."""
        assert self.process.returncode is None, "the broker exited"
        answer = await self.request("ping")
        assert answer.get("result") == {}, answer


def _is_answer(message: dict[str, Any], request_id: int | str | None) -> bool:
    return "method" not in message and _same_id(message.get("id", ...), request_id)


@asynccontextmanager
async def stdio_broker(
    config: Path,
    *,
    log: Path | None = None,
    env: dict[str, str] | None = None,
    initialize: bool = True,
    within: float = 30.0,
    check_line: Callable[[bytes], None] | None = None,
) -> AsyncIterator[StdioHost]:
    """``context-broker serve --config <config>`` over stdio with a :class:`StdioHost` on it,
    the handshake done unless ``initialize`` is false.

    Its stderr goes to ``log`` (dropped without one); ``env`` is added to :func:`server_env`.
    On leaving, the host closes the broker's input, as a host does when it quits; a broker
    that then does not exit within 20 s is killed and fails the test."""
    err = log.open("wb") if log is not None else None
    try:  # the broker writes to its own copy of the file's descriptor
        process = await anyio.open_process(
            [BROKER, "serve", "--config", str(config)],
            env=server_env() | (env or {}),
            stderr=subprocess.DEVNULL if err is None else err,
        )
    finally:
        if err is not None:
            err.close()
    async with process:
        try:
            host = StdioHost(process, within=within, check_line=check_line, log=log)
            if initialize:
                await host.initialize()
            yield host
        except BaseException:
            await _stop(process)
            raise
        exited = await _stop(process)
    assert exited, f"the broker did not exit within {_EXIT_WITHIN:g}s of its input closing"


async def _stop(process: anyio.abc.Process) -> bool:
    """Close the broker's input and wait for it to exit; kill it if it does not in time.
    True when it exited by itself. Shielded: it also cleans up after a cancelled test."""
    assert process.stdin is not None
    with anyio.CancelScope(shield=True):
        await process.stdin.aclose()
        with anyio.move_on_after(_EXIT_WITHIN):
            await process.wait()
        exited = process.returncode is not None
        if not exited:
            process.kill()
            await process.wait()
    return exited
