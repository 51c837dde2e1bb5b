"""Names under which downstream tools and prompts are exposed to hosts: ``<prefix><name>``.

A server's prefix is its ``prefix`` setting, by default ``<server>__``; ``prefix = ""`` exposes
the downstream's own names. Hosts such as Claude Desktop accept only ``^[A-Za-z0-9_-]{1,64}$``.
Each other character becomes ``_``; a name that is too long is cut and given a short hash
suffix. Names are assigned for the whole set at once so collisions are seen: when several
originals map to the same name after sanitizing, the one that needed no change (if any) keeps
it and every other gets ``_<hash>`` computed from its own server and original name, so the
result never depends on listing order. When two servers' tools would be exposed under the very
same name as written (only possible with custom prefixes), the first server in name order keeps
it and the other's tool is not exposed (it is reported as a clash); a downstream tool never
takes the name of one of the broker's own tools.

A name that begins with a server's prefix belongs to that server (the longest such prefix
wins), whether or not it lists a tool of that name right now: a ``prefix = ""`` server's tool
``zeta__deploy`` is never exposed while a server ``zeta`` is configured with its default
prefix (it is reported as a clash), so it can neither take ``zeta``'s ``deploy`` nor stand in
for it while that tool is held, unlisted or its server down.

A host may also call a tool by the downstream's own name (an MCP App rendered from a
downstream's ``ui://`` resource writes those names into its HTML): the call reaches the one
server that has a tool of that name, and a name two servers share is refused naming both.
"""

from __future__ import annotations

import hashlib
import logging
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from urllib.parse import quote, unquote, urlsplit

__all__ = [
    "MAX_NAME",
    "RESOURCE_SCHEME",
    "SEPARATOR",
    "UI_SCHEME",
    "ExposedNames",
    "Naming",
    "assign_names",
    "name_all",
    "prefix_for",
    "prefix_owner",
    "prefix_problem",
    "sanitize",
    "split_resource_uri",
    "wrap_resource_uri",
]

log = logging.getLogger(__name__)

MAX_NAME = 64
SEPARATOR = "__"
RESOURCE_SCHEME = "downstream"
UI_SCHEME = "ui"
"""The gateway's own tools, listed beside the broker's."""
_BAD = re.compile(r"[^A-Za-z0-9_-]")
_HASH_CHARS = 6

Key = tuple[str, str]  # (server, original name)


def sanitize(text: str) -> str:
    """``text`` with every character outside ``[A-Za-z0-9_-]`` replaced by ``_``."""
    return _BAD.sub("_", text) or "_"


def prefix_for(server: str, prefix: str | None) -> str:
    """The text before ``server``'s exposed names: ``prefix`` as set, by default
    ``<server>__`` (sanitized)."""
    return f"{sanitize(server)}{SEPARATOR}" if prefix is None else prefix


def prefix_problem(
    prefixes: Mapping[str, str | None], reserved: frozenset[str] = frozenset()
) -> str | None:
    """Why these servers' prefixes (by server name) cannot all be used, or None: two servers
    with the same non-empty prefix would expose the same names, and a prefix that begins one
    of the broker's tool names could expose a downstream tool under it. Servers with
    ``prefix = ""`` are checked when their tools are listed (see :class:`ExposedNames`)."""
    seen: dict[str, str] = {}
    for server, configured in sorted(prefixes.items()):
        prefix = prefix_for(server, configured)
        if not prefix:
            continue
        if prefix in seen:
            return (
                f"servers {seen[prefix]!r} and {server!r} both use the prefix {prefix!r}, so "
                "their tools and prompts would be exposed under the same names; give one of "
                "them another prefix"
            )
        seen[prefix] = server
        taken = sorted(n for n in reserved if n.startswith(prefix))
        if taken:
            return (
                f"server {server!r}: prefix {prefix!r} begins the broker's own tool names "
                f"{', '.join(map(repr, taken))}, so one of its tools could be exposed under "
                "one of them; choose another prefix"
            )
    return None


def _as_written(key: Key, prefix: str | None) -> str:
    """The exposed name ``key`` would have if nothing needed sanitizing."""
    server, name = key
    return f"{server}{SEPARATOR}{name}" if prefix is None else f"{prefix}{name}"


def _digest(server: str, name: str, length: int) -> str:
    return hashlib.sha256(f"{server}\0{name}".encode()).hexdigest()[:length]


def _suffixed(base: str, server: str, name: str, length: int) -> str:
    suffix = "_" + _digest(server, name, length)
    return base[: MAX_NAME - len(suffix)] + suffix


