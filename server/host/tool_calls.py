"""Runs one tool call: validate the arguments, call the domain off the event loop, and turn
every failure into an MCP tool error (``isError``) a person can act on."""

from __future__ import annotations

import json
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
from ..wire.sdk_compat import connection_of

__all__ = [
    "ContextListener",
    "ToolRunner",
    "capped_downstream",
    "capped_result",
    "describe_validation_error",
]

log = logging.getLogger(__name__)

ContextListener = Callable[[ServerSession | None, RequestContext], Awaitable[None]]
"""Hears each request context built for a host (typed, as the domain built it), with the
session of the host that asked (None outside a request)."""

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


def error_result(text: str) -> types.CallToolResult:
    """An ``isError`` tool result with one bounded text block."""
    if len(text) > _MAX_ERROR_CHARS:
        text = text[: _MAX_ERROR_CHARS - 1] + "…"
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)], is_error=True)


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
    ) -> None:
        self.broker = broker
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
            self.directory,
            built,
            self.profile,
            host_session=lambda: self.host_session(ctx),
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


# What to do to get what a capped result left out, per tool; other tools get the generic hint.
_REST_HINTS = {
    "get_history": "ask for a smaller window (max_tokens) or trim more (preset or filters)",
    "trim_messages": "send fewer messages or pass a smaller max_tokens",
    "list_catalog": "list one item type at a time (types)",
    "get_usage_stats": "ask for one session at a time (session_id)",
    "get_request_context": "ask for names only (detail='names') or a smaller max_context_tokens",
}
_CUT = "…[{} characters cut]"
_ENVELOPE_BYTES = 2048  # JSON-RPC envelope and the note itself


def _json_bytes(value: Any) -> int:
    return len(json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode())


def _shrunk(value: Any, max_chars: int, max_items: int | None) -> Any:
    """``value`` with every string over ``max_chars`` cut (saying how much) and, with
    ``max_items``, every list cut to its first ``max_items`` items."""
    if isinstance(value, str):
        return (
            value
            if len(value) <= max_chars
            else value[:max_chars] + _CUT.format(len(value) - max_chars)
        )
    if isinstance(value, dict):
        return {k: _shrunk(v, max_chars, max_items) for k, v in value.items()}
    if isinstance(value, list):
        kept = value if max_items is None else value[:max_items]
        return [_shrunk(v, max_chars, max_items) for v in kept]
    return value


def _largest_fitting(fits: Callable[[int], bool], high: int) -> int | None:
    """The largest n in [0, high] with ``fits(n)`` (``fits`` grows monotonically false)."""
    if not fits(0):
        return None
    low = 0
    while low < high:
        middle = (low + high + 1) // 2
        if fits(middle):
            low = middle
        else:
            high = middle - 1
    return low


def _longest_string(value: Any) -> int:
    if isinstance(value, str):
        return len(value)
    children = (
        value.values() if isinstance(value, dict) else value if isinstance(value, list) else ()
    )
    return max((_longest_string(v) for v in children), default=0)


def _longest_list(value: Any) -> int:
    if isinstance(value, dict):
        return max((_longest_list(v) for v in value.values()), default=0)
    if isinstance(value, list):
        return max([len(value), *(_longest_list(v) for v in value)])
    return 0


def _fit(value: Any, room: int) -> tuple[Any, list[str]] | None:
    """``value`` cut to at most ``room`` serialized bytes, keeping its shape: the longest
    strings cut to one common length (each saying how much went), then, if that is not
    enough, long lists cut to their first items; with what was cut, or None if it cannot fit."""
    max_items: int | None = None
    max_chars = _largest_fitting(
        lambda n: _json_bytes(_shrunk(value, n, None)) <= room, _longest_string(value)
    )
    if max_chars is None or max_chars < 200:
        max_chars = 200
        max_items = _largest_fitting(
            lambda n: _json_bytes(_shrunk(value, 200, n)) <= room, _longest_list(value)
        )
        if max_items is None:
            return None
    cuts = [f"strings longer than {max_chars:,} characters were cut"]
    if max_items is not None:
        cuts.append(f"lists kept their first {max_items:,} items")
    return _shrunk(value, max_chars, max_items), cuts


