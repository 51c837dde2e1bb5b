"""Runs one tool call: validate the arguments, call the domain off the event loop, and turn
every failure into an MCP tool error (``isError``) a person can act on."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

import anyio.to_thread
from mcp import types
from mcp.server import ServerRequestContext
from pydantic import BaseModel, ValidationError

from contextcore.assembly_model import AssemblyModelSpec
from contextcore.broker import ContextBroker
from contextcore.context_text import NoTools, ToolDirectory
from contextcore.errors import ContextCoreError
from contextcore.history_service import HistoryService
from tools._spec import ToolContext
from tools.surface import ToolSpec

from .summarizers import SummarizerFactory, sampler_for

__all__ = ["ToolRunner", "describe_validation_error"]

log = logging.getLogger(__name__)
T = TypeVar("T")

_MAX_ERROR_CHARS = 2000
_MAX_VALUE_CHARS = 80


def _short(value: object) -> str:
    text = repr(value)
    return text if len(text) <= _MAX_VALUE_CHARS else text[: _MAX_VALUE_CHARS - 1] + "…"


def describe_validation_error(exc: ValidationError) -> str:
    """``top_k: Input should be greater than or equal to 1 (got 0); ...``."""
    parts = []
    for err in exc.errors():
        where = ".".join(str(p) for p in err["loc"]) or "arguments"
        if err["type"] == "missing":
            parts.append(f"{where}: required argument is missing")
        elif err["type"] == "extra_forbidden":
            parts.append(f"{where}: unknown argument; check the tool's input schema")
        else:
            parts.append(f"{where}: {err['msg']} (got {_short(err.get('input'))})")
    return "; ".join(parts)


def _describe_core(exc: ContextCoreError) -> str:
    message = exc.message
    if exc.field and not message.startswith(f"{exc.field}:"):
        message = f"{exc.field}: {message}"
    return message


def error_result(text: str) -> types.CallToolResult:
    """An ``isError`` tool result with one bounded text block."""
    if len(text) > _MAX_ERROR_CHARS:
        text = text[: _MAX_ERROR_CHARS - 1] + "…"
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)], is_error=True)


class ToolRunner:
    """Calls tool adapters against one broker; searches never overlap (the search engine
    indexes lazily and is not safe to run concurrently).

    Specs with ``takes_context`` get a :class:`ToolContext`: they need ``history`` (and
    ``summarizers``, else summaries are extractive only); pass the request context to
    :meth:`call` so summaries can use MCP sampling when the client offers it."""

    def __init__(
        self,
        broker: ContextBroker,
        specs: tuple[ToolSpec, ...],  # type: ignore[type-arg]
        *,
        history: HistoryService | None = None,
        summarizers: SummarizerFactory | None = None,
        models: Mapping[str, AssemblyModelSpec] | None = None,
        directory: ToolDirectory | None = None,
    ) -> None:
        self.broker = broker
        self.directory: ToolDirectory = directory or NoTools()
        self.models = dict(models or {})
        self.specs = {s.name: s for s in specs}
        self.history = history
        self.summarizers = summarizers
        self._search_lock = threading.Lock()
        needy = [s.name for s in specs if s.takes_context]
        if needy and history is None:
            raise ValueError(f"tools {needy} need a HistoryService; pass history=")

    def _target(self, spec: ToolSpec, ctx: ServerRequestContext[Any] | None) -> Any:  # type: ignore[type-arg]
        if not spec.takes_context:
            return self.broker
        assert self.history is not None
        chain = None
        if self.summarizers is not None:
            chain = self.summarizers.chain(sampler_for(ctx))
        return ToolContext(self.broker, self.history, chain, self.models, self.directory)

    def _work(self, spec: ToolSpec, target: Any, args: BaseModel) -> BaseModel:  # type: ignore[type-arg]
        if spec.uses_search:
            with self._search_lock:
                out: BaseModel = spec.run(target, args)
                return out
        out = spec.run(target, args)
        return out

    async def run_locked(self, fn: Callable[[], T]) -> T:
        """Run a blocking domain call that may search, off the event loop and never at the
        same time as another search."""

        def work() -> T:
            with self._search_lock:
                return fn()

        return await anyio.to_thread.run_sync(work)

    async def call(
        self,
        spec: ToolSpec,  # type: ignore[type-arg]
        arguments: dict[str, Any],
        ctx: ServerRequestContext[Any] | None = None,
    ) -> types.CallToolResult:
        """The tool's result, or an ``isError`` result naming the field and the problem."""
        try:
            args = spec.args.model_validate(arguments)
        except ValidationError as exc:
            return error_result(f"{spec.name}: invalid arguments: {describe_validation_error(exc)}")
        try:
            target = self._target(spec, ctx)
            out = await anyio.to_thread.run_sync(self._work, spec, target, args)
        except ContextCoreError as exc:
            log.info("tool %s refused the call: %s", spec.name, exc.message[:200])
            return error_result(f"{spec.name}: {_describe_core(exc)}")
        except Exception as exc:
            log.exception("tool %s failed unexpectedly", spec.name)
            return error_result(
                f"{spec.name} failed unexpectedly ({type(exc).__name__}); "
                "the server log has the details"
            )
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=spec.text(out))],
            structured_content=out.model_dump(mode="json"),
        )
