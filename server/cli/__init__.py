"""The ``context-broker`` command line: its parser and commands (``commands``), the ``check``,
``install``, ``setup-model``, ``learning`` and ``repair`` commands, and the short-lived
downstream gathering the offline commands use."""

from __future__ import annotations

import sys
from collections.abc import Sequence

__all__ = ["main"]


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``context-broker`` console script.

    ``--version`` alone is answered here, before the commands' modules (the MCP SDK, the
    gateway, the embedder) are imported, so it returns at once."""
    args = list(sys.argv[1:] if argv is None else argv)
    if args == ["--version"]:
        from ..version import broker_version

        print(f"context-broker {broker_version()}")
        return 0
    from .commands import main as run

    return run(args)
