"""The gateway: every downstream server connected, supervised, gathered into the catalog.

Each enabled server lives in its own task with its own ``AsyncExitStack``: it connects (bounded
by the server's ``timeout``), lists tools, serves until the transport ends, then reconnects with
exponential backoff. A failing server never touches the others. Tools of a server that is down
stay in the catalog (calls get :class:`ServerUnavailableError` naming it) and are refreshed on
reconnect and on the downstream's ``notifications/tools/list_changed`` (debounced). A config
reload changes the set of servers while the gateway runs (:meth:`Gateway.reconfigure`).
"""

from __future__ import annotations

import inspect
import logging
import os
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from datetime import UTC, datetime
from functools import partial
from typing import Any

import anyio
import anyio.abc
import mcp_types as types
from context_broker.server.settings import AppConfig, DownstreamConfig
from mcp import MCPError
from mcp.shared.dispatcher import ProgressFnT

from contextcore.catalog import Catalog
from contextcore.context_text import inline
from contextcore.items import Tool

from ._proxy import ResourceProxy
from .calls import Answer, AnswerFn, Cancel, Outcome, Runner, awaited, shaped
from .errors import GatewayError
from .links.connection import Connection
from .links.supervisor import Supervisor
from .models import ExposedTool, GatewaySettings, ServerStatus
from .naming.names import ExposedNames
from .server_state import ServerChanges, ServerState, ServerTable, diff_servers
from .servers_file import resolve_servers
from .trust.gate import ToolGate, log_report
from .trust.secrets import Redactor

__all__ = ["ExposedChangeFn", "Gateway"]

log = logging.getLogger(__name__)

ExposedChangeFn = Callable[[list[ExposedTool]], Awaitable[None] | None]
ProgressFn = Callable[[float, float | None, str | None], Awaitable[None]]