@dataclass
class Naming:
    """The names of one set of tools or prompts: exposed name by ``(server, original)``; a
    key that is not named clashed, and ``clashes`` says with what."""

    names: dict[Key, str] = field(default_factory=dict)
    clashes: dict[Key, str] = field(default_factory=dict)


def name_all(
    pairs: Iterable[Key],
    prefixes: Mapping[str, str | None] | None = None,
    reserved: frozenset[str] = frozenset(),
    kind: str = "tool",
) -> Naming:
    """Exposed names for each ``(server, original name)``: unique, valid, order-independent;
    ``prefixes`` by server (missing: the default), ``reserved`` names are never given."""
    prefixes = prefixes or {}
    keys = sorted(set(pairs))
    raw = {k: prefix_for(k[0], prefixes.get(k[0])) + sanitize(k[1]) for k in keys}
    out = Naming()
    out.clashes = _trespassers(keys, raw, prefixes, kind)
    groups: dict[str, list[Key]] = {}
    for key in keys:
        if key not in out.clashes:
            groups.setdefault(raw[key], []).append(key)
    for base, members in groups.items():
        clean = [k for k in members if _as_written(k, prefixes.get(k[0])) == base]
        fits = len(base) <= MAX_NAME
        if base in reserved:
            holder = "the broker's own tool"
        elif len(clean) > 1:
            holder = f"{kind} {clean[0][1]!r} of server {clean[0][0]!r}"
        else:
            holder = ""
        for key in members:
            if fits and key in clean and (not holder or (key == clean[0] and base not in reserved)):
                out.names[key] = base
            elif fits and key in clean:
                out.clashes[key] = (
                    f"{kind} {key[1]!r} of server {key[0]!r} is not exposed: its name "
                    f"{base!r} is taken by {holder}"
                )
            else:
                out.names[key] = _suffixed(base, *key, _HASH_CHARS)
    out.names = _settle(out.names, raw)
    return out


def prefix_owner(name: str, prefixes: Mapping[str, str | None]) -> tuple[str, str] | None:
    """``(server, prefix)`` of the server whose names ``name`` lies among: the longest
    non-empty prefix of the servers in ``prefixes`` that begins it; None if none does."""
    owner: tuple[str, str] | None = None
    for server, configured in prefixes.items():
        prefix = prefix_for(server, configured)
        if prefix and name.startswith(prefix) and (owner is None or len(prefix) > len(owner[1])):
            owner = (server, prefix)
    return owner


def _trespassers(
    keys: list[Key], raw: Mapping[Key, str], prefixes: Mapping[str, str | None], kind: str
) -> dict[Key, str]:
    """Why each key whose name lies among another server's names (see :func:`prefix_owner`)
    is not exposed: a name belongs to the server whose prefix begins it."""
    every = {**{server: None for server, _ in keys}, **prefixes}
    out: dict[Key, str] = {}
    for key in keys:
        owner = prefix_owner(raw[key], every)
        own = prefix_for(key[0], every[key[0]])
        if owner is not None and owner[0] != key[0] and len(owner[1]) > len(own):
            out[key] = (
                f"{kind} {key[1]!r} of server {key[0]!r} is not exposed: its name "
                f"{raw[key]!r} lies among server {owner[0]!r}'s names (prefix {owner[1]!r}); "
                f"give server {key[0]!r} a prefix, or call it with call_tool"
            )
    return out


def assign_names(
    pairs: Iterable[Key], prefixes: Mapping[str, str | None] | None = None
) -> dict[Key, str]:
    """Exposed name for each ``(server, original name)`` (see :func:`name_all`)."""
    return name_all(pairs, prefixes).names


