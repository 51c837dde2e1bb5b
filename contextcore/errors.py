"""Exceptions raised by the context core.

    ContextCoreError
     ├── ConfigError          a config file or value is invalid
     ├── CatalogError         a catalog is inconsistent (duplicate names, unknown items)
     ├── SearchInputError     a search request is malformed (empty query, bad topN, ...)
     ├── SessionError         an unknown session or request, or a malformed session id
     ├── HistoryError         a message list or filter specification is invalid
     ├── AssemblyError        an assembly model breaks a rule (contextcore.assembly_model)
     └── ModelError           the embedding model cannot be prepared or loaded

Every error carries a ``field`` when one input field is at fault, so adapters can name it.
"""

from __future__ import annotations

__all__ = [
    "CatalogError",
    "ConfigError",
    "ContextCoreError",
    "HistoryError",
    "ModelError",
    "SearchInputError",
    "SessionError",
]


class ContextCoreError(Exception):
    """Root of every error the context core raises on purpose."""

    def __init__(self, message: str, *, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field

    @property
    def message(self) -> str:
        return str(self.args[0]) if self.args else ""


class ConfigError(ContextCoreError):
    """A configuration file or value is invalid."""


class CatalogError(ContextCoreError):
    """The catalog is inconsistent, or an item does not exist."""


class SearchInputError(ContextCoreError):
    """A search request has a bad argument."""


class SessionError(ContextCoreError):
    """A session or request id is unknown or malformed."""


class HistoryError(ContextCoreError):
    """A message list, filter name or filter option is invalid."""


class ModelError(ContextCoreError):
    """The embedding model cannot be prepared or loaded."""
