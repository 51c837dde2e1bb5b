"""Downstream resources and prompts, namespaced by server and read through live sessions.

A resource keeps its own URI when its server's ``prefix`` is ``""`` and a ``ui://`` resource
always does (hosts render MCP Apps from it); any other is wrapped as
``downstream://<server>/<quoted original uri>``. Prompt names are ``<prefix><prompt>`` with the
same sanitizing and collision rules as tools. A URI or prompt name two servers would both
expose goes to the first server in name order (the other's is logged and not listed), and
none takes one of the broker's own. Listings ask every connected server concurrently, each
bounded by its timeout; a server that fails is skipped (and logged) so one bad server never
empties the list.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import TypeVar

import anyio
import mcp_types as types

from .connection import Connection
from .errors import UnknownToolError
from .naming import name_all, split_resource_uri, wrap_resource_uri
from .secrets import Redactor
from .server_state import ServerTable

__all__ = ["BROKER_PROMPTS", "ResourceProxy"]

log = logging.getLogger(__name__)
T = TypeVar("T")

BROKER_PROMPTS = frozenset({"context"})
"""The broker's own prompt names (``server.surface.prompts``): no downstream prompt takes one."""
_BROKER_URIS = ("context://", "ui://context-broker/")  # the broker's own resources


class ResourceProxy:
    """Lists and reads downstream resources and prompts of the servers in one table."""

    def __init__(self, servers: ServerTable, redactor: Redactor) -> None:
        self._servers = servers
        self._redactor = redactor
        self._prompts: dict[str, tuple[str, str]] = {}
        self._resources: dict[str, tuple[str, str]] = {}  # exposed URI -> (server, uri)

    def _prefix(self, server: str) -> str | None:
        state = self._servers.find(server)
        return state.config.prefix if state is not None else None

    async def _gather(
        self, fetch: Callable[[Connection], Awaitable[list[T]]]
    ) -> dict[str, list[T]]:
        out: dict[str, list[T]] = {}

        async def one(name: str, conn: Connection, timeout: float) -> None:
            try:
                with anyio.fail_after(timeout):
                    out[name] = await fetch(conn)
            except Exception as exc:
                log.warning(
                    "%s", self._redactor.redact(f"downstream {name!r}: listing failed: {exc!r}")
                )

        async with anyio.create_task_group() as tg:
            for server, conn in self._servers.live():
                tg.start_soon(one, server.name, conn, server.config.timeout)
        return out

    async def list_resources(self) -> list[types.Resource]:
        """Every downstream resource under its exposed URI, by server then original order."""
        found = await self._gather(lambda c: c.list_resources())
        redact = self._redactor.redact_model
        table: dict[str, tuple[str, str]] = {}
        rows = []
        for server in sorted(found):
            for r in found[server]:
                uri = wrap_resource_uri(server, r.uri, self._prefix(server))
                holder = self._uri_holder(uri, table)
                if holder is not None:
                    log.warning(
                        "resource %r of server %r is not exposed: its URI is taken by %s",
                        r.uri,
                        server,
                        holder,
                    )
                    continue
                table[uri] = (server, r.uri)
                rows.append(redact(r).model_copy(update={"uri": uri}))
        self._resources = table
        return rows

    @staticmethod
    def _uri_holder(uri: str, table: dict[str, tuple[str, str]]) -> str | None:
        """Who already exposes ``uri`` (the broker, or another server), or None."""
        if uri.startswith(_BROKER_URIS):
            return "the broker's own resource"
        if uri in table:
            return f"server {table[uri][0]!r}"
        return None

    async def _resource_target(self, uri: str) -> tuple[str, str]:
        """``(server, original uri)`` of an exposed resource URI (listing them if need be)."""
        target = split_resource_uri(uri) or self._resources.get(uri)
        if target is None:
            await self.list_resources()
            target = self._resources.get(uri)
        if target is None:
            raise UnknownToolError(
                f"no resource {uri[:200]!r}: neither the broker nor a downstream server lists "
                "it; resources/list shows the resources there are"
            )
        return target

    async def resource_server(self, uri: str) -> str | None:
        """The server an exposed resource URI belongs to, or None if none lists it."""
        try:
            return (await self._resource_target(uri))[0]
        except UnknownToolError:
            return None

    async def prompt_server(self, name: str) -> str | None:
        """The server a prompt is exposed for under ``name``, or None."""
        if name not in self._prompts:
            await self.list_prompts()
        target = self._prompts.get(name)
        return target[0] if target is not None else None

    async def read_resource(self, uri: str) -> types.ReadResourceResult:
        """Read an exposed resource URI from its server; content URIs come back exposed."""
        server_name, original = await self._resource_target(uri)
        server = self._servers.get(server_name)
        conn = server.live(original)
        try:
            result = await conn.session.read_resource(original)
        except Exception as exc:
            raise server.call_failed(conn, f"resource {original!r}", exc, tool=None) from None
        prefix = server.config.prefix
        contents = [
            c.model_copy(update={"uri": wrap_resource_uri(server_name, c.uri, prefix)})
            for c in result.contents
        ]
        return self._redactor.redact_model(result.model_copy(update={"contents": contents}))

    async def list_prompts(self) -> list[types.Prompt]:
        """Every downstream prompt named ``<prefix><prompt>``, in a stable order."""
        found = await self._gather(lambda c: c.list_prompts())
        naming = name_all(
            ((s, p.name) for s, prompts in found.items() for p in prompts),
            {s: self._prefix(s) for s in found},
            BROKER_PROMPTS,
            kind="prompt",
        )
        for why in naming.clashes.values():
            log.warning("%s", why)
        names = naming.names
        self._prompts = {exposed: key for key, exposed in names.items()}
        redact = self._redactor.redact_model
        rows = [
            redact(p).model_copy(update={"name": names[(s, p.name)]})
            for s, prompts in found.items()
            for p in prompts
            if (s, p.name) in names
        ]
        return sorted(rows, key=lambda p: p.name)

    async def get_prompt(
        self, name: str, arguments: dict[str, str] | None = None
    ) -> types.GetPromptResult:
        """Render a prompt by its exposed name on its server."""
        if name not in self._prompts:
            await self.list_prompts()
        target = self._prompts.get(name)
        if target is None:
            raise UnknownToolError(f"no downstream prompt is exposed as {name!r}; see prompts/list")
        server_name, original = target
        server = self._servers.get(server_name)
        conn = server.live(original)
        try:
            result = await conn.session.get_prompt(original, arguments)
        except Exception as exc:
            raise server.call_failed(conn, f"prompt {original!r}", exc, tool=None) from None
        return self._redactor.redact_model(result)
