"""Result rows shared by several tools, converted from the domain's dataclasses."""

from __future__ import annotations

from typing import Literal

from contextcore.code_runs import CodeRun
from contextcore.sessions import RequestContext, RequestItem, Session, SessionItem

from ._spec import Out

__all__ = [
    "CodeRunOut",
    "ItemType",
    "RequestItemOut",
    "SessionItemOut",
    "code_runs_text",
    "item_line",
    "request_candidates",
    "request_items",
    "session_items",
]

ItemType = Literal["rule", "reference", "tool"]


class SessionItemOut(Out):
    """An item in a session's context and how it got there."""

    type: ItemType
    name: str
    server: str | None
    include_mode: Literal["always", "manual"]

    @classmethod
    def of(cls, item: SessionItem) -> SessionItemOut:
        ref = item.ref
        return cls(type=ref.type, name=ref.name, server=ref.server, include_mode=item.include_mode)


Via = Literal["search", "conversation", "server", "rank", "step"]
_VIA: dict[str, Via] = {
    "search": "search",
    "conversation": "conversation",
    "server": "server",
    "rank": "rank",
    "step": "step",
}


class RequestItemOut(Out):
    """An item used for one request, how it was included and its similarity if searched."""

    type: ItemType
    name: str
    server: str | None
    include_mode: Literal["always", "manual", "agent"]
    similarity_score: float | None
    intent: str | None = None
    via: Via | None = None
    turn: str | None = None

    @classmethod
    def of(cls, item: RequestItem) -> RequestItemOut:
        ref = item.ref
        return cls(
            type=ref.type,
            name=ref.name,
            server=ref.server,
            include_mode=item.include_mode,
            similarity_score=item.similarity_score,
            intent=item.intent,
            via=_VIA.get(item.via or ""),
            turn=item.turn,
        )


class CodeCallOut(Out):
    server: str
    tool: str
    ok: bool


class CodeRunOut(Out):
    """A program run with ``run_code`` after a request context: its code, calls, answer."""

    at: float
    code: str
    calls: list[CodeCallOut]
    answer: str
    is_error: bool

    @classmethod
    def of(cls, run: CodeRun) -> CodeRunOut:
        return cls.model_validate(run)


def code_runs_text(runs: list[CodeRunOut]) -> str:
    """The runs as a text section (empty without runs)."""
    if not runs:
        return ""
    parts = [f"## Code runs after this request ({len(runs)})"]
    for n, run in enumerate(runs, 1):
        calls = ", ".join(f"{c.server}/{c.tool}" + ("" if c.ok else " (failed)") for c in run.calls)
        outcome = "failed" if run.is_error else "answered"
        parts.append(
            f"### Run {n}: {len(run.calls)} tool call(s), {outcome}\n"
            f"```python\n{run.code.rstrip()}\n```\n"
            f"Calls: {calls or 'none'}\nAnswer: {run.answer}"
        )
    return "\n\n".join(parts)


def session_items(session: Session) -> list[SessionItemOut]:
    return [SessionItemOut.of(i) for i in session.items]


def request_items(context: RequestContext) -> list[RequestItemOut]:
    return [RequestItemOut.of(i) for i in context.items]


def request_candidates(context: RequestContext) -> list[RequestItemOut]:
    """The further tools a request context named one line each (``via``: why)."""
    return [RequestItemOut.of(i) for i in context.candidates]


def item_line(
    type_: str, name: str, server: str | None, mode: str, score: float | None = None
) -> str:
    """``- rule:name (always)`` or ``- tool:srv/name (agent, 0.82)``."""
    key = f"tool:{server}/{name}" if type_ == "tool" else f"{type_}:{name}"
    detail = mode if score is None else f"{mode}, {score:.2f}"
    return f"- {key} ({detail})"