class ExposedNames:
    """The gateway's tool names both ways: ``(server, tool)`` ↔ exposed name. Names of a
    removed server's tools still resolve (to that server) until it is added again, so a
    host that calls one is told the server is gone instead of "unknown tool". A tool's own
    (bare) name resolves too, when one server alone has a tool of that name. ``reserved``:
    the broker's own tool names, never given to a downstream tool."""

    def __init__(self, reserved: frozenset[str] = frozenset()) -> None:
        self._reserved = reserved
        self._names: dict[Key, str] = {}
        self._by_exposed: dict[str, Key] = {}
        self._gone: dict[str, Key] = {}
        self._bare: dict[str, list[Key]] = {}
        self._clashes: dict[Key, str] = {}
        self._prefixes: dict[str, str | None] = {}

    def assign(
        self, pairs: Iterable[Key], prefixes: Mapping[str, str | None] | None = None
    ) -> None:
        """Name every ``(server, original name)`` of the servers there are now; a name two
        servers would both expose goes to the first (each new clash is logged)."""
        keys = sorted(set(pairs))
        naming = name_all(keys, prefixes, self._reserved)
        for key, why in naming.clashes.items():
            if self._clashes.get(key) != why:
                log.warning("%s", why)
        self._names, self._clashes = naming.names, naming.clashes
        self._prefixes = dict(prefixes or {})
        self._by_exposed = self._gone | {name: key for key, name in self._names.items()}
        self._bare = {}
        for key in keys:
            if key not in self._clashes and not self.claimed(key[1], key[0]):
                self._bare.setdefault(key[1], []).append(key)

    def claimed(self, name: str, by: str | None = None) -> bool:
        """Whether ``name`` lies among the names of a server (other than ``by``) with a
        prefix, so that only that server may answer to it (see :func:`prefix_owner`)."""
        owner = prefix_owner(name, self._prefixes)
        return owner is not None and owner[0] != by

    def name(self, server: str, tool: str) -> str | None:
        """The exposed name of ``server``'s ``tool``, if it has one."""
        return self._names.get((server, tool))

    def resolve(self, exposed: str) -> Key | None:
        """``(server, original name)`` of an exposed name, or of a tool's own name that one
        server alone has; else None."""
        found = self._by_exposed.get(exposed)
        if found is not None or exposed in self._reserved:
            return found  # the broker's own tools answer to their names
        owners = self._bare.get(exposed, [])
        return owners[0] if len(owners) == 1 else None

    def clashes(self, server: str) -> list[str]:
        """Why some of ``server``'s tools are not exposed (a name another holds)."""
        return [why for key, why in sorted(self._clashes.items()) if key[0] == server]

    def unknown(self, name: str) -> str:
        """What to tell a host that called ``name``, which :meth:`resolve` does not know."""
        owners = self._bare.get(name, [])
        if len(owners) > 1:
            ways = " and ".join(
                f"{server!r} (call it as {self._names.get((server, tool), tool)!r})"
                for server, tool in owners
            )
            return (
                f"tool {name!r} is offered by more than one downstream server: {ways}; "
                "call it by one of those names"
            )
        return (
            f"unknown tool {name[:100]!r}: call a tool by a name this server's tools/list "
            "shows, or any downstream server's tool with call_tool (server and tool name; "
            "list_servers names the servers)"
        )

    def server_removed(self, server: str) -> None:
        """Keep resolving the names ``server``'s tools had (call :meth:`assign` next)."""
        self._gone |= {name: key for key, name in self._names.items() if key[0] == server}

    def server_added(self, server: str) -> None:
        """``server`` is back: its tools are named afresh (call :meth:`assign` next)."""
        self._gone = {name: key for name, key in self._gone.items() if key[0] != server}


def _settle(names: dict[Key, str], raw: Mapping[Key, str]) -> dict[Key, str]:
    """Lengthen hash suffixes until every name is unique (a hash clash is astronomically rare,
    but a suffixed name may also equal another server's natural name)."""
    length = _HASH_CHARS
    while True:
        seen: dict[str, list[Key]] = {}
        for key, name in sorted(names.items()):
            seen.setdefault(name, []).append(key)
        clashes = [keys for keys in seen.values() if len(keys) > 1]
        if not clashes:
            return names
        length += 2
        for keys in clashes:
            for key in keys:
                names[key] = _suffixed(raw[key], *key, length)


def wrap_resource_uri(server: str, uri: str, prefix: str | None = None) -> str:
    """The broker-side URI of a downstream resource: with ``prefix = ""``, and for a ``ui://``
    URI always (hosts render MCP Apps from it, as the tool's ``_meta.ui.resourceUri`` and the
    app's HTML name it), the downstream's own URI; any other becomes
    ``downstream://<server>/<quoted uri>``. A URI two servers would both expose goes to the
    first (see :class:`server.gateway._proxy.ResourceProxy`)."""
    if prefix == "" or urlsplit(uri).scheme.lower() == UI_SCHEME:
        return uri
    return f"{RESOURCE_SCHEME}://{quote(server, safe='')}/{quote(uri, safe='')}"


def split_resource_uri(wrapped: str) -> tuple[str, str] | None:
    """``(server, original uri)`` of a ``downstream://`` URI, or None if it is not one. The
    original is everything after ``<server>/``, unquoted: a URI filled in from a wrapped
    template may carry a query or fragment of its own (``{?name}``)."""
    parts = urlsplit(wrapped)
    if parts.scheme != RESOURCE_SCHEME or not parts.netloc or not parts.path.startswith("/"):
        return None
    original = unquote(wrapped.split("/", 3)[3])
    return (unquote(parts.netloc), original) if original else None
