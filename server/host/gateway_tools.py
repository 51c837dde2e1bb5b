"""The gateway as the MCP server sees it: the exposed downstream tools, the ``call_tool`` and
``list_servers`` tools, downstream resources and prompts, and ``tools/list_changed``."""

from __future__ import annotations

import logging
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any, Literal
from weakref import WeakKeyDictionary

import anyio
import anyio.to_thread
from context_broker.tools.all_tools import BROKER_TOOLS
from context_broker.tools.code import RUN_CODE
from context_broker.tools.gateway import (
    CALL_TOOL_DESCRIPTION,
    LIST_SERVERS_DESCRIPTION,
    CallToolArgs,
    ListServersArgs,
    ListServersResult,
    render_servers,
)
from mcp import MCPError, types
from mcp.server.session import ServerSession
from mcp.server.subscriptions import InMemorySubscriptionBus
from mcp.shared.subscriptions import PromptsListChanged, ResourcesListChanged, ToolsListChanged
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import ValidationError

from contextcore.call_record import ProxiedCall, result_text
from contextcore.catalog import Catalog
from contextcore.errors import ContextCoreError
from contextcore.items import ItemRef, Tool
from contextcore.profiles import Profile
from contextcore.services.broker import ContextBroker
from contextcore.services.history import HistoryService
from contextcore.sessions import RequestContext

from ..gateway.calls import Answer
from ..gateway.gateway import Gateway
from ..gateway.models import ExposedTool
from ..gateway.relay.asking import Asking, Exchange, call_key
from ..gateway.relay.host import Host, calling_for
from ..gateway.trust.arguments import schema_problem
from ..gateway.trust.call_policy import call_refusal
from ..observability import Observer
from ..ui.view import APP_TOOL
from ..wire.results import error_result
from ..wire.sdk_compat import connection_key, connection_of
from .tool_calls import describe_validation_error

__all__ = ["RESERVED_NAMES", "GatewayDirectory", "GatewayTools", "HostNotifier"]

log = logging.getLogger(__name__)

Asked = types.InputRequiredResult

CALL_TOOL = "call_tool"
_MAX_LISTENERS = 256
LIST_SERVERS = "list_servers"
RESERVED_NAMES = frozenset(
    {*(spec.name for spec in BROKER_TOOLS), APP_TOOL.name, CALL_TOOL, LIST_SERVERS, RUN_CODE}
)
"""Every name the broker lists for its own tools: the gateway exposes no downstream tool as
one, and no server's prefix may begin one (given to it as ``GatewaySettings.reserved``)."""


def _tool(name: str, description: str, args: type[Any], result: type[Any] | None) -> types.Tool:
    return types.Tool(
        name=name,
        description=description,
        input_schema=args.model_json_schema(),
        output_schema=result.model_json_schema() if result is not None else None,
        annotations=types.ToolAnnotations(
            read_only_hint=result is not None, open_world_hint=result is None
        ),
    )


def _json(result: types.CallToolResult | types.InputRequiredResult) -> dict[str, Any]:
    # For the stdio pass-through, which answers handshake-era hosts only: their results carry
    # no resultType (the SDK leaves it out for them too).
    return result.model_dump(by_alias=True, mode="json", exclude_none=True, exclude={"result_type"})


@dataclass(frozen=True)
class _Forward:
    """A host's call that passed every check: what to call downstream, for which session."""

    server: str
    tool: str
    arguments: dict[str, Any]
    session_id: str | None


def _connection_key(session: ServerSession | None) -> int:
    """One key per host connection (the SDK makes a session object per request)."""
    return connection_key(session)


class GatewayDirectory:
    """How a host calls downstream tools: by their exposed names, ``always`` ones listed
    (and, seen from one connection, the selected tools that host re-listed)."""

    def __init__(
        self, gateway: Gateway, catalog: Catalog, relisted: Callable[[], frozenset[str]] = frozenset
    ) -> None:
        self._gateway = gateway
        self._catalog = catalog
        self._relisted = relisted

    def exposed_name(self, ref: ItemRef) -> str | None:
        if ref.type != "tool" or ref.server is None:
            return None
        return self._gateway.exposed_name(ref.server, ref.name)

    def listed(self, ref: ItemRef) -> bool:
        item = self._catalog.get(ref)
        name = self.exposed_name(ref)
        return (
            item is not None
            and item.enabled
            and name is not None
            and (item.effective_include == "always" or name in self._relisted())
        )

    def for_connection(self, relisted: Callable[[], frozenset[str]]) -> GatewayDirectory:
        """This directory as one connection sees it: ``relisted`` gives the selected tools
        its host has fetched in its tool list since they were announced."""
        return GatewayDirectory(self._gateway, self._catalog, relisted)


