"""Runs one tool call: validate the arguments, call the domain off the event loop, and turn
every failure into an MCP tool error (``isError``) a person can act on."""

from __future__ import annotations

import logging
import threading
from collections.abc import Awaitable, Callable, Mapping
from typing import Any
from weakref import WeakKeyDictionary

import anyio.to_thread
from context_broker.tools._spec import ToolContext
from context_broker.tools.all_tools import ToolSpec
from mcp import types
from mcp.server import ServerRequestContext
from mcp.server.session import ServerSession
from pydantic import ValidationError

from contextcore.assembly_model import AssemblyModelSpec
from contextcore.config import LimitsConfig
from contextcore.context_text import NoTools, ToolDirectory
from contextcore.errors import ContextCoreError
from contextcore.services.broker import ContextBroker
from contextcore.services.history import HistoryService
from contextcore.sessions import RequestContext

from ..observability import Observer
from ..summarizers import SummarizerFactory, sampler_for
from ..wire.results import capped_result, error_result
from ..wire.sdk_compat import connection_of

__all__ = [
    "ContextListener",
    "ToolRunner",
    "describe_validation_error",
]

log = logging.getLogger(__name__)

ContextListener = Callable[[ServerSession | None, RequestContext], Awaitable[None]]
"""Hears each request context built for a host (typed, as the domain built it), with the
session of the host that asked (None outside a request)."""

_MAX_VALUE_CHARS = 80


def _short(value: object) -> str:
    text = repr(value)
    return text if len(text) <= _MAX_VALUE_CHARS else text[: _MAX_VALUE_CHARS - 1] + "…"


def describe_validation_error(exc: ValidationError) -> str:
    """``top_k: Input should be greater than or equal to 1 (got 0); ...``."""
    parts = []
    for err in exc.errors():
        where = ".".join(str(p) for p in err["loc"]) or "arguments"
        if err["type"] == "missing" and where == "session_id":
            parts.append(
                "session_id: required argument is missing; call create_session for one (or "
                "build_request_context without one: it names the connection's session)"
            )
        elif err["type"] == "missing":
            parts.append(f"{where}: required argument is missing")
        elif err["type"] == "extra_forbidden":
            parts.append(f"{where}: unknown argument; check the tool's input schema")
        else:
            parts.append(f"{where}: {err['msg']} (got {_short(err.get('input'))})")
    return "; ".join(parts)


def _describe_core(exc: ContextCoreError) -> str:
    message = exc.message
    if exc.field and not message.startswith((f"{exc.field}:", f"{exc.field} ")):
        message = f"{exc.field}: {message}"
    return message


class ToolRunner:
    """Calls tool adapters with one :class:`ToolContext` per call; pass the request context to
    :meth:`call` so summaries can use MCP sampling when the client offers it (without
    ``summarizers`` they are extractive only). Every request context a tool builds goes to
    ``on_context`` before the call returns."""

    def __init__(
        self,
        broker: ContextBroker,
        specs: tuple[ToolSpec, ...],  # type: ignore[type-arg]
        *,
        history: HistoryService,
        summarizers: SummarizerFactory | None = None,
        models: Mapping[str, AssemblyModelSpec] | None = None,
        directory: ToolDirectory | None = None,
        limits: LimitsConfig | None = None,
        observer: Observer | None = None,
        on_context: ContextListener | None = None,
        profile: str | None = None,
        directory_for: Callable[[object], ToolDirectory] | None = None,
        code_mode: bool = False,
    ) -> None:
        self.broker = broker
        self.code_mode = code_mode
        # The directory as one host connection sees it (the tools its host re-listed).
        self.directory_for = directory_for
        # The profile of the hosts this runner serves: their sessions are created under it,
        # and a session of another profile is refused.
        self.profile = profile
        self.observer = observer or Observer()
        # The history service carries the config's [limits]; an explicit one wins.
        self.limits = limits or history.limits
        self.directory: ToolDirectory = directory or NoTools()
        self.models = dict(models or {})
        self.specs = {s.name: s for s in specs}
        self.history = history
        self.summarizers = summarizers
        self.on_context = on_context
        # Each host connection's own session, for calls that name none (kept on the
        # connection object itself, weakly: a new connection never inherits one).
        self._sessions: WeakKeyDictionary[object, str] = WeakKeyDictionary()
        self._sessions_lock = threading.Lock()

    def host_session(self, ctx: ServerRequestContext[Any] | None) -> str:
        """The broker session of the host connection ``ctx`` came on, created (under this
        runner's profile) on its first use or when its session is gone; a new one per call
        outside a connection."""
        if ctx is None:
            return self.broker.create_session(profile=self.profile).session_id
        key = connection_of(ctx.session)
        with self._sessions_lock:
            sid = self._sessions.get(key)
            if sid is None or self.broker.store.header(sid) is None:
                sid = self.broker.create_session(profile=self.profile).session_id
                self._sessions[key] = sid
            return sid

    def _directory(self, ctx: ServerRequestContext[Any] | None) -> ToolDirectory:
        if ctx is None or self.directory_for is None:
            return self.directory
        return self.directory_for(ctx.session)

    def _context(
        self, ctx: ServerRequestContext[Any] | None, built: Callable[[RequestContext], None]
    ) -> ToolContext:
        chain = None
        if self.summarizers is not None:
            chain = self.summarizers.chain(sampler_for(ctx))
        return ToolContext(
            self.broker,
            self.history,
            chain,
            self.models,
            self._directory(ctx),
            built,
            self.profile,
            host_session=lambda: self.host_session(ctx),
            code_mode=self.code_mode,
        )

    async def call(
        self,
        spec: ToolSpec,  # type: ignore[type-arg]
        arguments: dict[str, Any],
        ctx: ServerRequestContext[Any] | None = None,
    ) -> types.CallToolResult:
        """The tool's result, or an ``isError`` result naming the field and the problem;
        counted, timed and traced (under the caller's ``_meta.traceparent``). The request
        contexts the tool built (recorded even when a later step failed) go to
        ``on_context`` within the call's span."""
        built: list[RequestContext] = []
        with self.observer.tool_call(spec.name, ctx.meta if ctx is not None else None) as done:
            result = await self._call(spec, arguments, ctx, built.append)
            if self.on_context is not None:
                for context in built:
                    await self.on_context(ctx.session if ctx is not None else None, context)
            done(result)
            return result

    async def _call(
        self,
        spec: ToolSpec,  # type: ignore[type-arg]
        arguments: dict[str, Any],
        ctx: ServerRequestContext[Any] | None,
        built: Callable[[RequestContext], None],
    ) -> types.CallToolResult:
        try:
            args = spec.args.model_validate(arguments)
        except ValidationError as exc:
            return error_result(f"{spec.name}: invalid arguments: {describe_validation_error(exc)}")
        context = self._context(ctx, built)

        def run() -> Any:
            session_id = getattr(args, "session_id", None)
            if self.profile is not None and isinstance(session_id, str):
                self.broker.require_profile(session_id, self.profile)
            return spec.run(context, args)

        try:
            out = await anyio.to_thread.run_sync(run)
        except ContextCoreError as exc:
            log.info("tool %s refused the call: %s", spec.name, exc.message[:200])
            return error_result(f"{spec.name}: {_describe_core(exc)}")
        except Exception as exc:
            log.exception("tool %s failed unexpectedly", spec.name)
            return error_result(
                f"{spec.name} failed unexpectedly ({type(exc).__name__}); "
                "the server log has the details"
            )
        return capped_result(
            spec.name, spec.text(out), out.model_dump(mode="json"), self.limits.max_result_bytes
        )
