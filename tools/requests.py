"""Request tools: build_request_context, get_request_context, list_turns."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from contextcore.code_runs import runs_of
from contextcore.context_text import Detail, RenderedContext, render_context
from contextcore.items import ItemRef
from contextcore.presets import PresetName
from contextcore.render import summary_line
from contextcore.services.broker import ContextBroker
from contextcore.sessions import RequestContext

from ._damage import SKIPPED_FIELD, skipped, skipped_lines
from ._models import (
    CodeRunOut,
    RequestItemOut,
    code_runs_text,
    request_candidates,
    request_items,
)
from ._spec import Args, Intents, Out, ToolContext, ToolSpec, UserMessage

__all__ = ["BUILD_REQUEST_CONTEXT", "GET_REQUEST_CONTEXT", "LIST_TURNS"]

_PREVIEW_CHARS = 200


class BuildArgs(Args):
    message: UserMessage = Field(
        description="The user's message; agent items are searched with it."
    )
    session_id: str | None = Field(
        None,
        description="This conversation's session_id, from its first result, while you still "
        "have that text (what it gave is named, not repeated); leave it out in a new "
        "conversation.",
    )
    intents: Intents = None
    top_k: int | None = Field(None, ge=1, description="Chunk matches considered.")
    top_n: int | None = Field(None, ge=1, description="Agent items returned at most.")
    include_score: float | None = Field(
        None, ge=0.0, le=1.0, description="Agent items at or above this score always count."
    )
    preset: PresetName | None = Field(
        None,
        description="Search preset for this request: conservative (fewer, surer items), "
        "normal, aggressive (more items). Default: the session's, else the config's.",
    )
    min_score: float | None = Field(
        None, ge=0.0, le=1.0, description="Rules and references scoring below this are left out."
    )
    min_score_tools: float | None = Field(
        None, ge=0.0, le=1.0, description="Tools scoring below this are left out."
    )
    conversation: float | None = Field(
        None,
        ge=0.0,
        le=1.0,
        description="How much the session's recent turns count for a follow-up such as "
        "'and in Oslo?' (0: this message alone). Default: the session's preset, else the config.",
    )
    include_messages: bool = Field(False, description="Also return the assembled LLM messages.")
    detail: Literal["full", "names"] = Field(
        "full",
        description="full: the text carries each rule's and reference's text and each tool's "
        "input schema; names: only names, modes and scores (fetch texts with get_context_items).",
    )
    max_context_tokens: int | None = Field(
        None, ge=100, description="Budget of the text in tokens (default from the config)."
    )


class Message(Out):
    role: str
    content: str


class RequestContextOut(Out):
    request_id: str
    session_id: str
    timestamp: str
    items: list[RequestItemOut]
    candidates: list[RequestItemOut] = Field(
        default_factory=list,
        description="Further tools the text names one line each (within reach), not in items.",
    )
    summary: str
    search_mode: str | None
    warnings: list[str]
    preset: str | None
    parameters: dict[str, float | int | str] | None
    intents: list[str]
    context_turns: list[str] = Field(default_factory=list)
    text: str
    text_tokens: int
    omitted: list[str]
    messages: list[Message] | None = None


class RequestArgs(Args):
    session_id: str = Field(description="A session id returned by create_session.")
    request_id: str = Field(description="A request id from build_request_context or list_turns.")
    detail: Literal["full", "names"] = Field(
        "full", description="full: texts and input schemas in the text; names: names only."
    )
    max_context_tokens: int | None = Field(
        None, ge=100, description="Budget of the text in tokens (default from the config)."
    )


class RecordedRequestOut(RequestContextOut):
    message: str
    code_runs: list[CodeRunOut] = Field(
        default_factory=list,
        description="The programs run with run_code after this request: code, calls, answer.",
    )


class SessionIdArgs(Args):
    session_id: str = Field(description="A session id returned by create_session.")


class TurnOut(Out):
    request_id: str
    timestamp: str
    message_preview: str
    summary: str
    search_mode: str | None


class TurnsOut(Out):
    session_id: str
    turns: list[TurnOut]
    skipped_records: list[str] = SKIPPED_FIELD


def _rendered(
    ctx: ToolContext, context: RequestContext, detail: Detail, max_tokens: int | None
) -> RenderedContext:
    broker = ctx.broker
    return render_context(
        context,
        broker.lookup,
        ctx.tools,
        max_tokens=max_tokens or broker.search.settings.max_context_tokens,
        detail=detail,
        line_chars=broker.search.settings.reach.line_chars,
    )


def _fields(
    ctx: ToolContext,
    context: RequestContext,
    detail: Detail,
    max_tokens: int | None,
    rendered: RenderedContext | None = None,
) -> dict[str, object]:
    rendered = rendered or _rendered(ctx, context, detail, max_tokens)
    return {
        "request_id": context.request_id,
        "session_id": context.session_id,
        "timestamp": context.timestamp,
        "items": request_items(context),
        "candidates": request_candidates(context),
        "summary": summary_line(context.items),
        "search_mode": context.search_mode,
        "warnings": list(context.warnings),
        "preset": context.preset,
        "parameters": context.parameters,
        "intents": list(context.intents),
        "context_turns": list(context.context_turns),
        "text": rendered.text,
        "text_tokens": rendered.tokens,
        "omitted": [row.ref.key for row in rendered.omitted],
    }


def _messages(broker: ContextBroker, context: RequestContext) -> list[Message]:
    return [Message(**m) for m in broker.messages_for(context)]


def _build(ctx: ToolContext, args: BuildArgs) -> RequestContextOut:
    texts: list[RenderedContext] = []

    def shown(context: RequestContext) -> list[ItemRef]:
        """The items this turn's text does not give in full (the text is kept: what is
        recorded after this changes nothing in it)."""
        texts.append(_rendered(ctx, context, args.detail, args.max_context_tokens))
        if args.detail == "names":
            return [row.ref for row in context.items]
        return [row.ref for row in texts[-1].omitted]

    context = ctx.broker.build_request_context(
        ctx.session_for(args.session_id),
        args.message,
        top_k=args.top_k,
        top_n=args.top_n,
        include_score=args.include_score,
        preset=args.preset,
        min_score=args.min_score,
        min_score_tools=args.min_score_tools,
        intents=args.intents,
        conversation=args.conversation,
        continues=args.session_id is not None,
        shown=shown,
    )
    ctx.built(context)
    messages = _messages(ctx.broker, context) if args.include_messages else None
    fields = _fields(ctx, context, args.detail, args.max_context_tokens, texts[-1])
    return RequestContextOut(**fields, messages=messages)


def _text(out: RequestContextOut) -> str:
    return out.text


def _get(ctx: ToolContext, args: RequestArgs) -> RecordedRequestOut:
    context = ctx.broker.request(args.session_id, args.request_id)
    runs = runs_of(ctx.broker.store.code_state(context.session_id), context.request_id)
    return RecordedRequestOut(
        **_fields(ctx, context, args.detail, args.max_context_tokens),
        message=context.message,
        messages=_messages(ctx.broker, context),
        code_runs=[CodeRunOut.of(r) for r in runs],
    )


def _recorded_text(out: RecordedRequestOut) -> str:
    runs = code_runs_text(out.code_runs)
    return f"{out.text}\n\n{runs}" if runs else out.text


def _preview(message: str) -> str:
    return message if len(message) <= _PREVIEW_CHARS else message[:_PREVIEW_CHARS] + "…"


def _turns(ctx: ToolContext, args: SessionIdArgs) -> TurnsOut:
    broker = ctx.broker
    session = broker.session(args.session_id)
    turns = [
        TurnOut(
            request_id=t.request_id,
            timestamp=t.timestamp,
            message_preview=_preview(t.message),
            summary=summary_line(t.items),
            search_mode=t.search_mode,
        )
        for t in broker.turns(session.session_id)
    ]
    sid = session.session_id
    return TurnsOut(session_id=sid, turns=turns, skipped_records=skipped(ctx, sid))


def _turns_text(out: TurnsOut) -> str:
    lines = [f"Session {out.session_id}: {len(out.turns)} turn(s)"]
    lines += [f"- {t.request_id} {t.timestamp}: {t.summary}" for t in out.turns]
    return "\n".join(lines + skipped_lines(out.skipped_records))


BUILD_REQUEST_CONTEXT = ToolSpec(
    "build_request_context",
    "Call before answering each user message: returns the rules and references to follow "
    "and the tools to use (the best with input schemas, more named one line each; "
    "get_context_items gives any one's schema). For several actions pass `intents`.",
    BuildArgs,
    RequestContextOut,
    _build,
    _text,
    brief=("message", "intents", "session_id"),
)
GET_REQUEST_CONTEXT = ToolSpec(
    "get_request_context",
    "A recorded request context: the rules, references and tools used for that turn and "
    "why, as text to read, with the message and the LLM messages rebuilt from it.",
    RequestArgs,
    RecordedRequestOut,
    _get,
    _recorded_text,
    read_only=True,
)
LIST_TURNS = ToolSpec(
    "list_turns",
    "The session's turn log: every request context built, oldest first.",
    SessionIdArgs,
    TurnsOut,
    _turns,
    _turns_text,
    read_only=True,
)
