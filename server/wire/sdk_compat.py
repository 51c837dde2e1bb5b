"""What the broker uses of the MCP Python SDK beyond its public API, and the switch that
turns off the fast path built on it.

Checked against mcp 2.3.x (``mcp>=2.3,<2.4`` in pyproject.toml); when raising that range,
re-read each item below in the new SDK and run tests/server/test_fast_path_contract.py:

- ``ServerSession._connection``: the SDK makes one ``ServerSession`` per request; the
  object behind ``_connection`` is the same for every request of one host connection, so it
  identifies the connection (for ``tools/list_changed`` and per-connection tool lists). A
  2026-07-28 stream (stdio) gets a ``Connection`` per request, all sharing the stream's
  ``outbound``. :func:`connection_token` keeps a random token on such an object (its
  ``id()`` may be reused by another once it is gone).
- ``ServerSession._request_outbound.transport.headers``: the HTTP headers of the request a
  session object was made for (None on stdio); :func:`request_holder` reads the bearer token.
- ``mcp.os.posix.utilities.terminate_posix_process_tree``: stops a downstream server's
  process group the way the SDK's own ``stdio_client`` does.
- ``mcp.client.stdio.get_default_environment``: the environment the SDK gives a spawned
  server, so the broker's own stdio transport spawns servers alike.
- ``mcp.shared._stream_protocols.ReadStream``: the read-stream type ``ClientSession`` takes.
- ``ClientSession._stamp`` and ``ClientSession._dispatcher.send_raw_request``: how a request
  is stamped with the session's ``_meta`` and sent as JSON; :func:`send_raw` uses them to send
  a host's request downstream with the host's own ``_meta`` keys and take the answer as sent.

The fast path (``server.transport.passthrough`` answering plain forwarded calls from the stdio wire,
``server.gateway.links.stdio_link``'s request lane to stdio downstream servers) is on unless
``[server] fast_path = false`` or ``CONTEXT_BROKER_FAST_PATH=0``; off, every request goes
through the SDK's server and client sessions and downstream servers are spawned by the SDK's
``stdio_client``. The host's stdio lines are read by ``server.transport.stdio`` in both modes, so a
malformed line is answered the same way.
"""

from __future__ import annotations

import hashlib
import os
import secrets
from collections.abc import Mapping
from typing import Any

from mcp import ClientSession
from mcp.client.stdio import get_default_environment
from mcp.os.posix.utilities import terminate_posix_process_tree
from mcp.shared._stream_protocols import ReadStream
from mcp.shared.dispatcher import ProgressFnT
from mcp.shared.inbound import MCP_METHOD_HEADER

from contextcore.errors import ConfigError

__all__ = [
    "FAST_PATH_ENV",
    "MCP_METHOD_HEADER",
    "SDK_RANGE",
    "ReadStream",
    "connection_key",
    "connection_of",
    "connection_token",
    "default_environment",
    "fast_path_enabled",
    "request_holder",
    "send_raw",
    "terminate_process_tree",
]

SDK_RANGE = ">=2.3,<2.4"
"""The ``mcp`` versions the items above were checked against."""

FAST_PATH_ENV = "CONTEXT_BROKER_FAST_PATH"

_ON = frozenset({"1", "true", "yes", "on"})
_OFF = frozenset({"0", "false", "no", "off"})

default_environment = get_default_environment
terminate_process_tree = terminate_posix_process_tree


def connection_of(session: object) -> object:
    """The object behind a host connection, the same for every request's session object on
    it (it lives as long as the connection)."""
    return getattr(session, "_connection", session)


def connection_key(session: object) -> int:
    """One key per host connection, the same for every request's session object on it."""
    return id(connection_of(session))


_TOKEN = "_context_broker_token"


def _token_of(target: object) -> str:
    """A random token kept on ``target``, made on first use: no other object ever has it."""
    token = getattr(target, _TOKEN, None)
    if not isinstance(token, str):
        token = secrets.token_urlsafe(16)
        setattr(target, _TOKEN, token)
    return token


def connection_token(session: object) -> str:
    """One key per host connection, the same for every request's session object on it, that
    no later connection can have (unlike :func:`connection_key`, an ``id()``)."""
    return _token_of(connection_of(session))


def request_holder(session: object) -> str:
    """Who sent the request ``session`` was made for, as far as its transport tells: over HTTP
    the bearer token it carried (a digest; the same for every request without one), else the
    stream it came on (a stdio host's, or a handshake-era connection's), by a token no other
    stream has."""
    transport = getattr(getattr(session, "_request_outbound", None), "transport", None)
    headers = getattr(transport, "headers", None)
    if headers is not None:
        scheme, _, token = str(headers.get("authorization", "")).partition(" ")
        given = token.strip() if scheme.lower() == "bearer" else ""
        return "bearer " + hashlib.sha256(given.encode()).hexdigest()
    connection = connection_of(session)
    return "stream " + _token_of(getattr(connection, "outbound", connection))


async def send_raw(
    session: ClientSession,
    method: str,
    params: Mapping[str, Any],
    *,
    meta: Mapping[str, Any],
    timeout: float | None,
    on_progress: ProgressFnT | None = None,
    headers: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """Send ``method`` with ``params`` on ``session`` and return the result object as the
    server sent it (its JSON-RPC error raises ``MCPError`` carrying it as sent). The session
    stamps the request as it stamps its own (protocol version, headers); the keys of ``meta``
    then replace the stamp's, so the server reads the host's ``_meta`` (client info and
    capabilities, log level, progress token, trace context) and not the broker's; ``headers``
    go with it over HTTP."""
    data: dict[str, Any] = {"method": method, "params": dict(params)}
    opts: dict[str, Any] = {}
    session._stamp(data, opts)  # type: ignore[arg-type]
    if meta:  # a handshake-era stamp adds no _meta, and none is sent for nothing
        data["params"].setdefault("_meta", {}).update(meta)
    if headers:
        opts.setdefault("headers", {}).update(headers)
    if timeout is not None:
        opts["timeout"] = timeout
    if on_progress is not None:
        opts["on_progress"] = on_progress
    return await session._dispatcher.send_raw_request(method, data["params"], opts)  # type: ignore[arg-type]


def fast_path_enabled(configured: bool, environ: Mapping[str, str] | None = None) -> bool:
    """Whether the fast path is on: ``CONTEXT_BROKER_FAST_PATH`` when set, else the config's
    ``[server] fast_path``; ``ConfigError`` if the variable is neither on nor off."""
    raw = (os.environ if environ is None else environ).get(FAST_PATH_ENV)
    if raw is None or not raw.strip():
        return configured
    value = raw.strip().lower()
    if value in _ON:
        return True
    if value in _OFF:
        return False
    raise ConfigError(
        f"{FAST_PATH_ENV}={raw!r} is neither on nor off; set it to 0 to send every request "
        "through the MCP SDK, to 1 for the fast path, or unset it to use [server] fast_path",
        field=FAST_PATH_ENV,
    )
