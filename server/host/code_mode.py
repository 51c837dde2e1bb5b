"""Code mode: the ``run_code`` tool. A program the model writes runs in the sandbox
(:mod:`.sandbox`) with every downstream tool the caller may use as an async function, and
only its answer (what it printed and its last expression's value) goes back to the model.

Every call a program makes is a ``call_tool`` call of the caller's (see
:meth:`GatewayTools.call`): the same profile, trust and pins, argument check against the
input schema, secrets masking, size limits and record in the session, usage included. A
refusal or a downstream error is raised inside the program as a ``RuntimeError`` it can
catch. The variables a run defines are kept with the session in the store (the ``code``
part), with the latest runs: their code, the calls they made and their answer.
"""

from __future__ import annotations

import base64
import json
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import anyio.to_thread
from context_broker.tools.code import RUN_CODE, RUN_CODE_DESCRIPTION, RunCodeArgs
from mcp import MCPError, types
from pydantic import ValidationError

from contextcore.code_runs import CodeCall, CodeRun
from contextcore.errors import ContextCoreError
from contextcore.items import ItemRef, Tool
from contextcore.profiles import Profile
from contextcore.signatures import Signature, python_line, signature, stubs

from ..gateway.models import ExposedTool
from ..gateway.server_state import app_only
from ..settings import CodeConfig
from ..wire.results import error_result
from .gateway_tools import CALL_TOOL, GatewayDirectory, GatewayTools
from .sandbox import Outcome, Sandbox, SandboxFailure
from .tool_calls import describe_validation_error

__all__ = ["CodeDirectory", "CodeRunner"]

log = logging.getLogger(__name__)

_RUNS_KEPT = 20
_RECORD_CHARS = 4_000


class CodeDirectory:
    """How a host calls downstream tools (:class:`GatewayDirectory`), and, while code mode
    is on, the Python signature a program calls each by (:meth:`python_line`)."""

    def __init__(self, directory: GatewayDirectory, code_mode: bool) -> None:
        self._directory = directory
        self.code_mode = code_mode

    def exposed_name(self, ref: ItemRef) -> str | None:
        return self._directory.exposed_name(ref)

    def listed(self, ref: ItemRef) -> bool:
        return self._directory.listed(ref)

    def python_line(self, item: Tool) -> str | None:
        """``Python (run_code): `async def ...``` for a tool entry of a text; None while
        code mode is off or the tool has no name to call it by."""
        if not self.code_mode:
            return None
        return python_line(item, self.exposed_name(item.ref))


@dataclass(frozen=True)
class _Target:
    server: str
    tool: str
    signature: Signature


@dataclass
class _Run:
    """One program's run: who calls, for which session, and the calls it made."""

    tools: GatewayTools
    session_id: str
    profile: Profile | None
    max_calls: int
    calls: list[CodeCall] = field(default_factory=list)

    async def call(self, server: str, tool: str, arguments: Any) -> Any:
        """A tool's structured content, else its text; ``RuntimeError`` for a refusal or
        a failure, as the model should read it."""
        if not isinstance(server, str) or not isinstance(tool, str):
            raise TypeError("call_tool(server, tool, arguments): server and tool are names (str)")
        if arguments is not None and not isinstance(arguments, dict):
            raise TypeError(f"call_tool: arguments must be a dict, got {type(arguments).__name__}")
        if len(self.calls) >= self.max_calls:
            raise RuntimeError(
                f"{server}/{tool}: the run reached its limit of {self.max_calls} tool calls "
                "(code.max_calls); do the rest in another run"
            )
        self.calls.append(CodeCall(server, tool, False))
        at = len(self.calls) - 1
        request = {"server": server, "tool": tool, "arguments": arguments or {}}
        try:
            result = await self.tools.call(
                CALL_TOOL, {**request, "session_id": self.session_id}, None, None, self.profile
            )
        except MCPError as exc:
            raise RuntimeError(f"{server}/{tool}: {exc}") from None
        if isinstance(result, types.InputRequiredResult):
            raise RuntimeError(f"{server}/{tool} asks the host for input; call it directly")
        text = "\n".join(b.text for b in result.content if isinstance(b, types.TextContent))
        if result.is_error:
            raise RuntimeError(text or f"{server}/{tool} failed")
        self.calls[at] = CodeCall(server, tool, True)
        return result.structured_content if result.structured_content is not None else text