class HostNotifier:
    """Tells hosts that the exposed tools changed: on the 2026-era subscription stream
    (:attr:`bus`) and with ``tools/list_changed`` to each handshake-era connection that
    listed tools, resources or prompts. Built before the gateway, which calls
    :meth:`exposed_changed` (and :meth:`lists_changed` for downstream resources and
    prompts)."""

    def __init__(self) -> None:
        self.bus = InMemorySubscriptionBus()
        # One session object per host connection (the SDK makes one per request; each sends
        # on its connection's standalone stream), the most recent connections first kept.
        self._sessions: OrderedDict[int, ServerSession] = OrderedDict()

    def remember(self, session: ServerSession | None) -> None:
        """Keep a host connection that may want ``tools/list_changed`` later."""
        if session is None:
            return
        key = _connection_key(session)
        self._sessions[key] = session
        self._sessions.move_to_end(key)
        while len(self._sessions) > _MAX_LISTENERS:
            self._sessions.popitem(last=False)

    async def exposed_changed(self, exposed: list[ExposedTool]) -> None:
        """Announce a new list of directly exposed tools to every host."""
        log.info("exposed downstream tools changed (%d now); notifying hosts", len(exposed))
        await self.bus.publish(ToolsListChanged())
        for key, session in list(self._sessions.items()):
            try:
                with anyio.fail_after(5):
                    await session.send_tool_list_changed()
            except Exception as exc:  # a host that went away must not stop the others
                log.debug("could not send tools/list_changed: %s", exc)
                self._sessions.pop(key, None)

    async def lists_changed(self, kind: Literal["resources", "prompts"]) -> None:
        """Pass on a downstream's ``resources/list_changed`` or ``prompts/list_changed``:
        on the subscription stream and to each handshake-era connection that listed."""
        log.info("a downstream server's %s changed; notifying hosts", kind)
        resources = kind == "resources"
        await self.bus.publish(ResourcesListChanged() if resources else PromptsListChanged())
        for key, session in list(self._sessions.items()):
            try:
                with anyio.fail_after(5):
                    if resources:
                        await session.send_resource_list_changed()
                    else:
                        await session.send_prompt_list_changed()
            except Exception as exc:  # a host that went away must not stop the others
                log.debug("could not send %s/list_changed: %s", kind, exc)
                self._sessions.pop(key, None)


