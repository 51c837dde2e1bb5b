"""Downstream resources and prompts, namespaced by server and read through live sessions.

Resource URIs are wrapped as ``downstream://<server>/<quoted original uri>``; prompt names are
``<server>__<prompt>`` with the same sanitizing and collision rules as tools. Listings ask every
connected server concurrently, each bounded by its timeout; a server that fails is skipped (and
logged) so one bad server never empties the list.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import TypeVar

import anyio
import mcp_types as types

from .connection import Connection
from .errors import UnknownToolError
from .naming import assign_names, split_resource_uri, wrap_resource_uri
from .secrets import Redactor
from .server_state import ServerTable

__all__ = ["ResourceProxy"]

log = logging.getLogger(__name__)
T = TypeVar("T")


class ResourceProxy:
    """Lists and reads downstream resources and prompts of the servers in one table."""

    def __init__(self, servers: ServerTable, redactor: Redactor) -> None:
        self._servers = servers
        self._redactor = redactor
        self._prompts: dict[str, tuple[str, str]] = {}

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
        """Every downstream resource with its URI wrapped, by server then original order."""
        found = await self._gather(lambda c: c.list_resources())
        redact = self._redactor.redact_model
        return [
            redact(r).model_copy(update={"uri": wrap_resource_uri(server, r.uri)})
            for server in sorted(found)
            for r in found[server]
        ]

    async def read_resource(self, uri: str) -> types.ReadResourceResult:
        """Read a wrapped resource URI from its server; content URIs come back wrapped."""
        target = split_resource_uri(uri)
        if target is None:
            raise UnknownToolError(
                f"resource URI {uri!r} is not a downstream resource; "
                "use a downstream://<server>/... URI from resources/list"
            )
        server_name, original = target
        server = self._servers.get(server_name)
        conn = server.live(original)
        try:
            result = await conn.session.read_resource(original)
        except Exception as exc:
            raise server.call_failed(conn, f"resource {original!r}", exc, tool=None) from None
        contents = [
            c.model_copy(update={"uri": wrap_resource_uri(server_name, c.uri)})
            for c in result.contents
        ]
        return self._redactor.redact_model(result.model_copy(update={"contents": contents}))

    async def list_prompts(self) -> list[types.Prompt]:
        """Every downstream prompt named ``<server>__<prompt>``, in a stable order."""
        found = await self._gather(lambda c: c.list_prompts())
        names = assign_names((s, p.name) for s, prompts in found.items() for p in prompts)
        self._prompts = {exposed: key for key, exposed in names.items()}
        redact = self._redactor.redact_model
        rows = [
            redact(p).model_copy(update={"name": names[(s, p.name)]})
            for s, prompts in found.items()
            for p in prompts
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
