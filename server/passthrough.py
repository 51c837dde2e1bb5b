"""Forwarded downstream calls answered straight from the stdio wire.

A ``tools/call`` of a ``<server>__<tool>`` tool, or of ``call_tool``, that asks for neither
recording (``session_id``) nor progress (``progressToken``) needs nothing from the broker but
the downstream's answer. Such a line is taken off the host's input before the SDK's server
sees it: it is forwarded to the gateway, and the downstream's result object is written back
under the host's request id. This skips the server's message parsing, request dispatch,
result validation and serialization, which cost more than the downstream call itself for a
fast tool. Everything else, including calls that carry any ``_meta`` (the 2026-07-28 request
envelope among them) and every message before the host's ``notifications/initialized``, goes
through the SDK unchanged.

Lines the short path cannot read safely (nesting deeper than the wire's limit, broken JSON, a
lone surrogate escape) are left to the SDK path, which answers them (see ``server.stdio``).

The results are those of the full path: the downstream's object as sent (secrets masked), or a
tool error naming server and tool when the server is down, times out or fails. A host's
``notifications/cancelled`` for such a call cancels the downstream request and no response is
sent, as the specification asks.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import anyio
import anyio.abc
from mcp_types import INTERNAL_ERROR

from .downstream import Downstream
from .jsonrpc_lines import encode_line, safe_loads

__all__ = ["DirectCalls"]

log = logging.getLogger(__name__)

WriteFn = Callable[[bytes], None]
_RequestKey = tuple[type, int | str]


def _key(request_id: object) -> _RequestKey | None:
    """A JSON-RPC id as a dict key (``1`` and ``"1"`` stay distinct), None if not an id."""
    if isinstance(request_id, bool) or not isinstance(request_id, int | str):
        return None
    return (type(request_id), request_id)


class DirectCalls:
    """Takes eligible ``tools/call`` lines off a stdio input stream and answers them.

    :meth:`take` is called with every input line before it is handed to the SDK; it returns
    True when the line was handled here. Calls run in the task group given to :meth:`start`.
    """

    def __init__(self, downstream: Downstream) -> None:
        self._downstream = downstream
        self._ready = False
        self._inflight: dict[_RequestKey, anyio.CancelScope] = {}
        self._tg: anyio.abc.TaskGroup | None = None
        self._write: WriteFn | None = None

    def start(self, tg: anyio.abc.TaskGroup, write: WriteFn) -> None:
        """Run calls in ``tg`` and write their responses (one JSON line each) with ``write``."""
        self._tg = tg
        self._write = write

    @property
    def inflight(self) -> int:
        """Calls forwarded and not yet answered."""
        return len(self._inflight)

    def take(self, line: bytes) -> bool:
        """Handle ``line`` here (True) or leave it to the SDK (False)."""
        if self._tg is None:
            return False
        if b'"tools/call"' in line:
            # "\ud8"-"\udf": a surrogate escape, maybe a lone one the full path repairs
            escaped = b"\\ud" in line or b"\\uD" in line
            return self._ready and not escaped and self._take_call(line)
        if b"notifications/cancelled" in line:
            return self._take_cancel(line)
        if not self._ready and b"notifications/initialized" in line:
            self._ready = _method(line) == "notifications/initialized"
        return False

    def _take_call(self, line: bytes) -> bool:
        message = _object(line)
        if message is None or message.get("method") != "tools/call":
            return False
        if message.get("jsonrpc") != "2.0":
            return False
        request_id: int | str = message.get("id")  # type: ignore[assignment]  # checked by _key
        key = _key(request_id)
        params = message.get("params")
        if key is None or key in self._inflight or not isinstance(params, dict):
            return False
        name, arguments = params.get("name"), params.get("arguments")
        if not params.keys() <= {"name", "arguments"} or not isinstance(name, str):
            return False  # _meta (session_id, progress, the 2026 envelope) needs the full path
        if arguments is None:
            arguments = {}
        if not isinstance(arguments, dict):
            return False
        if not self._downstream.forwards_plainly(name, arguments):
            return False
        scope = anyio.CancelScope()
        self._inflight[key] = scope
        assert self._tg is not None
        self._tg.start_soon(self._call, key, request_id, name, arguments, scope)
        return True

    def _take_cancel(self, line: bytes) -> bool:
        message = _object(line)
        if message is None or message.get("method") != "notifications/cancelled":
            return False
        params = message.get("params")
        key = _key(params.get("requestId")) if isinstance(params, dict) else None
        scope = self._inflight.get(key) if key is not None else None
        if scope is None:
            return False
        scope.cancel()
        return True

    async def _call(
        self,
        key: _RequestKey,
        request_id: int | str,
        name: str,
        arguments: dict[str, Any],
        scope: anyio.CancelScope,
    ) -> None:
        response: dict[str, Any] | None = None
        try:
            with scope:
                result = await self._downstream.call_json(name, arguments)
                response = {"jsonrpc": "2.0", "id": request_id, "result": result}
        except Exception:  # a bug here must cost one call, not the connection
            log.exception("forwarding %s failed", name)
            error = {"code": INTERNAL_ERROR, "message": f"internal error forwarding {name!r}"}
            response = {"jsonrpc": "2.0", "id": request_id, "error": error}
        finally:
            self._inflight.pop(key, None)
        if response is None:  # cancelled by the host: no response
            log.debug("call %r of %s cancelled by the host", request_id, name)
            return
        assert self._write is not None
        try:
            data = encode_line(response)
        except (ValueError, RecursionError):
            log.exception("the answer of %s cannot be written as JSON", name)
            error = {"code": INTERNAL_ERROR, "message": f"the answer of {name!r} is not valid JSON"}
            data = encode_line({"jsonrpc": "2.0", "id": request_id, "error": error})
        self._write(data)


def _method(line: bytes) -> object:
    message = _object(line)
    return message.get("method") if message is not None else None


def _object(line: bytes) -> dict[str, Any] | None:
    try:
        message = safe_loads(line)
    except ValueError:
        return None
    return message if isinstance(message, dict) else None
