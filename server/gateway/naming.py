"""Names under which downstream tools and prompts are exposed to hosts: ``<server>__<name>``.

Hosts such as Claude Desktop accept only ``^[A-Za-z0-9_-]{1,64}$``. Each other character becomes
``_``; a name that is too long is cut and given a short hash suffix. Names are assigned for the
whole set at once so collisions after sanitizing are seen: when several originals map to the same
name, the one that needed no change (if any) keeps it and every other gets ``_<hash>`` computed
from its own server and original name, so the result never depends on listing order.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from urllib.parse import quote, unquote, urlsplit

__all__ = [
    "MAX_NAME",
    "RESOURCE_SCHEME",
    "SEPARATOR",
    "ExposedNames",
    "assign_names",
    "sanitize",
    "split_resource_uri",
    "wrap_resource_uri",
]

MAX_NAME = 64
SEPARATOR = "__"
RESOURCE_SCHEME = "downstream"
_BAD = re.compile(r"[^A-Za-z0-9_-]")
_HASH_CHARS = 6


def sanitize(text: str) -> str:
    """``text`` with every character outside ``[A-Za-z0-9_-]`` replaced by ``_``."""
    return _BAD.sub("_", text) or "_"


def _digest(server: str, name: str, length: int) -> str:
    return hashlib.sha256(f"{server}\0{name}".encode()).hexdigest()[:length]


def _suffixed(base: str, server: str, name: str, length: int) -> str:
    suffix = "_" + _digest(server, name, length)
    return base[: MAX_NAME - len(suffix)] + suffix


def assign_names(pairs: Iterable[tuple[str, str]]) -> dict[tuple[str, str], str]:
    """Exposed name for each ``(server, original name)``; unique, valid, order-independent."""
    keys = sorted(set(pairs))
    raw = {k: f"{sanitize(k[0])}{SEPARATOR}{sanitize(k[1])}" for k in keys}
    groups: dict[str, list[tuple[str, str]]] = {}
    for key in keys:
        groups.setdefault(raw[key], []).append(key)
    out: dict[tuple[str, str], str] = {}
    for base, members in groups.items():
        clean = [k for k in members if f"{k[0]}{SEPARATOR}{k[1]}" == base]
        keeper = clean[0] if len(clean) == 1 and len(base) <= MAX_NAME else None
        for key in members:
            out[key] = base if key == keeper else _suffixed(base, *key, _HASH_CHARS)
    return _settle(out)


class ExposedNames:
    """The gateway's tool names both ways: ``(server, tool)`` ↔ exposed name. Names of a
    removed server's tools still resolve (to that server) until it is added again, so a
    host that calls one is told the server is gone instead of "unknown tool"."""

    def __init__(self) -> None:
        self._names: dict[tuple[str, str], str] = {}
        self._by_exposed: dict[str, tuple[str, str]] = {}
        self._gone: dict[str, tuple[str, str]] = {}

    def assign(self, pairs: Iterable[tuple[str, str]]) -> None:
        """Name every ``(server, original name)`` of the servers there are now."""
        self._names = assign_names(pairs)
        self._by_exposed = self._gone | {name: key for key, name in self._names.items()}

    def name(self, server: str, tool: str) -> str | None:
        """The exposed name of ``server``'s ``tool``, if it has one."""
        return self._names.get((server, tool))

    def resolve(self, exposed: str) -> tuple[str, str] | None:
        """``(server, original name)`` of an exposed name, or None."""
        return self._by_exposed.get(exposed)

    def server_removed(self, server: str) -> None:
        """Keep resolving the names ``server``'s tools had (call :meth:`assign` next)."""
        self._gone |= {name: key for key, name in self._names.items() if key[0] == server}

    def server_added(self, server: str) -> None:
        """``server`` is back: its tools are named afresh (call :meth:`assign` next)."""
        self._gone = {name: key for name, key in self._gone.items() if key[0] != server}


def _settle(names: dict[tuple[str, str], str]) -> dict[tuple[str, str], str]:
    """Lengthen hash suffixes until every name is unique (a hash clash is astronomically rare,
    but a suffixed name may also equal another server's natural name)."""
    length = _HASH_CHARS
    while True:
        seen: dict[str, list[tuple[str, str]]] = {}
        for key, name in sorted(names.items()):
            seen.setdefault(name, []).append(key)
        clashes = [keys for keys in seen.values() if len(keys) > 1]
        if not clashes:
            return names
        length += 2
        for keys in clashes:
            for key in keys:
                base = f"{sanitize(key[0])}{SEPARATOR}{sanitize(key[1])}"
                names[key] = _suffixed(base, *key, length)


def wrap_resource_uri(server: str, uri: str) -> str:
    """The broker-side URI of a downstream resource: ``downstream://<server>/<quoted uri>``."""
    return f"{RESOURCE_SCHEME}://{quote(server, safe='')}/{quote(uri, safe='')}"


def split_resource_uri(wrapped: str) -> tuple[str, str] | None:
    """``(server, original uri)`` of a wrapped URI, or None if it is not one."""
    parts = urlsplit(wrapped)
    if parts.scheme != RESOURCE_SCHEME or not parts.netloc or not parts.path.startswith("/"):
        return None
    original = unquote(parts.path[1:])
    return (unquote(parts.netloc), original) if original else None
