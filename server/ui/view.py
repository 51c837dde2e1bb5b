"""What the request-context view shows, built from a broker: one recorded request context as
three columns (rules, references, tools) with each item's description and priority, and the
lists the web pages show (sessions, turns, catalog). Read-only."""

from __future__ import annotations

from typing import Literal

from context_broker.tools._models import CodeRunOut
from context_broker.tools._spec import Args, Out, ToolSpec
from pydantic import Field

from contextcore.code_runs import runs_of
from contextcore.render import sort_items, summary_line
from contextcore.services.broker import ContextBroker
from contextcore.sessions import RequestContext, RequestItem

__all__ = [
    "APP_TOOL",
    "SESSIONS_PAGE",
    "SESSIONS_PAGE_MAX",
    "RequestView",
    "SessionPage",
    "SessionRow",
    "TurnRow",
    "request_view",
    "session_page",
    "turn_rows",
]

_PREVIEW_CHARS = 160
SESSIONS_PAGE = 50
"""Sessions per page of the sessions list when the request names no ``limit``."""
SESSIONS_PAGE_MAX = 200


class ViewItem(Out):
    """One item as the modal shows it: ``label`` is the priority as three digits (rules and
    references) or the ``server.`` prefix (tools)."""

    key: str
    type: Literal["rule", "reference", "tool"]
    name: str
    server: str | None
    label: str
    include_mode: Literal["always", "manual", "agent"]
    similarity_score: float | None
    intent: str | None = None
    via: str | None = None
    turn: str | None = None
    description: str
    priority: int | None
    in_catalog: bool


class Columns(Out):
    rules: list[ViewItem]
    references: list[ViewItem]
    tools: list[ViewItem]


class RequestView(Out):
    """Everything the "View Context" modal needs in one result."""

    session_id: str
    request_id: str
    timestamp: str
    message: str
    summary: str
    search_mode: str | None
    warnings: list[str]
    intents: list[str] = Field(default_factory=list)
    context_turns: list[str] = Field(default_factory=list)
    columns: Columns
    within_reach: list[ViewItem] = Field(default_factory=list)
    """The further tools the text named one line each (``via``: why), best source first."""
    code_runs: list[CodeRunOut] = Field(default_factory=list)
    """The programs run with ``run_code`` after this request: code, calls and answer."""


def _view_item(broker: ContextBroker, row: RequestItem) -> ViewItem:
    ref = row.ref
    item = broker.lookup(ref)
    priority = item.priority if item is not None and ref.type != "tool" else None
    label = f"{ref.server}." if ref.type == "tool" else f"{priority or 0:03d}"
    return ViewItem(
        key=ref.key,
        type=ref.type,
        name=ref.name,
        server=ref.server,
        label=label,
        include_mode=row.include_mode,
        similarity_score=row.similarity_score,
        intent=row.intent,
        via=row.via,
        turn=row.turn,
        description=item.description if item is not None else "",
        priority=priority,
        in_catalog=item is not None,
    )


def view_of(broker: ContextBroker, context: RequestContext) -> RequestView:
    """The modal's content for one request context: each column in display order (rules and
    references by priority, highest first, then name; tools by server then name)."""
    rows = [_view_item(broker, r) for r in sort_items(context.items, broker.lookup)]
    return RequestView(
        session_id=context.session_id,
        request_id=context.request_id,
        timestamp=context.timestamp,
        message=context.message,
        summary=summary_line(context.items),
        search_mode=context.search_mode,
        warnings=list(context.warnings),
        intents=list(context.intents),
        context_turns=list(context.context_turns),
        columns=Columns(
            rules=[r for r in rows if r.type == "rule"],
            references=[r for r in rows if r.type == "reference"],
            tools=[r for r in rows if r.type == "tool"],
        ),
        within_reach=[_view_item(broker, r) for r in context.candidates],
        code_runs=[
            CodeRunOut.of(r)
            for r in runs_of(broker.store.code_state(context.session_id), context.request_id)
        ],
    )


def request_view(broker: ContextBroker, session_id: str, request_id: str) -> RequestView:
    """The modal's content for a recorded request context (errors name a bad id)."""
    return view_of(broker, broker.request(session_id, request_id))


class SessionRow(Out):
    session_id: str
    agent: str | None
    created_at: str
    turns: int
    last_turn: str | None
    profile: str | None = None


class TurnRow(Out):
    request_id: str
    timestamp: str
    message_preview: str
    summary: str
    search_mode: str | None


def _preview(message: str) -> str:
    flat = " ".join(message.split())
    return flat if len(flat) <= _PREVIEW_CHARS else flat[:_PREVIEW_CHARS] + "…"


class SessionPage(Out):
    sessions: list[SessionRow]
    offset: int
    limit: int
    next_offset: int | None


def session_page(broker: ContextBroker, offset: int = 0, limit: int = SESSIONS_PAGE) -> SessionPage:
    """One page of stored sessions, the newest first; only that page is read from the store
    (``next_offset`` is None on the last page)."""
    store = broker.store
    ids = store.session_ids_page(offset, limit + 1)  # one more says whether a next page exists
    rows = []
    for session_id in ids[:limit]:
        header = store.header(session_id)
        if header is None:  # removed since it was listed
            continue
        last = store.last_turn(session_id)
        rows.append(
            SessionRow(
                session_id=header.session_id,
                agent=header.agent,
                created_at=header.created_at,
                turns=store.turn_count(session_id),
                last_turn=last.timestamp if last is not None else None,
                profile=header.profile,
            )
        )
    more = offset + limit if len(ids) > limit else None
    return SessionPage(sessions=rows, offset=offset, limit=limit, next_offset=more)


def turn_rows(broker: ContextBroker, session_id: str) -> list[TurnRow]:
    """A session's turns, oldest first (``SessionError`` for an unknown id)."""
    sid = broker.require_session(session_id)
    return [
        TurnRow(
            request_id=t.request_id,
            timestamp=t.timestamp,
            message_preview=_preview(t.message),
            summary=summary_line(t.items),
            search_mode=t.search_mode,
        )
        for t in broker.store.turns(sid)
    ]


class ViewArgs(Args):
    session_id: str = Field(description="A session id returned by create_session.")
    request_id: str = Field(description="A request id from build_request_context or list_turns.")


def _view_text(out: RequestView) -> str:
    return f"Request {out.request_id}: {out.summary}"


APP_TOOL = ToolSpec(
    "ui_request_context",
    "For the request-context view: one recorded request context as three columns (rules, "
    "references, tools) with each item's description, priority, include mode and score.",
    ViewArgs,
    RequestView,
    lambda ctx, args: request_view(ctx.broker, args.session_id, args.request_id),
    _view_text,
    read_only=True,
)
