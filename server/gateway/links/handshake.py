"""How a downstream connection starts: the protocol version both sides agree on and what
the broker declares it can do as a client.

The broker declares sampling, elicitation (form and URL) and roots: what a downstream asks
is relayed to the host whose call is running (see :mod:`.relay`), which answers or refuses.
Roots changes are not relayed, so ``roots.listChanged`` is not declared.
"""

from __future__ import annotations

import mcp_types as types
from context_broker.server.settings import DownstreamConfig
from mcp import ClientSession, MCPError
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, LATEST_HANDSHAKE_VERSION
from pydantic import ValidationError

from ...wire.sdk_compat import MCP_METHOD_HEADER, send_raw

__all__ = ["CLIENT_INFO", "handshake", "negotiate"]

CLIENT_INFO = types.Implementation(name="context-broker-gateway", version="0.1.0")

_RELAYED = types.ClientCapabilities(
    sampling=types.SamplingCapability(),
    elicitation=types.ElicitationCapability(
        form=types.FormElicitationCapability(), url=types.UrlElicitationCapability()
    ),
    roots=types.RootsCapability(),
)


async def negotiate(session: ClientSession, config: DownstreamConfig) -> None:
    """Agree on the protocol version: ``config.protocol_version`` when set, else the newest
    both sides speak. An http server is asked with ``server/discover`` (2026-07-28) first
    and falls back to the ``initialize`` handshake; stdio and sse servers speak the
    handshake (the stdio fast lane and the sse transport are handshake-era wires)."""
    wanted = config.protocol_version
    if (wanted is None and config.kind == "http") or wanted == "2026-07-28":
        try:
            await session.discover()
            return
        except (MCPError, RuntimeError, ValidationError):  # a handshake-era server
            if wanted is not None:
                raise
    await handshake(session, wanted or LATEST_HANDSHAKE_VERSION)


async def handshake(
    session: ClientSession,
    version: str = LATEST_HANDSHAKE_VERSION,
    capabilities: types.ClientCapabilities = _RELAYED,
    client_info: types.Implementation | None = None,
) -> None:
    """The ``initialize`` handshake offering ``version``, declaring ``capabilities`` (by
    default what can be relayed) and ``client_info`` (by default the broker's). Over HTTP the
    request names its method in ``Mcp-Method`` too, as 2026-07-28 servers ask of every
    request (one that speaks only that revision then refuses it cleanly)."""
    params = types.InitializeRequestParams(
        protocol_version=version,
        capabilities=capabilities,
        client_info=client_info or CLIENT_INFO,
    ).model_dump(by_alias=True, mode="json", exclude_none=True)
    raw = await send_raw(
        session,
        "initialize",
        params,
        meta={},
        timeout=None,
        headers={MCP_METHOD_HEADER: "initialize"},
    )
    result = types.InitializeResult.model_validate(raw, by_name=False)
    if result.protocol_version not in HANDSHAKE_PROTOCOL_VERSIONS:
        raise RuntimeError(
            f"unsupported protocol version from the server: {result.protocol_version!r}"
        )
    session.adopt(result)
    await session.send_notification(types.InitializedNotification())
