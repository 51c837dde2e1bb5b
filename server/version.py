"""The installed package's version, for ``--version`` and the MCP server's ``serverInfo``."""

from __future__ import annotations

import shlex
import sys
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

__all__ = ["broker_command", "broker_program", "broker_version"]


def broker_command() -> list[str]:
    """The absolute command that starts this installation's broker (its script beside the
    running Python, else the Python running its module): what a printed command starts
    with, so it runs as printed from a shell without the environment on ``PATH``."""
    scripts = Path(sys.executable).parent
    for name in ("context-broker", "context-broker.exe"):
        script = scripts / name
        if script.is_file():
            return [str(script.absolute())]
    return [str(Path(sys.executable).absolute()), "-m", "context_broker.server.cli"]


def broker_program() -> str:
    """:func:`broker_command` as a shell line."""
    return shlex.join(broker_command())


def broker_version() -> str:
    """The ``mcp-context-broker`` distribution's version; ``0+unknown`` in a source tree
    that was never installed."""
    try:
        return version("mcp-context-broker")
    except PackageNotFoundError:
        return "0+unknown"