class Gateway:
    """Connects to downstream MCP servers and proxies their tools, resources and prompts.

    Use as ``async with Gateway(...) as gw:``; entering starts every connection in the
    background and returns at once (``await gw.wait_ready()`` waits for the first attempts,
    each bounded by its server's timeout). ``on_exposed_change`` is called with the new list
    whenever the directly exposed tools (effective mode ``always``) change in name or
    definition, so the server can send ``notifications/tools/list_changed``.
    """

    def __init__(
        self,
        servers: Mapping[str, DownstreamConfig],
        catalog: Catalog,
        *,
        settings: GatewaySettings | None = None,
        environ: Mapping[str, str] | None = None,
        on_exposed_change: ExposedChangeFn | None = None,
        redactor: Redactor | None = None,
        gate: ToolGate | None = None,
    ) -> None:
        self.catalog = catalog
        self.gate = gate or ToolGate()
        self.settings = settings or GatewaySettings()
        self.redactor = redactor or Redactor()
        self.on_exposed_change = on_exposed_change
        self._environ = os.environ if environ is None else environ
        self._servers = ServerTable(servers, self.redactor)
        self._names = ExposedNames(self.settings.reserved)
        # What hosts see of the gateway: whether it has servers (the fixed tools are listed
        # only then), and each directly exposed tool; a change is announced to them.
        self._exposed_fingerprint: tuple[Any, ...] = (self.has_servers(),)
        self._tg: anyio.abc.TaskGroup | None = None
        self._scopes: dict[str, anyio.CancelScope] = {}  # each running supervisor's task
        self._proxy = ResourceProxy(
            self._servers,
            self.redactor,
            self.gate,
            max_subscriptions_per_server=self.settings.max_subscriptions_per_server,
        )

    @classmethod
    def from_config(cls, config: AppConfig, catalog: Catalog, **kwargs: Any) -> Gateway:
        """A gateway for every server of ``config`` (``[servers.*]`` plus the servers file),
        its tools vetted against the config's pin file and limits."""
        kwargs.setdefault("gate", ToolGate.from_config(config))
        reserved = (kwargs.get("settings") or GatewaySettings()).reserved
        return cls(resolve_servers(config, reserved=reserved), catalog, **kwargs)

    # -- lifecycle -------------------------------------------------------------------------

    async def __aenter__(self) -> Gateway:
        self._tg = anyio.create_task_group()
        await self._tg.__aenter__()
        for server in list(self._servers):
            self._start(server)
        if self.gate.pins.path is not None:
            self._tg.start_soon(self._watch_pins, name="gateway:pins")
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._tg is not None
        self._tg.cancel_scope.cancel()
        await self._tg.__aexit__(None, None, None)
        self._tg = None

    def spawn(self, task: Callable[[], Coroutine[Any, Any, None]]) -> None:
        """Run ``task`` in the gateway's task group: it outlives the request that started it
        and is cancelled with the gateway."""
        if self._tg is None:
            raise GatewayError("the gateway is not running")
        self._tg.start_soon(task)

    async def wait_ready(self, budget: float | None = None) -> list[str]:
        """Wait until every enabled server connected or failed its first attempt; never longer
        than the slowest server's own timeout (a hung handshake counts as failed), nor than
        ``budget`` seconds after the gateway started. Returns the servers still starting."""
        for server in self._servers:
            limit = server.config.timeout if budget is None else min(budget, server.config.timeout)
            remaining = server.started_at + limit - anyio.current_time()
            if server.first_attempt_done.is_set() or (budget is not None and remaining <= 0):
                continue
            with anyio.move_on_after(max(0.0, remaining) + 0.05):
                await server.first_attempt_done.wait()
        return self.starting()

    def has_servers(self) -> bool:
        """Whether any downstream server is configured (enabled or not): a gateway without
        one lists nothing to hosts, and a reload may give it its first."""
        return bool(self._servers.names())

    def starting(self) -> list[str]:
        """Enabled servers whose first connection attempt has not finished yet."""
        return [s.name for s in self._servers if not s.first_attempt_done.is_set()]

    # -- status and tools ------------------------------------------------------------------

    def status(self) -> list[ServerStatus]:
        """One row per configured server, by name."""
        return [s.status() for s in self._servers]

    def tools(self) -> list[ExposedTool]:
        """Every known downstream tool (any include mode, connected or not), by exposed name."""
        rows = []
        for server in self._servers:
            for tool in server.tools:
                name = self._names.name(server.name, tool.name)
                if name is None:
                    continue  # its name is another's (see ServerState.name_clashes)
                item = self.catalog.get(Tool(server.name, tool.name).ref)
                include = item.effective_include if item is not None else "always"
                rows.append(
                    ExposedTool(
                        name=name,
                        server=server.name,
                        tool=tool.name,
                        definition=tool,
                        include=include,
                        available=server.state == "connected",
                        enabled=item.enabled if item is not None else True,
                    )
                )
        return sorted(rows, key=lambda t: t.name)

    def exposed_tools(self) -> list[ExposedTool]:
        """The tools to list directly to hosts: enabled, effective mode ``always``, by exposed
        name."""
        return [t for t in self.tools() if t.include == "always" and t.enabled]

    def server_config(self, server: str) -> DownstreamConfig | None:
        """The settings in force for one server (tool settings change on reload), or None."""
        state = self._servers.find(server)
        return state.config if state is not None else None

    def reconfigure(self, servers: Mapping[str, DownstreamConfig]) -> ServerChanges:
        """Bring the running servers to ``servers`` (a reload): start the new ones, stop the
        removed ones (their tools leave the catalog and their names go), connect again those
        defined differently, and apply changed :data:`LIVE_SETTINGS` in place. Hosts hear of
        the change in exposed tools as usual. Call it on the event loop's thread."""
        changes = diff_servers(self._servers.configs(), servers)
        for name in changes.removed:
            self._stop(name)
            self.catalog.retire_server(name)
            self._names.server_removed(name)
        for name in changes.restarted:
            old = self._stop(name)
            self._start(old.redefined(servers[name]))
        for name in changes.added:
            self.catalog.reinstate_server(name)
            self._names.server_added(name)
            self._start(ServerState(name, servers[name], self.redactor))
        for name in changes.retuned:
            self._servers.get(name).config = servers[name]
        for name in (*changes.restarted, *changes.retuned):
            state = self._servers.get(name)
            self.catalog.replace_server_tools(name, state.catalog_items(state.tools))
        self._rename()
        self._notify_exposed()
        return changes

    def exposed_name(self, server: str, tool: str) -> str | None:
        """The name a downstream tool is called by directly (``<prefix><tool>``), if known."""
        return self._names.name(server, tool)

    def resolve(self, exposed_name: str) -> tuple[str, str] | None:
        """``(server, original tool name)`` of an exposed name, or of a downstream's own tool
        name that one server alone has; else None (see :meth:`unknown_tool`)."""
        return self._names.resolve(exposed_name)

    def bare_server(self, name: str) -> str | None:
        """The server a call of ``name``, which no server lists, goes to as it would if the
        host were connected to that server alone: the one server that keeps its own names
        (``prefix = ""``), when exactly one does, it is connected and ``name`` is none of
        its tools (listed, disabled or held), nor the broker's, nor among another server's
        names (its prefix begins it); else None. The call then passes the server's trust
        rules for tools it never listed (see :meth:`ServerState.refuse_unlisted`)."""
        own = [s for s in self._servers if s.config.prefix == ""]
        if len(own) != 1 or name in self.settings.reserved or self._names.claimed(name):
            return None
        state = own[0]
        known = any(t.name == name for t in state.tools) or name in state.held
        return state.name if state.connected and not known else None

    def unknown_tool(self, name: str) -> str:
        """Why a call of ``name`` reaches no tool: the servers that share it, or how to find
        the tools there are."""
        return self._names.unknown(name)

    # -- calls -----------------------------------------------------------------------------

    def call(
        self,
        server: str,
        tool: str,
        arguments: dict[str, Any] | None,
        done: AnswerFn,
        *,
        as_written: bool = False,
        plain: bool = False,
        progress: ProgressFn | None = None,
        retry: Mapping[str, Any] | None = None,
        tell: Callable[[bytes], bool] | None = None,
        timeout: float | None = None,
        run: Runner | None = None,
    ) -> Cancel:
        """Call ``tool`` (original or exposed name) on ``server``: the one way a downstream
        tool is called. ``done`` gets the :data:`.calls.Answer` once, shaped by
        :func:`.calls.shaped` (masked, capped, a failure mapped: ``as_written`` keeps a
        JSON-RPC error of the server as it sent it). Returns what gives the call up (``done``
        is then never called).

        A ``plain`` call needs nothing from a session (no host to relay the server's
        questions to, no ``progress``, no ``retry``): to a server with a fast lane (stdio) it
        is written on that lane and answered where the answer is read, no task waiting, and
        ``tell`` gets the server's log message lines meanwhile (masked). Any other call goes
        over the server's session as the host's (see :meth:`Connection.call_tool`: its
        ``_meta``, ``retry``, the questions relayed), run by ``run`` (:func:`.calls.awaited`
        runs it in the caller's task), else in a task of the gateway's that sees the caller's
        context. ``timeout``: the server's own unless given."""
        shape = self._shaper(f"{server}/{tool}", as_written)
        try:
            state = self._servers.get(server)
            original, conn = state.tool_target(tool, self.gate.cap(state.config))
        except GatewayError as exc:
            done(shape(exc))
            return _no_cancel

        def settle(outcome: Outcome | BaseException) -> None:
            if isinstance(outcome, BaseException) and not isinstance(outcome, GatewayError):
                exc = outcome if isinstance(outcome, Exception) else RuntimeError(outcome)
                outcome = state.call_failed(conn, f"tool {original!r}", exc, tool=original)
            done(shape(outcome))

        limit = timeout or state.config.timeout
        if plain and conn.fast and progress is None and retry is None:
            try:
                return conn.call_tool_soon(
                    original, arguments, settle, timeout=limit, tell=self._masked(tell)
                )
            except MCPError as exc:
                settle(exc)
                return _no_cancel
        redacted = self._redacted_progress(progress)
        send = partial(conn.call_tool, original, arguments, timeout=limit, retry=retry)
        return self._in_task(partial(send, progress_callback=redacted), settle, run)

    async def call_tool(
        self,
        server: str,
        tool: str,
        arguments: dict[str, Any] | None = None,
        *,
        as_written: bool = False,
        plain: bool = False,
        progress_callback: ProgressFn | None = None,
        timeout: float | None = None,
        retry: Mapping[str, Any] | None = None,
    ) -> Answer:
        """:meth:`call`, awaited: the answer (a result, a tool error, a 2026-07-28 host's
        questions, or ``as_written`` the server's JSON-RPC error). Cancelling the caller
        cancels the downstream request."""
        return await awaited(
            lambda done, run: self.call(
                server,
                tool,
                arguments,
                done,
                as_written=as_written,
                plain=plain,
                progress=progress_callback,
                retry=retry,
                timeout=timeout,
                run=run,
            )
        )

    def fast_lane(self, server: str) -> bool:
        """Whether ``server`` is connected with a fast lane (stdio), where :meth:`call`
        answers a ``plain`` call without a task waiting."""
        state = self._servers.find(server)
        conn = state.connection if state is not None else None
        return conn is not None and conn.fast

    def _in_task(
        self,
        send: Callable[[], Awaitable[types.CallToolResult | types.InputRequiredResult]],
        settle: Callable[[Outcome | BaseException], None],
        run: Runner | None,
    ) -> Cancel:
        """Have ``send`` run by ``run`` (the awaiting caller's own task, see
        :func:`.calls.awaited`), else in a task of the gateway's that sees the caller's
        context (the host it is made for, the trace); ``settle`` gets its result or error, or
        a ``GatewayError`` when it is cancelled from outside (the gateway stops, the caller
        gives up). Returns what gives it up."""
        scope = anyio.CancelScope()

        async def work() -> None:
            try:
                with scope:
                    settle(await send())
            except Exception as exc:
                settle(exc)
            except BaseException:
                settle(GatewayError("the call was cancelled before it was answered"))
                raise

        if run is not None:
            run(work)
            return lambda reason: scope.cancel()
        try:
            self.spawn(work)
        except GatewayError as exc:
            settle(exc)
            return _no_cancel
        return lambda reason: scope.cancel()

    def _shaper(self, where: str, as_written: bool) -> Callable[[Outcome], Answer]:
        """:func:`.calls.shaped` for a call of ``where`` (``server/tool``)."""
        return partial(
            shaped,
            where=where,
            as_written=as_written,
            redactor=self.redactor,
            max_bytes=self.settings.max_result_bytes,
        )

    def _masked(self, tell: Callable[[bytes], bool] | None) -> Callable[[bytes], bool] | None:
        """``tell`` given the server's log message lines with secrets masked."""
        if tell is None:
            return None

        def told(line: bytes) -> bool:
            text = line.decode("utf-8", "replace")
            masked = self.redactor.redact(text)
            return tell(line if masked == text else masked.encode())

        return told

    # -- resources and prompts --------------------------------------------------------------

    async def list_resources(self) -> list[types.Resource]:
        """Resources of every connected server under their exposed URIs (see ``naming``)."""
        return await self._proxy.list_resources()

    async def read_resource(
        self, uri: str, retry: Mapping[str, Any] | None = None
    ) -> types.ReadResourceResult | types.InputRequiredResult:
        """Read a downstream resource by its exposed URI, as the host's request (``retry``:
        a 2026-07-28 host's ``inputResponses`` and ``requestState``)."""
        return await self._proxy.read_resource(uri, retry)

    async def resource_server(self, uri: str) -> str | None:
        """The server whose resource is exposed as ``uri`` (listing them if need be), or None."""
        return await self._proxy.resource_server(uri)

    async def prompt_server(self, name: str) -> str | None:
        """The server whose prompt is exposed as ``name`` (listing them if need be), or None."""
        return await self._proxy.prompt_server(name)

    async def list_prompts(self) -> list[types.Prompt]:
        """Prompts of every connected server, named ``<prefix><prompt>``."""
        return await self._proxy.list_prompts()

    async def get_prompt(
        self,
        name: str,
        arguments: dict[str, str] | None = None,
        retry: Mapping[str, Any] | None = None,
    ) -> types.GetPromptResult | types.InputRequiredResult:
        """Render a prompt by its exposed name, as the host's request (``retry`` as for
        :meth:`read_resource`)."""
        return await self._proxy.get_prompt(name, arguments, retry)

    @property
    def resources(self) -> ResourceProxy:
        """The rest of what the downstreams offer: resource templates, completions,
        subscriptions and the resource and prompt list changes (see ``ResourceProxy``)."""
        return self._proxy

    # -- internals ----------------------------------------------------------------------

    def _start(self, server: ServerState) -> None:
        """Put ``server`` in the table and, once the gateway runs, its supervisor in a task
        of its own that :meth:`_stop` can cancel."""
        self._servers.add(server)
        if self._tg is None:
            return  # entering the gateway starts it
        server.started_at = anyio.current_time()
        if not server.config.enabled:
            self._set(server, state="disabled")
            server.first_attempt_done.set()
            return
        supervisor = Supervisor(
            server,
            settings=self.settings,
            redactor=self.redactor,
            environ=self._environ,
            on_tools=self._apply_tools,
            on_notice=self._proxy.notice,
            on_serving=self._proxy.subscriptions.renew,
            on_state=self._tell_unavailable,
        )
        scope = self._scopes[server.name] = anyio.CancelScope()
        self._tg.start_soon(self._supervise, supervisor, scope, name=f"gateway:{server.name}")

    @staticmethod
    async def _supervise(supervisor: Supervisor, scope: anyio.CancelScope) -> None:
        with scope:
            await supervisor.run()

    def _stop(self, name: str) -> ServerState:
        """Take the server out of the table and end its task: its connection closes (a stdio
        server's process is stopped) and calls in flight on it fail."""
        server = self._servers.remove(name)
        assert server is not None, name
        scope = self._scopes.pop(name, None)
        if scope is not None:
            scope.cancel()
        server.connection = None
        self._tell_unavailable()
        return server

    def _redacted_progress(
        self, callback: Callable[[float, float | None, str | None], Awaitable[None]] | None
    ) -> ProgressFnT | None:
        if callback is None:
            return None
        redact = self.redactor.redact

        async def forward(progress: float, total: float | None, message: str | None) -> None:
            await callback(progress, total, redact(message) if message else message)

        return forward

    # -- catalog and names -----------------------------------------------------------------

    def _apply_tools(
        self, server: ServerState, tools: list[types.Tool], connection: Connection
    ) -> None:
        if self._servers.find(server.name) is not server:
            return  # a listing that arrived as its server was stopped
        self._admit(server, tools)
        self._set(
            server,
            state="connected",
            connection=connection,
            last_error=None,
            last_refresh=datetime.now(UTC),
        )
        self._notify_exposed()

    def _admit(self, server: ServerState, tools: list[types.Tool]) -> None:
        """Where every fresh tool list enters: only what the gate admits (cleaned, within the
        limits, pinned or approved) reaches the catalog, the exposed list and calls."""
        admission = self.gate.admit(server.name, server.config, tools)
        log_report(server.name, server.trust, admission.report)
        server.listing, server.held, server.trust = (
            admission.listing,
            admission.held,
            admission.report,
        )
        server.unlisted.difference_update(t.name for t in admission.listing)
        self.catalog.replace_server_tools(server.name, server.catalog_items(admission.accepted))
        server.tools = admission.accepted
        self._rename()

    async def _watch_pins(self) -> None:
        """Decide again for every listed server when the pin file changes (an approval)."""
        while True:
            await anyio.sleep(self.settings.pin_poll)
            if not self.gate.reload():
                continue
            for server in self._servers:
                if server.listing:
                    self._admit(server, server.listing)
            self._notify_exposed()

    def _rename(self) -> None:
        # Held tools keep a name too (never listed): a host calling one directly is told it
        # is held and how to approve it, instead of "unknown tool".
        pairs = [(s.name, t.name) for s in self._servers for t in s.tools]
        pairs += [(s.name, name) for s in self._servers for name in s.held]
        self._names.assign(pairs, {s.name: s.config.prefix for s in self._servers})
        for server in self._servers:
            server.name_clashes = self._names.clashes(server.name)

    def _notify_exposed(self) -> None:
        exposed = self.exposed_tools()
        fingerprint = (
            self.has_servers(),
            *(
                (t.name, t.definition.model_dump_json(by_alias=True, exclude_none=True))
                for t in exposed
            ),
        )
        if fingerprint == self._exposed_fingerprint:
            return
        self._exposed_fingerprint = fingerprint
        if self.on_exposed_change is not None and self._tg is not None:
            self._tg.start_soon(self._call_exposed_change, exposed)

    async def _call_exposed_change(self, exposed: list[ExposedTool]) -> None:
        assert self.on_exposed_change is not None
        try:
            outcome = self.on_exposed_change(exposed)
            if inspect.isawaitable(outcome):
                await outcome
        except Exception:
            log.exception("on_exposed_change callback failed")

    def _set(self, server: ServerState, **changes: Any) -> None:
        for key, value in changes.items():
            setattr(server, key, value)
        if "state" in changes or "last_error" in changes:
            self._tell_unavailable()

    def _tell_unavailable(self) -> None:
        """Tell the catalog which servers are not running and why, so every request context
        names them (a model otherwise only sees their tools missing)."""
        down = {
            s.name: _one_line(s.last_error or "not connected")
            for s in self._servers
            if s.state in ("failed", "reconnecting")
        }
        self.catalog.set_unavailable(down)


def _one_line(text: str, limit: int = 200) -> str:
    """``text`` on one line (:func:`inline`), at most ``limit`` characters."""
    flat = inline(text)
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def _no_cancel(reason: str) -> None:
    """Giving up a call that has already been answered: nothing to do."""
