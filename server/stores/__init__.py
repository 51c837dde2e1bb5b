"""Session-store backends and the one function that picks one from ``[persistence]``.

    memory     in process, gone on exit (the default)
    sqlite     one file (``path``), WAL + synchronous=FULL
    postgres   a shared server (``url``), for several broker replicas
    redis      a shared server (``url``), for several broker replicas

Backends import their driver only when chosen, so a broker that never uses PostgreSQL or
Redis needs neither client library.
"""

from __future__ import annotations

import os
from collections.abc import Callable

from context_broker.server.settings import AppConfig

from contextcore.errors import ConfigError
from contextcore.memory_store import MemorySessionStore
from contextcore.store import SessionStore, StoreError
from contextcore.store_roles import StoreHealth

__all__ = ["build_store", "check_store"]


def _sqlite(config: AppConfig) -> SessionStore:
    path = config.persistence.path
    if path is None:
        raise ConfigError(
            'persistence.backend = "sqlite" needs persistence.path (a file, relative to the '
            "config file)",
            field="persistence.path",
        )
    from .sqlite import SqliteSessionStore

    return SqliteSessionStore(config.resolve(path))


def _url(config: AppConfig) -> str:
    p = config.persistence
    if not p.url:
        raise ConfigError(
            f"persistence.backend = {p.backend!r} needs persistence.url (for example "
            '"postgresql://user@127.0.0.1:5432/broker" or "redis://127.0.0.1:6379/0")',
            field="persistence.url",
        )
    from ._urls import expand_url

    return expand_url(p.url, os.environ)


def _missing_extra(backend: str, exc: ImportError) -> ConfigError:
    return ConfigError(
        f'persistence.backend = "{backend}" needs its client library, which is not installed '
        f"({exc}); install it with: pip install 'mcp-context-broker[{backend}]'",
        field="persistence.backend",
    )


def _postgres(config: AppConfig) -> SessionStore:
    try:
        from .postgres import PostgresSessionStore
    except ImportError as exc:
        raise _missing_extra("postgres", exc) from exc

    return PostgresSessionStore(_url(config))


def _redis(config: AppConfig) -> SessionStore:
    try:
        from .redis import RedisSessionStore  # type: ignore[import-not-found,unused-ignore]
    except ImportError as exc:
        raise _missing_extra("redis", exc) from exc

    store: SessionStore = RedisSessionStore(_url(config))
    return store


_BACKENDS: dict[str, Callable[[AppConfig], SessionStore]] = {
    "memory": lambda _config: MemorySessionStore(),
    "sqlite": _sqlite,
    "postgres": _postgres,
    "redis": _redis,
}


def build_store(config: AppConfig) -> SessionStore:
    """The session store ``[persistence]`` names, opened and ready; ``ConfigError`` naming
    the path (or the URL without its secrets) when it cannot be used."""
    backend = config.persistence.backend
    factory = _BACKENDS.get(backend)
    if factory is None:
        names = ", ".join(sorted(_BACKENDS))
        raise ConfigError(
            f"unknown persistence.backend {backend!r}; use one of {names}",
            field="persistence.backend",
        )
    return factory(config)


def check_store(store: StoreHealth) -> str | None:
    """Why the store cannot take writes right now, or None when it can (for ``check``)."""
    try:
        store.check_writable()
    except StoreError as exc:
        return str(exc)
    return None
