"""Runs one tool call: validate the arguments, call the domain off the event loop, and turn
every failure into an MCP tool error (``isError``) a person can act on."""

from __future__ import annotations

import logging
import threading
from typing import Any

import anyio.to_thread
from mcp import types
from pydantic import BaseModel, ValidationError

from contextcore.broker import ContextBroker
from contextcore.errors import ContextCoreError
from tools.surface import ToolSpec

__all__ = ["ToolRunner", "describe_validation_error"]

log = logging.getLogger(__name__)

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
    indexes lazily and is not safe to run concurrently)."""

    def __init__(self, broker: ContextBroker, specs: tuple[ToolSpec, ...]) -> None:  # type: ignore[type-arg]
        self.broker = broker
        self.specs = {s.name: s for s in specs}
        self._search_lock = threading.Lock()

    def _work(self, spec: ToolSpec, args: BaseModel) -> BaseModel:  # type: ignore[type-arg]
        if spec.uses_search:
            with self._search_lock:
                return spec.run(self.broker, args)
        return spec.run(self.broker, args)

    async def call(self, spec: ToolSpec, arguments: dict[str, Any]) -> types.CallToolResult:  # type: ignore[type-arg]
        """The tool's result, or an ``isError`` result naming the field and the problem."""
        try:
            args = spec.args.model_validate(arguments)
        except ValidationError as exc:
            return error_result(f"{spec.name}: invalid arguments: {describe_validation_error(exc)}")
        try:
            out = await anyio.to_thread.run_sync(self._work, spec, args)
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