def _too_big(tool: str, size: int, max_bytes: int) -> str:
    return (
        f"{tool}: the result is {size:,} bytes, over limits.max_result_bytes "
        f"({max_bytes}), and cannot be cut to fit; "
        f"{_REST_HINTS.get(tool, 'call again with narrower arguments')}"
    )


def capped_result(
    tool: str, text: str, structured: dict[str, Any], max_bytes: int
) -> types.CallToolResult:
    """A tool result of at most about ``max_bytes`` serialized bytes.

    A bigger one keeps its shape: its text is cut, and its structured content is cut as
    :func:`_fit` does. A second text block says what was cut and how to get the rest.
    """
    size = len(text.encode()) + _json_bytes(structured)
    if size <= max_bytes:
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=text)], structured_content=structured
        )
    budget = max_bytes - _ENVELOPE_BYTES
    text_budget = budget // 4
    short_text = text if len(text.encode()) <= text_budget else _cut_text(text, text_budget)
    fitted = _fit(structured, budget - len(short_text.encode()))
    if fitted is None:
        return error_result(_too_big(tool, size, max_bytes))
    shrunk, cuts = fitted
    note = (
        f"[{tool}: this result was {size:,} bytes, over limits.max_result_bytes ({max_bytes}); "
        f"to fit, the text was cut to {len(short_text):,} characters, "
        f"{' and '.join(cuts)} (each cut says how much went). To get the rest: "
        f"{_REST_HINTS.get(tool, 'call again with narrower arguments')}.]"
    )
    log.info("tool %s result of %d bytes cut to fit max_result_bytes %d", tool, size, max_bytes)
    return types.CallToolResult(
        content=[
            types.TextContent(type="text", text=short_text),
            types.TextContent(type="text", text=note),
        ],
        structured_content=shrunk,
    )


def capped_downstream(tool: str, result: dict[str, Any], max_bytes: int) -> dict[str, Any]:
    """A downstream tool's result (its JSON object) of at most about ``max_bytes`` serialized
    bytes, cut the way the broker's own results are: binary payloads (images, audio, blobs)
    give way to a line saying what they were, then text and structured content are cut as
    :func:`_fit` does, and a last text block says what was cut."""
    size = _json_bytes(result)
    if size <= max_bytes:
        return result
    content = result.get("content")
    blocks = [_without_binary(b) for b in content] if isinstance(content, list) else content
    body = {**result, "content": blocks} if isinstance(content, list) else dict(result)
    fitted = _fit(body, max_bytes - _ENVELOPE_BYTES)
    if fitted is None:
        text = _too_big(tool, size, max_bytes)
        return {"content": [{"type": "text", "text": text}], "isError": True}
    shrunk, cuts = fitted
    if blocks != content:
        cuts.insert(0, "binary content was left out")
    note = (
        f"[{tool}: this downstream result was {size:,} bytes, over limits.max_result_bytes "
        f"({max_bytes}); to fit, {' and '.join(cuts)} (each cut says how much went). To get "
        "the rest: call again with narrower arguments.]"
    )
    log.info(
        "downstream %s result of %d bytes cut to fit max_result_bytes %d", tool, size, max_bytes
    )
    shrunk["content"] = [*(shrunk.get("content") or []), {"type": "text", "text": note}]
    return shrunk  # type: ignore[no-any-return]


def _without_binary(block: Any) -> Any:
    """A content block with its base64 payload (``data``, or a resource's ``blob``) replaced
    by a text block naming it: cut base64 would be a broken file."""
    if not isinstance(block, dict):
        return block
    resource = block.get("resource")
    if isinstance(block.get("data"), str):
        payload, kind = block["data"], f"{block.get('type', 'binary')} {block.get('mimeType', '')}"
    elif isinstance(resource, dict) and isinstance(resource.get("blob"), str):
        payload, kind = resource["blob"], f"resource {resource.get('uri', '')}"
    else:
        return block
    text = f"[{kind.strip()} of {len(payload):,} base64 characters left out]"
    return {"type": "text", "text": text}


def _cut_text(text: str, max_bytes: int) -> str:
    kept = text.encode()[:max_bytes].decode(errors="ignore")
    return kept + _CUT.format(len(text) - len(kept))
