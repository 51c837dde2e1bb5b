"""Forwarded downstream calls answered straight from the stdio wire.

A ``tools/call`` of an exposed downstream tool, or of ``call_tool``, to a server with a fast
lane (a stdio server, see ``server.gateway.links.stdio_link``) that asks for neither recording
(``session_id``) nor progress (``progressToken``) needs nothing from the broker but the
downstream's answer. Such a line is taken off the host's input before the SDK's server sees
it: it is written downstream at once, and the downstream's answer is written back under the
host's request id where it is read. This skips the server's message parsing, request
dispatch, result validation and serialization, which cost more than the downstream call itself
for a fast tool. Everything else, including calls that carry any ``_meta`` (the 2026-07-28
request envelope among them), calls to servers without a fast lane, every message before the
host's ``notifications/initialized``, and every call of a host whose ``initialize`` declared
elicitation, sampling or roots (a downstream may ask those of it during the call, through the
full path's relay), goes through the SDK unchanged.

Lines the short path cannot read safely (nesting deeper than the wire's limit, broken JSON, a
lone surrogate escape) are left to the SDK path, which answers them (see ``.stdio``).

The answers are those of the full path: the downstream's result object as sent (secrets
masked), the JSON-RPC error it answered an exposed tool's call with, as sent, or a tool error
naming server and tool when the server is down, times out or fails. The downstream's log
messages during such a call reach the host before the answer, unless below the level the host
set with ``logging/setLevel``: only well-formed ``notifications/message`` notifications, each
written anew from its parsed params; nothing else a downstream writes reaches the host here.
A host's ``notifications/cancelled`` for such a call cancels the downstream request and no
response is sent, as the specification asks.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from mcp_types import INTERNAL_ERROR, ErrorData

from ..gateway.relay.host import severity, shown
from ..host.gateway_tools import GatewayTools
from ..wire.jsonrpc_lines import (
    RequestKey,
    error_line,
    id_key,
    notification_line,
    read_object,
    result_line,
)

__all__ = ["DirectCalls"]

log = logging.getLogger(__name__)

WriteFn = Callable[[bytes], None]


class DirectCalls:
    """Takes eligible ``tools/call`` lines off a stdio input stream and answers them.

    :meth:`take` is called with every input line before it is handed to the SDK; it returns
    True when the line was handled here. A call to a server with a fast lane is written
    downstream at once and answered where the downstream's answer is read, with no task
    waiting for it; others are left to the SDK. Nothing is taken before :meth:`start`.
    """

    def __init__(self, gateway_tools: GatewayTools) -> None:
        self._gateway_tools = gateway_tools
        self._ready = False
        # Per call in flight, how to give it up when the host cancels it.
        self._inflight: dict[RequestKey, Callable[[], None]] = {}
        self._host_answers = False  # the host declared elicitation, sampling or roots
        self._write: WriteFn | None = None
        self._min_level = 0  # the host's logging/setLevel (everything until it sets one)

    def start(self, write: WriteFn) -> None:
        """Start taking calls; their answers (one JSON line each) are written with ``write``."""
        self._write = write

    def take(self, line: bytes) -> bool:
        """Handle ``line`` here (True) or leave it to the SDK (False)."""
        if self._write is None:
            return False
        if b'"tools/call"' in line:
            # "\ud8"-"\udf": a surrogate escape, maybe a lone one the full path repairs
            escaped = b"\\ud" in line or b"\\uD" in line
            return self._ready and not escaped and self._take_call(line)
        if b"notifications/cancelled" in line:
            return self._take_cancel(line)
        if b'"logging/setLevel"' in line:  # the SDK answers it; log messages here follow it
            level = severity(_set_level(line))
            self._min_level = self._min_level if level is None else level
        if not self._ready and b'"initialize"' in line:
            self._host_answers = _host_answers(line) or self._host_answers
        if not self._ready and b"notifications/initialized" in line:
            # A host that can answer a downstream's questions (elicitation, sampling, roots)
            # gets every call through the full path, where the relay can reach it.
            initialized = _method(line) == "notifications/initialized"
            self._ready = initialized and not self._host_answers
        return False

    def _take_call(self, line: bytes) -> bool:
        message = read_object(line)
        if message is None or message.get("method") != "tools/call":
            return False
        if message.get("jsonrpc") != "2.0":
            return False
        request_id: int | str = message.get("id")  # type: ignore[assignment]  # checked by _key
        key = id_key(request_id)
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
        if not self._gateway_tools.forwards_plainly(name, arguments):
            return False
        self._inflight[key] = _not_sent
        answer = self._answerer(key, request_id, name)
        try:
            give_up = self._gateway_tools.forward_soon(name, arguments, answer, self._tell)
        except Exception:  # a bug here must cost one call, not the connection
            log.exception("forwarding %s failed", name)
            self._inflight.pop(key, None)
            assert self._write is not None
            failed = f"internal error forwarding {name!r}"
            self._write(error_line(request_id, INTERNAL_ERROR, failed))
            return True
        if give_up is None:  # no fast lane (or still gathering): the full path takes it
            del self._inflight[key]
            return False
        if key in self._inflight:  # not answered yet
            self._inflight[key] = lambda: give_up("cancelled by the host")
        return True

    def _answerer(
        self, key: RequestKey, request_id: int | str, name: str
    ) -> Callable[[dict[str, Any] | ErrorData], None]:
        """What writes the answer of a call forwarded with no task waiting for it: its result,
        or the JSON-RPC error the server answered with, as it sent it."""

        def answer(result: dict[str, Any] | ErrorData) -> None:
            self._inflight.pop(key, None)
            assert self._write is not None
            if isinstance(result, ErrorData):
                self._write(error_line(request_id, result.code, result.message, result.data))
            else:
                self._write(_answer(request_id, name, result))

        return answer

    def _tell(self, line: bytes) -> bool:
        """A downstream's log message during a call forwarded here, unless below the level
        the host set (``logging/setLevel``): only a notification of a method a host may be
        sent here (:data:`_TOLD`), written anew from its parsed params, so no response,
        request or other bytes of a server reach the host this way (answers reach it only
        under the host's own ids, from :meth:`_answerer`). Anything else is left (False)."""
        assert self._write is not None
        message = read_object(line)
        if message is None or "id" in message or message.get("method") not in _TOLD:
            return False
        method, params = message["method"], message.get("params")
        if not isinstance(params, dict):
            return False
        if shown(_level(message), self._min_level):
            self._write(notification_line(method, params))
        return True

    def _take_cancel(self, line: bytes) -> bool:
        message = read_object(line)
        if message is None or message.get("method") != "notifications/cancelled":
            return False
        params = message.get("params")
        key = id_key(params.get("requestId")) if isinstance(params, dict) else None
        cancel = self._inflight.pop(key, None) if key is not None else None
        if cancel is None:
            return False
        cancel()
        return True


def _answer(request_id: int | str, name: str, result: dict[str, Any]) -> bytes:
    try:
        return result_line(request_id, result)
    except (ValueError, RecursionError):
        log.exception("the answer of %s cannot be written as JSON", name)
        failed = f"the answer of {name!r} is not valid JSON"
        return error_line(request_id, INTERNAL_ERROR, failed)


def _not_sent() -> None:
    """Giving up a call whose forwarding has not started: nothing to do."""


_ASKABLE = ("elicitation", "sampling", "roots")
_TOLD = frozenset({"notifications/message"})
"""What a downstream may send a host during a call taken here: its log messages."""


def _host_answers(line: bytes) -> bool:
    """Whether ``line`` is an ``initialize`` request whose client capabilities include one
    a downstream may ask of the host during a call."""
    message = read_object(line)
    if message is None or message.get("method") != "initialize":
        return False
    params = message.get("params")
    capabilities = params.get("capabilities") if isinstance(params, dict) else None
    return isinstance(capabilities, dict) and any(k in capabilities for k in _ASKABLE)


def _set_level(line: bytes) -> str | None:
    """The level a host's ``logging/setLevel`` request line asks for."""
    message = read_object(line)
    if message is None or message.get("method") != "logging/setLevel":
        return None
    return _level(message)


def _level(message: dict[str, Any] | None) -> str | None:
    params = message.get("params") if message is not None else None
    level = params.get("level") if isinstance(params, dict) else None
    return level if isinstance(level, str) else None


def _method(line: bytes) -> object:
    message = read_object(line)
    return message.get("method") if message is not None else None
