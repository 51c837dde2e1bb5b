"""Downstream resources and prompts, namespaced by server and read through live sessions.

Every prompt, resource and template passes the trust gate tools pass (:meth:`ToolGate.vet`):
cleaned of hidden characters and escapes and clipped, and held under ``trust = "strict"`` when
flagged, before it is listed or routed to. Under ``pin`` and ``strict`` what ``prompts/get``
returns is cleaned the same way (not clipped: it is the prompt's content).

A resource keeps its own URI when its server's ``prefix`` is ``""`` and a ``ui://`` resource
always does (hosts render MCP Apps from it); any other is wrapped as
``downstream://<server>/<quoted original uri>``. Prompt names are ``<prefix><prompt>`` with the
same sanitizing and collision rules as tools. A URI or prompt name two servers would both
expose goes to the first server in name order (the other's is logged and not listed), and
none takes one of the broker's own. Resource templates are exposed as :mod:`.templates` says,
and a URI filled in from one reads from its server. Listings ask every connected server
concurrently, each bounded by its timeout; a server that fails is skipped (and logged) so one
bad server never empties the list.

Completions of a downstream prompt's or template's arguments are asked of its server (by its
own name or template) and come back as the server gave them. Subscriptions to downstream
resources are kept by :mod:`.subscriptions`, for URIs a server listed or one of its listed
templates gives; the downstream's update and list-change notifications arrive through
:meth:`ResourceProxy.notice`.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Literal, TypeVar

import anyio
import mcp_types as types
from pydantic import TypeAdapter

from .errors import UnknownToolError
from .links.connection import Connection, _all_pages
from .naming.names import name_all, split_resource_uri, wrap_resource_uri
from .naming.templates import TemplateTable, wrap_template
from .relay.subscriptions import MAX_SUBSCRIPTIONS_PER_SERVER, Subscriptions
from .server_state import ServerTable
from .trust.gate import ToolGate
from .trust.sanitize import clean_shown
from .trust.secrets import Redactor

__all__ = ["BROKER_PROMPTS", "ListsChangedFn", "ResourceProxy"]

log = logging.getLogger(__name__)

_READ_OUTCOME: TypeAdapter[types.ReadResourceResult | types.InputRequiredResult] = TypeAdapter(
    types.ReadResourceResult | types.InputRequiredResult
)
_PROMPT_OUTCOME: TypeAdapter[types.GetPromptResult | types.InputRequiredResult] = TypeAdapter(
    types.GetPromptResult | types.InputRequiredResult
)
T = TypeVar("T")
_Listed = TypeVar("_Listed", types.Resource, types.ResourceTemplate)
_Vetted = TypeVar("_Vetted", types.Prompt, types.Resource, types.ResourceTemplate)

ListsChangedFn = Callable[[Literal["resources", "prompts"]], Awaitable[None]]
"""Told that a downstream's resource or prompt list changed (``"resources"``/``"prompts"``)."""
_COMPLETION: TypeAdapter[types.CompleteResult] = TypeAdapter(types.CompleteResult)
_NO_COMPLETION = types.CompleteResult(completion=types.Completion(values=[]))

BROKER_PROMPTS = frozenset({"context"})
"""The broker's own prompt names (``server.host.prompts``): no downstream prompt takes one."""
_BROKER_URIS = ("context://", "ui://context-broker/")  # the broker's own resources