class CodeRunner:
    """Answers ``run_code`` calls; the sandbox's workers start on the first run."""

    def __init__(self, gateway_tools: GatewayTools, config: CodeConfig) -> None:
        self.gateway_tools = gateway_tools
        self.config = config
        self.sandbox = Sandbox(config)
        self.definition = types.Tool(
            name=RUN_CODE,
            description=RUN_CODE_DESCRIPTION,
            input_schema=RunCodeArgs.model_json_schema(),
            annotations=types.ToolAnnotations(read_only_hint=False, open_world_hint=True),
        )

    async def aclose(self) -> None:
        """Stop the sandbox's workers."""
        await self.sandbox.aclose()

    def _callable(self, profile: Profile | None) -> list[ExposedTool]:
        """The tools a program may call: enabled, in the profile, not for an App alone."""
        return [
            t
            for t in self.gateway_tools.gateway.tools()
            if t.enabled
            and not app_only(t.definition)
            and (profile is None or profile.allows_tool(t.server, t.tool))
        ]

    def functions(self, profile: Profile | None = None) -> dict[str, _Target]:
        """Every tool a program of a host under ``profile`` may call, by its Python name."""
        out: dict[str, _Target] = {}
        for t in self._callable(profile):
            d = t.definition
            sig = signature(t.name, d.input_schema, d.output_schema)
            out.setdefault(sig.name, _Target(t.server, t.tool, sig))
        return out

    async def call(
        self,
        arguments: Mapping[str, Any],
        profile: Profile | None,
        default_session: Callable[[], str],
    ) -> types.CallToolResult:
        """Run one ``run_code`` call: a program's answer, or a tool error saying why not."""
        try:
            args = RunCodeArgs.model_validate(arguments)
        except ValidationError as exc:
            return error_result(f"{RUN_CODE}: invalid arguments: {describe_validation_error(exc)}")
        await self.gateway_tools.startup()
        broker = self.gateway_tools.broker

        def session() -> str:
            sid = broker.require_session(args.session_id) if args.session_id else None
            sid = sid or default_session()
            if profile is not None:
                broker.require_profile(sid, profile.name)
            return sid

        try:
            sid = await anyio.to_thread.run_sync(session)
        except ContextCoreError as exc:
            return error_result(f"{RUN_CODE}: {exc.field}: {exc.message}")
        return await self._run(args, sid, profile)

    async def _run(
        self, args: RunCodeArgs, sid: str, profile: Profile | None
    ) -> types.CallToolResult:
        targets = self.functions(profile)
        run = _Run(self.gateway_tools, sid, profile, self.config.max_calls)
        functions: dict[str, Callable[..., Any]] = {"call_tool": run.call}
        functions |= {name: _function(run, target) for name, target in targets.items()}
        store = self.gateway_tools.broker.store
        saved = None if args.reset else await anyio.to_thread.run_sync(store.code_state, sid)
        state = _state_bytes(saved)
        started = time.time()
        try:
            outcome = await self.sandbox.run(
                args.code,
                stubs(t.signature for t in targets.values()),
                functions,
                state,
                (saved or {}).get("checked_with", ""),
            )
        except SandboxFailure as exc:
            await self._keep(sid, args, run, exc.message, None, started, reset=args.reset)
            return error_result(f"{exc.message}\n{_footer(sid, run)}")
        answer = self._answer(outcome.value, outcome.printed)
        note = await self._keep(sid, args, run, answer, outcome, started)
        text = f"{answer}\n{_footer(sid, run)}{note}"
        return types.CallToolResult(content=[types.TextContent(type="text", text=text)])

    def _answer(self, value: Any, printed: str) -> str:
        limit = self.config.max_output_chars
        shown = "" if value is None else _render(value)
        if len(shown) > limit:
            shown = f"{shown[:limit]}\n[answer cut at {limit} characters]"
        return "\n".join(p for p in (printed.rstrip("\n"), shown) if p) or "(no output)"

    async def _keep(
        self,
        sid: str,
        args: RunCodeArgs,
        run: _Run,
        answer: str,
        outcome: Outcome | None,
        started: float,
        *,
        reset: bool = False,
    ) -> str:
        """Keep the run with the session (after its latest turn), and its variables when it
        finished and they fit; the note to add to the answer when they did not fit."""
        kept, note = self._kept(outcome)
        broker = self.gateway_tools.broker

        def change(entry: dict[str, Any], current: dict[str, Any] | None) -> dict[str, Any]:
            base = {} if current is None or reset else dict(current)
            if outcome is not None:  # a failed run leaves the variables as they were
                base.pop("state", None)
                base.pop("checked_with", None)
                base |= kept
            base["runs"] = [*base.get("runs", [])[-(_RUNS_KEPT - 1) :], entry]
            return base

        def record() -> None:
            last = broker.last_turn(sid)
            entry = CodeRun(
                at=started,
                turn=last.request_id if last is not None else None,
                code=args.code[:_RECORD_CHARS],
                calls=tuple(run.calls),
                answer=answer[:_RECORD_CHARS],
                is_error=outcome is None,
            ).to_json()
            broker.store.update_code_state(sid, lambda current: change(entry, current))

        try:
            await anyio.to_thread.run_sync(record)
        except ContextCoreError as exc:
            log.warning("could not keep the code state of session %s: %s", sid, exc)
        return note

    def _kept(self, outcome: Outcome | None) -> tuple[dict[str, Any], str]:
        """The variables to keep of a finished run (nothing: none, or over the size limit),
        and the note saying why they were not kept."""
        if outcome is None or outcome.state is None:
            return {}, ""
        size, limit = len(outcome.state), self.config.max_state_bytes
        if size > limit:
            return (
                {},
                f"\n[variables not kept: {size} bytes is over code.max_state_bytes = {limit}]",
            )
        data = base64.b64encode(outcome.state).decode("ascii")
        return {"state": data, "checked_with": outcome.checked_with}, ""


def _function(run: _Run, target: _Target) -> Callable[..., Any]:
    """The async function a program calls a tool by: keyword arguments, None for an
    optional one meaning "leave it out"."""
    sig = target.signature
    optional = {p.name for p in sig.parameters if not p.required}

    async def call(*args: Any, **kwargs: Any) -> Any:
        if args:
            raise TypeError(f"{sig.name} takes keyword arguments only: {sig.render()}")
        arguments = {k: v for k, v in kwargs.items() if not (v is None and k in optional)}
        return await run.call(target.server, target.tool, arguments)

    return call


def _state_bytes(saved: Mapping[str, Any] | None) -> bytes | None:
    data = (saved or {}).get("state")
    return base64.b64decode(data) if isinstance(data, str) else None


def _render(value: Any) -> str:
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value, ensure_ascii=False, default=repr)
    except (TypeError, ValueError):
        return repr(value)


def _footer(sid: str, run: _Run) -> str:
    calls = len(run.calls)
    return f"[session_id {sid}; {calls} tool call{'' if calls == 1 else 's'}]"
