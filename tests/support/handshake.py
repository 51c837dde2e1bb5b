"""The MCP handshake a test host opens with, written once for stdio and HTTP alike."""

from __future__ import annotations

from typing import Any

__all__ = ["INITIALIZE", "INITIALIZED", "PROTOCOL_VERSION"]

PROTOCOL_VERSION = "2025-11-25"
"""The protocol revision the test hosts ask for (the broker's newest)."""

INITIALIZE: dict[str, Any] = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": PROTOCOL_VERSION,
        "capabilities": {},
        "clientInfo": {"name": "test-host", "version": "1"},
    },
}
"""The ``initialize`` request, under id 1."""

INITIALIZED: dict[str, Any] = {"jsonrpc": "2.0", "method": "notifications/initialized"}
"""The notification that ends the handshake once ``initialize`` is answered."""