class GatewayTools:
    """Routes host requests to the gateway; ``notifier`` is the one the gateway was given
    as its ``on_exposed_change`` (see :func:`server.runtime.build_runtime`)."""

    def __init__(
        self,
        gateway: Gateway,
        broker: ContextBroker,
        *,
        history: HistoryService,
        notifier: HostNotifier,
        record_max_chars: int = 20_000,
        startup_budget: float = 5.0,
        observer: Observer | None = None,
        relist_selected: bool = False,
    ) -> None:
        self.gateway = gateway
        self.observer = observer or Observer()
        self.relist_selected = relist_selected
        self.broker = broker
        self.history = history
        self.notifier = notifier
        self.directory = GatewayDirectory(gateway, broker.catalog)
        self._record_max_chars = record_max_chars
        self._startup_budget = startup_budget
        self._gathered = False  # the first gathering is over and the catalog says so
        # Per handshake-era connection: the exposed names of the tools its latest request
        # context selected, listed to that host beside the ``always`` tools. Kept on the
        # connection object itself (weakly), never by its id: a new connection must not
        # inherit a closed one's selection when the id is reused.
        self._selected: WeakKeyDictionary[object, tuple[str, ...]] = WeakKeyDictionary()
        # Per connection: the selected tools its host has fetched in a tools/list since they
        # were announced, which its request-context texts name instead of describing.
        self._fetched: WeakKeyDictionary[object, frozenset[str]] = WeakKeyDictionary()
        self._asking = Asking(gateway.spawn)
        self._fixed = [
            _tool(CALL_TOOL, CALL_TOOL_DESCRIPTION, CallToolArgs, None),
            _tool(LIST_SERVERS, LIST_SERVERS_DESCRIPTION, ListServersArgs, ListServersResult),
        ]

    async def startup(self) -> list[str]:
        """Wait for the first gathering of downstream servers, at most the startup budget
        after the gateway started; the servers still connecting are returned and marked
        pending in the catalog (so searches say their tools were not there yet)."""
        pending = await self.gateway.wait_ready(self._startup_budget)
        self.broker.catalog.set_pending(pending)
        self._gathered = not pending
        return pending

    async def tools(
        self, session: ServerSession | None = None, profile: Profile | None = None
    ) -> list[types.Tool]:
        """``call_tool``, ``list_servers``, every exposed (``always``) downstream tool and,
        for a handshake-era connection, the tools its latest request context selected;
        under ``profile``, only the downstream tools it allows. Nothing while no server is
        configured (a reload that adds the first one announces them).
        Waits for the first connection attempts within the startup budget; servers that
        arrive later are announced with ``tools/list_changed``."""
        if not self.gateway.has_servers():
            return []
        await self.startup()
        selected = set(self._selected.get(connection_of(session), ())) if session else set()
        if session is not None and self.relist_selected:
            self._fetched[connection_of(session)] = frozenset(selected)
        listed = [
            t
            for t in self.gateway.tools()
            if t.enabled
            and (t.include == "always" or t.name in selected)
            and (profile is None or profile.allows_tool(t.server, t.tool))
        ]
        return [*self._fixed, *(t.as_mcp_tool() for t in listed)]

    def directory_for(self, session: object) -> GatewayDirectory:
        """The tool directory as the host connection of ``session`` sees it."""
        key = connection_of(session)
        return self.directory.for_connection(lambda: self._fetched.get(key, frozenset()))

    async def context_built(self, session: ServerSession | None, context: RequestContext) -> None:
        """List the tools of a connection's latest request context to that host (handshake
        era, one host per connection) and tell it with ``tools/list_changed``."""
        if (
            not self.relist_selected
            or session is None
            or session.protocol_version in MODERN_PROTOCOL_VERSIONS
        ):
            return
        names = tuple(
            sorted(
                name
                for ref in (row.ref for row in context.items if row.ref.type == "tool")
                if not self.directory.listed(ref)
                and (name := self.directory.exposed_name(ref)) is not None
            )
        )
        key = connection_of(session)
        if self._selected.get(key, ()) == names:
            return
        self._selected[key] = names
        try:
            with anyio.fail_after(5):
                await session.send_tool_list_changed()
        except Exception as exc:  # the host may be gone; its next tools/list is still right
            log.debug("could not send tools/list_changed: %s", exc)

    def handles(self, name: str) -> bool:
        """Whether ``name`` is a gateway tool: a fixed one (while a server is configured) or
        a downstream tool's exposed name."""
        if name in (CALL_TOOL, LIST_SERVERS):
            return self.gateway.has_servers()
        return self._target(name) is not None

    def _target(self, name: str) -> tuple[str, str] | None:
        """``(server, tool)`` a call of ``name`` goes to: an exposed name's, else a name no
        server lists to the one server that keeps its own names (it answers as it would
        directly; see :meth:`Gateway.bare_server`)."""
        target = self.gateway.resolve(name)
        if target is None and (server := self.gateway.bare_server(name)) is not None:
            return server, name
        return target

    async def call(
        self,
        name: str,
        arguments: dict[str, Any],
        session: ServerSession | None,
        meta: Mapping[str, Any] | None = None,
        profile: Profile | None = None,
        request_id: types.RequestId | None = None,
        retry: Mapping[str, Any] | None = None,
    ) -> types.CallToolResult | types.InputRequiredResult:
        """Run a gateway tool or forward an exposed tool as the host's call. A ``session_id``
        (an argument of ``call_tool``, or in ``_meta`` of an exposed tool's call) records the
        call and its result in that session (see :meth:`_record_call`). Under ``profile``, a
        tool outside it is refused.

        The call goes downstream as the host's (see :meth:`Connection.call_tool`): with its
        ``_meta`` and ``retry`` (a 2026-07-28 host's ``inputResponses``/``requestState``), a
        server's ``InputRequiredResult`` coming back unchanged; what the downstream asks
        during the call (elicitation, sampling, roots, logs) goes to ``session``, on the
        stream of its request ``request_id`` (see :mod:`.relay`). A JSON-RPC error the
        server answers a call of an exposed tool with reaches the host as that error
        (``MCPError``); the broker's own refusals, and every failure of ``call_tool``, are
        tool errors."""
        if name == LIST_SERVERS:
            return self._list_servers(profile)
        await self.startup()
        checked = self._checked(name, arguments, (meta or {}).get("session_id"), profile)
        if isinstance(checked, str):
            return error_result(checked)
        wants_progress = meta is not None and any(
            k in meta for k in ("progress_token", "progressToken")
        )
        host = None if session is None or request_id is None else Host(session, request_id, meta)
        progress = session if wants_progress else None

        async def forward(exchange: Exchange | None) -> types.CallToolResult | Asked:
            asked = host if exchange is None or host is None else replace(host, exchange=exchange)
            with calling_for(asked):
                return await self._forward(checked, progress, retry, as_written=name != CALL_TOOL)

        if host is not None and host.modern:
            # Only the host given a requestState may hand it back (see Host.holder).
            owner = f"{profile.name if profile is not None else ''} {host.holder}"
            key = call_key(name, arguments)
            timeout = self._answer_timeout(checked.server)
            result = await self._asking.call(owner, key, retry, forward, timeout)
        else:
            result = await forward(None)
        if checked.session_id is not None and isinstance(result, types.CallToolResult):
            await self._record_call(checked, result)
        return result

    def _answer_timeout(self, server: str) -> float:
        """How long a 2026-07-28 host has to answer a question of ``server``: the server's
        ``timeout``, as a handshake-era host has."""
        config = self.gateway.server_config(server)
        return config.timeout if config is not None else 30.0

    def forwards_plainly(self, name: str, arguments: dict[str, Any]) -> bool:
        """Whether a call is a plain forward: an exposed tool, or ``call_tool`` without a
        ``session_id``. With no ``_meta`` either, :meth:`forward_soon` answers it exactly
        when the tool's server has a fast lane."""
        if name == CALL_TOOL:
            return self.gateway.has_servers() and arguments.get("session_id") is None
        return self.gateway.resolve(name) is not None

    def forward_soon(
        self,
        name: str,
        arguments: dict[str, Any],
        done: Callable[[dict[str, Any] | types.ErrorData], None],
        tell: Callable[[bytes], bool] | None = None,
    ) -> Callable[[str], None] | None:
        """A plain forward (see :meth:`forwards_plainly`) with no task waiting for the
        answer, where it can be (the first gathering is over and the tool's server has a fast
        lane): ``done`` gets what :meth:`call` gives, as JSON (the downstream's result object,
        a tool error, or for an exposed tool the JSON-RPC error the server answered with),
        from the loop that reads the downstream's answer (or at once, for a call refused
        before it is sent); ``tell`` gets the server's log message lines meanwhile. Returns
        the function that gives the call up, or None (nothing done: the full path)."""
        if not self._gathered or self.gateway.starting():
            return None
        checked = self._checked(name, arguments, None)
        if isinstance(checked, str):
            done(_json(error_result(checked)))
            return _nothing_to_cancel
        if not self.gateway.fast_lane(checked.server):
            return None

        def answered(answer: Answer) -> None:
            done(answer if isinstance(answer, dict | types.ErrorData) else _json(answer))

        return self.gateway.call(
            checked.server,
            checked.tool,
            checked.arguments,
            answered,
            as_written=name != CALL_TOOL,
            plain=True,
            tell=tell,
        )

    def _checked(
        self,
        name: str,
        arguments: dict[str, Any],
        meta_session: object,
        profile: Profile | None = None,
    ) -> _Forward | str:
        """The downstream call a host's call of ``name`` makes, after every check before it
        is forwarded (arguments, the session, the tool's ``enabled`` and ``call_policy``, its
        input schema), or the tool error to answer instead. ``meta_session``: the
        ``session_id`` in an exposed tool's ``_meta``."""
        if name == CALL_TOOL:
            try:
                args = CallToolArgs.model_validate(arguments)
            except ValidationError as exc:
                return f"call_tool: invalid arguments: {describe_validation_error(exc)}"
            server, tool, arguments = args.server, args.tool, args.arguments
            session: object = args.session_id
        else:
            target = self._target(name)
            if target is None:  # the exposed list changed since the host read it
                return f"no downstream tool is exposed as {name!r}"
            (server, tool), session = target, meta_session
        if profile is not None and not profile.allows_tool(server, tool):
            return (
                f"{name}: tool {tool!r} of server {server!r} is not in profile "
                f"{profile.name!r}; this connection can call only the profile's tools"
            )
        sid = None
        if session is not None:
            try:
                sid = self.broker.require_session(session)  # the one read of its header
                if profile is not None:
                    self.broker.require_profile(sid, profile.name)
            except ContextCoreError as exc:
                return f"{name}: {exc.field}: {exc.message}"
        config = self.gateway.server_config(server)
        refusal = call_refusal(self.broker, sid, server, tool, config)
        if refusal is None and name == CALL_TOOL:
            refusal = self._app_only(server, tool)
        if refusal is None:
            refusal = self._schema_problem(server, tool, arguments)
        return _Forward(server, tool, arguments, sid) if refusal is None else f"{name}: {refusal}"

    def _app_only(self, server: str, tool: str) -> str | None:
        """Why ``call_tool`` refuses a tool marked for its MCP App alone (None: it is not)."""
        item = self.broker.catalog.get(ItemRef("tool", tool, server))
        if not isinstance(item, Tool) or not item.app_only:
            return None
        return (
            f"tool {tool!r} of server {server!r} is for its MCP App alone "
            "(_meta.ui.visibility leaves out the model); the App calls it by its listed name"
        )

    def _schema_problem(self, server: str, tool: str, arguments: dict[str, Any]) -> str | None:
        """What is wrong with ``arguments`` for the tool's input schema (None: nothing, or the
        tool is not known yet and its server answers for itself)."""
        item = self.broker.catalog.get(ItemRef("tool", tool, server))
        if not isinstance(item, Tool):
            return None
        return schema_problem(server, tool, item.input_schema, arguments)

    async def _forward(
        self,
        call: _Forward,
        session: ServerSession | None,
        retry: Mapping[str, Any] | None,
        *,
        as_written: bool,
    ) -> types.CallToolResult | types.InputRequiredResult:
        """Call downstream; ``session`` (given when the host asked for progress) receives the
        downstream's progress notifications, whole numbers as whole numbers. With
        ``as_written``, a JSON-RPC error of the server is raised as it sent it."""
        server, tool, arguments = call.server, call.tool, call.arguments

        async def progress(value: float, total: float | None, message: str | None) -> None:
            assert session is not None
            await session.report_progress(_number(value), _number(total), message)

        callback = progress if session is not None else None
        configured = self.gateway.server_config(server) is not None
        # The span is current while the call is sent: the SDK passes its trace context on
        # in the request's _meta.traceparent.
        with self.observer.downstream_call(server, tool, configured=configured):
            answer = await self.gateway.call_tool(
                server,
                tool,
                arguments,
                as_written=as_written,
                progress_callback=callback,
                retry=retry,
            )
        assert not isinstance(answer, dict)  # not plain: the session's lane answers
        failed = isinstance(answer, types.ErrorData) or getattr(answer, "is_error", False)
        if failed:
            self.observer.downstream_failed(server, configured=configured)
        if isinstance(answer, types.ErrorData):
            raise MCPError.from_error_data(answer)
        return answer

    async def _record_call(self, call: _Forward, result: types.CallToolResult) -> None:
        """Record a forwarded call in its session, in one store write on a worker thread
        (:meth:`HistoryService.record_call`): the call with its size-limited result, in the
        history too unless the server's ``record_calls`` is off, and the use of the tool for
        the session's latest turn. A failure here is logged and never fails the call."""
        sid = call.session_id
        assert sid is not None
        content = [b.model_dump(by_alias=True, mode="json") for b in result.content]
        text, _ = result_text(content, result.structured_content, self._record_max_chars)
        done = ProxiedCall(
            call.server, call.tool, call.arguments, text, bool(result.is_error), time.time()
        )
        config = self.gateway.server_config(call.server)  # in force now: reloads change it
        in_history = config.record_calls if config is not None else True
        try:
            await anyio.to_thread.run_sync(
                lambda: self.history.record_call(sid, done, in_history=in_history)
            )
        except Exception as exc:
            log.warning("could not record the call of %s in its session: %s", call.tool, exc)

    def _list_servers(self, profile: Profile | None = None) -> types.CallToolResult:
        rows = [s.row() for s in self.gateway.status()]
        if profile is not None:
            rows = [r for r in rows if profile.allows_server(r.name)]
        out = ListServersResult(servers=rows)
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=render_servers(out))],
            structured_content=out.model_dump(mode="json"),
        )


def _number(value: float | None) -> Any:
    """A progress value as the downstream most likely wrote it: the SDK reads every one as a
    float, so a whole number goes back out as an integer (JSON has one number type)."""
    if value is not None and value.is_integer():
        return int(value)
    return value


def _nothing_to_cancel(reason: str) -> None:
    """Giving up a call that was answered before it was sent: nothing to do."""
