"""The installed package's version, for ``--version`` and the MCP server's ``serverInfo``."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

__all__ = ["broker_version"]


def broker_version() -> str:
    """The ``mcp-context-broker`` distribution's version; ``0+unknown`` in a source tree
    that was never installed."""
    try:
        return version("mcp-context-broker")
    except PackageNotFoundError:
        return "0+unknown"
