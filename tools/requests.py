"""Request tools: build_request_context, get_request_context, list_turns."""

from __future__ import annotations

from pydantic import Field

from contextcore.broker import ContextBroker
from contextcore.render import summary_line
from contextcore.sessions import RequestContext

from ._models import RequestItemOut, item_line, request_items
from ._spec import Args, Out, ToolSpec

__all__ = ["BUILD_REQUEST_CONTEXT", "GET_REQUEST_CONTEXT", "LIST_TURNS"]

_PREVIEW_CHARS = 200


class BuildArgs(Args):
    session_id: str = Field(description="A session id returned by create_session.")
    message: str = Field(description="The user's message; agent items are searched with it.")
    top_k: int | None = Field(None, ge=1, description="Chunk matches considered.")
    top_n: int | None = Field(None, ge=1, description="Agent items returned at most.")
    include_score: float | None = Field(
        None, ge=0.0, le=1.0, description="Agent items at or above this similarity always count."
    )
    include_messages: bool = Field(False, description="Also return the assembled LLM messages.")


class Message(Out):
    role: str
    content: str


class RequestContextOut(Out):
    request_id: str
    session_id: str
    timestamp: str
    items: list[RequestItemOut]
    summary: str
    search_mode: str | None
    warnings: list[str]
    messages: list[Message] | None = None


class RequestArgs(Args):
    session_id: str = Field(description="A session id returned by create_session.")
    request_id: str = Field(description="A request id from build_request_context or list_turns.")


class RecordedRequestOut(RequestContextOut):
    message: str


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


def _fields(context: RequestContext) -> dict[str, object]:
    return {
        "request_id": context.request_id,
        "session_id": context.session_id,
        "timestamp": context.timestamp,
        "items": request_items(context),
        "summary": summary_line(context.items),
        "search_mode": context.search_mode,
        "warnings": list(context.warnings),
    }


def _messages(broker: ContextBroker, context: RequestContext) -> list[Message]:
    return [Message(**m) for m in broker.messages_for(context)]


def _build(broker: ContextBroker, args: BuildArgs) -> RequestContextOut:
    context = broker.build_request_context(
        args.session_id,
        args.message,
        top_k=args.top_k,
        top_n=args.top_n,
        include_score=args.include_score,
    )
    messages = _messages(broker, context) if args.include_messages else None
    return RequestContextOut(**_fields(context), messages=messages)


def _text(out: RequestContextOut) -> str:
    lines = [f"Request {out.request_id} ({out.timestamp}): {out.summary}"]
    lines += [
        item_line(i.type, i.name, i.server, i.include_mode, i.similarity_score) for i in out.items
    ]
    lines += [f"warning: {w}" for w in out.warnings]
    if out.messages is not None:
        lines.append(f"{len(out.messages)} message(s) assembled (see structured content).")
    return "\n".join(lines)


def _get(broker: ContextBroker, args: RequestArgs) -> RecordedRequestOut:
    context = broker.request(args.session_id, args.request_id)
    return RecordedRequestOut(
        **_fields(context),
        message=context.message,
        messages=_messages(broker, context),
    )


def _preview(message: str) -> str:
    return message if len(message) <= _PREVIEW_CHARS else message[:_PREVIEW_CHARS] + "…"


def _turns(broker: ContextBroker, args: SessionIdArgs) -> TurnsOut:
    session = broker.session(args.session_id)
    turns = [
        TurnOut(
            request_id=t.request_id,
            timestamp=t.timestamp,
            message_preview=_preview(t.message),
            summary=summary_line(t.items),
            search_mode=t.search_mode,
        )
        for t in session.turns
    ]
    return TurnsOut(session_id=session.session_id, turns=turns)


def _turns_text(out: TurnsOut) -> str:
    lines = [f"Session {out.session_id}: {len(out.turns)} turn(s)"]
    lines += [f"- {t.request_id} {t.timestamp}: {t.summary}" for t in out.turns]
    return "\n".join(lines)


BUILD_REQUEST_CONTEXT = ToolSpec(
    "build_request_context",
    "Choose the context for one request: the session's items plus the agent items whose "
    "content matches the message. Recorded in the session's turn log; returns request_id, "
    "items with include_mode and similarity_score, and optionally the assembled messages.",
    BuildArgs,
    RequestContextOut,
    _build,
    _text,
    uses_search=True,
)
GET_REQUEST_CONTEXT = ToolSpec(
    "get_request_context",
    "A recorded request context: which items were used for that turn and why, with the "
    "message and the LLM messages rebuilt from it.",
    RequestArgs,
    RecordedRequestOut,
    _get,
    _text,
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