class ResourceProxy:
    """Lists and reads downstream resources and prompts of the servers in one table."""

    def __init__(
        self,
        servers: ServerTable,
        redactor: Redactor,
        gate: ToolGate | None = None,
        max_subscriptions_per_server: int = MAX_SUBSCRIPTIONS_PER_SERVER,
    ) -> None:
        self._servers = servers
        self._redactor = redactor
        self._gate = gate or ToolGate()
        self._prompts: dict[str, tuple[str, str]] = {}
        self._resources: dict[str, tuple[str, str]] = {}  # exposed URI -> (server, uri)
        self._templates = TemplateTable()
        self.subscriptions = Subscriptions(
            servers, redactor, self._listed_target, max_per_server=max_subscriptions_per_server
        )
        self.lists_changed: ListsChangedFn | None = None

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

    def _vetted(
        self, found: dict[str, list[_Vetted]], key: str, kind: str
    ) -> dict[str, list[_Vetted]]:
        """``found`` (by server) through the trust gate, as tools go through it: cleaned,
        and what the server's trust mode holds left out (see :meth:`ToolGate.vet`)."""
        out: dict[str, list[_Vetted]] = {}
        for name, rows in found.items():
            state = self._servers.find(name)
            if state is not None:
                out[name] = self._gate.vet(name, state.config, rows, key, kind)
        return out

    async def list_resources(self) -> list[types.Resource]:
        """Every downstream resource under its exposed URI, by server then original order."""
        found = self._vetted(await self._gather(lambda c: c.list_resources()), "uri", "resource")
        table, rows = self._expose(found, "resource", lambda r: r.uri, wrap_resource_uri, "uri")
        self._resources = table
        return rows

    def _expose(
        self,
        found: dict[str, list[_Listed]],
        what: str,
        original: Callable[[_Listed], str],
        wrap: Callable[[str, str, str | None], str],
        field: str,
    ) -> tuple[dict[str, tuple[str, str]], list[_Listed]]:
        """``found`` (by server) under their exposed URIs or templates (``wrap`` of the
        ``original``, put in ``field``), secrets masked, by server then original order; one
        two would expose goes to the first server, none takes one of the broker's. Returns
        the table of exposed to ``(server, original)`` too."""
        table: dict[str, tuple[str, str]] = {}
        rows = []
        for server in sorted(found):
            for row in found[server]:
                own = original(row)
                exposed = wrap(server, own, self._prefix(server))
                holder = self._uri_holder(exposed, table)
                if holder is not None:
                    log.warning(
                        "%s %r of server %r is not exposed: it is taken by %s",
                        what,
                        own,
                        server,
                        holder,
                    )
                    continue
                table[exposed] = (server, own)
                rows.append(self._redactor.redact_model(row).model_copy(update={field: exposed}))
        return table, rows

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
        known = self._resources.get(uri) or self._templates.route(uri)
        target = split_resource_uri(uri) or known
        if target is None:
            await self.list_resources()
            target = self._resources.get(uri)
        if target is None:
            await self.list_templates()
            target = self._templates.route(uri)
        if target is None:
            raise UnknownToolError(
                f"no resource {uri[:200]!r}: neither the broker nor a downstream server lists "
                "it; resources/list shows the resources there are"
            )
        return target

    async def _listed_target(self, uri: str) -> tuple[str, str]:
        """:meth:`_resource_target` of a URI its server listed, or filled in from a template
        it listed (listing again once if need be); ``UnknownToolError`` for any other, which
        a ``downstream://`` URI can name but no server offered."""
        target = await self._resource_target(uri)
        self._servers.get(target[0])  # a server the config does not have: said so
        for fresh in (False, True):
            if fresh:
                await self.list_resources()
                await self.list_templates()
            if target in self._resources.values() or self._templates.fills(target):
                return target
        raise UnknownToolError(
            f"no resource {uri[:200]!r}: server {target[0]!r} lists no such resource and no "
            "template that gives it; resources/list and resources/templates/list show those "
            "there are"
        )

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

    async def read_resource(
        self, uri: str, retry: Mapping[str, Any] | None = None
    ) -> types.ReadResourceResult | types.InputRequiredResult:
        """Read an exposed resource URI from its server as the host's request (see
        ``Connection.request``); content URIs come back exposed."""
        server_name, original = await self._resource_target(uri)
        server = self._servers.get(server_name)
        conn = server.live(original)
        try:
            result = await conn.request(
                "resources/read",
                {"uri": original},
                _READ_OUTCOME,
                timeout=server.config.timeout,
                retry=retry,
            )
        except Exception as exc:
            raise server.call_failed(conn, f"resource {original!r}", exc, tool=None) from None
        if isinstance(result, types.InputRequiredResult):
            return result
        prefix = server.config.prefix
        contents = [
            c.model_copy(update={"uri": wrap_resource_uri(server_name, c.uri, prefix)})
            for c in result.contents
        ]
        return self._redactor.redact_model(result.model_copy(update={"contents": contents}))

    async def list_prompts(self) -> list[types.Prompt]:
        """Every downstream prompt named ``<prefix><prompt>``, in a stable order."""
        found = self._vetted(await self._gather(lambda c: c.list_prompts()), "name", "prompt")
        naming = name_all(
            ((s, p.name) for s, prompts in found.items() for p in prompts),
            {s.name: s.config.prefix for s in self._servers},
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
        self,
        name: str,
        arguments: dict[str, str] | None = None,
        retry: Mapping[str, Any] | None = None,
    ) -> types.GetPromptResult | types.InputRequiredResult:
        """Render a prompt by its exposed name on its server, as the host's request (see
        ``Connection.request``)."""
        if name not in self._prompts:
            await self.list_prompts()
        target = self._prompts.get(name)
        if target is None:
            raise UnknownToolError(f"no downstream prompt is exposed as {name!r}; see prompts/list")
        server_name, original = target
        server = self._servers.get(server_name)
        conn = server.live(original)
        params: dict[str, Any] = {"name": original}
        if arguments is not None:
            params["arguments"] = arguments
        try:
            result = await conn.request(
                "prompts/get", params, _PROMPT_OUTCOME, timeout=server.config.timeout, retry=retry
            )
        except Exception as exc:
            raise server.call_failed(conn, f"prompt {original!r}", exc, tool=None) from None
        result = self._redactor.redact_model(result)
        if server.config.trust == "auto" or isinstance(result, types.InputRequiredResult):
            return result
        shown, removed = clean_shown(result)  # cleaned as the prompt's definition is
        if removed:
            log.info(
                "downstream %r: prompt %r rendered with %s, removed",
                server_name,
                original[:100],
                ", ".join(sorted(removed)),
            )
        return shown

    async def list_templates(self) -> list[types.ResourceTemplate]:
        """Every downstream resource template under its exposed form (see :mod:`.templates`),
        by server then original order; a template two would expose goes to the first."""
        found = self._vetted(await self._gather(_templates), "uriTemplate", "resource template")
        table, rows = self._expose(
            found, "resource template", lambda t: t.uri_template, wrap_template, "uri_template"
        )
        self._templates = TemplateTable.of(table.items())
        return rows

    async def template_server(self, exposed: str) -> str | None:
        """The server a resource template is exposed for as ``exposed``, or None."""
        if exposed not in self._templates.by_exposed:
            await self.list_templates()
        target = self._templates.by_exposed.get(exposed)
        return target[0] if target is not None else None

    async def complete(self, params: types.CompleteRequestParams) -> types.CompleteResult:
        """Complete an argument of a downstream prompt or resource template (by its exposed
        name or template): asked of its server by the server's own, the answer as given. A
        server that declared no ``completions`` has none to offer: an empty completion."""
        ref = params.ref
        if isinstance(ref, types.PromptReference):
            if ref.name not in self._prompts:
                await self.list_prompts()
            target = self._prompts.get(ref.name)
            what = f"prompt {ref.name[:100]!r}"
        else:
            await self.template_server(ref.uri)
            target = self._templates.by_exposed.get(ref.uri)
            what = f"resource template {ref.uri[:200]!r}"
        if target is None:
            raise UnknownToolError(
                f"no downstream {what}: completion/complete takes a name prompts/list shows "
                "or a template resources/templates/list shows"
            )
        server_name, original = target
        server = self._servers.get(server_name)
        conn = server.live(original)
        if conn.capabilities.completions is None:
            return _NO_COMPLETION
        own: types.PromptReference | types.ResourceTemplateReference = (
            types.PromptReference(name=original)
            if isinstance(ref, types.PromptReference)
            else types.ResourceTemplateReference(uri=original)
        )
        asked = types.CompleteRequestParams(
            ref=own, argument=params.argument, context=params.context
        ).model_dump(by_alias=True, mode="json", exclude_none=True)
        try:  # as the host's request: what the server sends meanwhile reaches only that host
            result = await conn.request(
                "completion/complete", asked, _COMPLETION, timeout=server.config.timeout
            )
        except Exception as exc:
            raise server.call_failed(conn, what, exc, tool=None) from None
        return self._redactor.redact_model(result)

    async def notice(self, server: str, message: types.ServerNotification) -> None:
        """A downstream's notification about its resources or prompts, passed on to hosts:
        ``resources/updated`` to the hosts subscribed (by the URI they used), the list
        changes to :attr:`lists_changed`."""
        if isinstance(message, types.ResourceUpdatedNotification):
            await self.subscriptions.updated(server, str(message.params.uri))
        elif self.lists_changed is not None:
            resources = isinstance(message, types.ResourceListChangedNotification)
            await self.lists_changed("resources" if resources else "prompts")


async def _templates(conn: Connection) -> list[types.ResourceTemplate]:
    """Every resource template of one server, following pagination (none without resources)."""
    if conn.capabilities.resources is None:
        return []
    return await _all_pages(conn.session.list_resource_templates, "resource_templates")
