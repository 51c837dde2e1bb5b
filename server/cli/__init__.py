"""The ``context-broker`` command line: its parser and commands (``main``), the ``check``,
``install``, ``setup-model``, ``learning`` and ``repair`` commands, and the short-lived
downstream gathering the offline commands use."""

from .main import main

__all__ = ["main"]
