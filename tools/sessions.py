"""Session tools: create_session, list_session_context, add_context_item, remove_context_item."""

from __future__ import annotations

from collections.abc import Callable

from pydantic import Field

from contextcore.presets import PresetName
from contextcore.sessions import Session

from ._models import ItemType, SessionItemOut, item_line, session_items
from ._spec import Args, Out, ToolContext, ToolSpec

__all__ = ["ADD_CONTEXT_ITEM", "CREATE_SESSION", "LIST_SESSION_CONTEXT", "REMOVE_CONTEXT_ITEM"]

_SESSION_ID = Field(description="A session id returned by create_session.")
# Names are stored with the session (agent) or looked up in the catalog; none is longer.
_MAX_NAME = 1_000


class CreateSessionArgs(Args):
    agent: str | None = Field(
        None, max_length=_MAX_NAME, description="Optional name of the agent using the session."
    )
    preset: PresetName | None = Field(
        None,
        description="The session's search preset: conservative, normal or aggressive "
        "(default: the config's).",
    )


class SessionContextOut(Out):
    session_id: str
    agent: str | None
    items: list[SessionItemOut]
    preset: str | None = None
    profile: str | None = None


class SessionIdArgs(Args):
    session_id: str = _SESSION_ID


class ItemArgs(Args):
    session_id: str = _SESSION_ID
    type: ItemType = Field(description="The item's type.")
    name: str = Field(max_length=_MAX_NAME, description="The item's name as list_catalog shows it.")
    server: str | None = Field(
        None, max_length=_MAX_NAME, description="The downstream server; tools only."
    )


class ItemChangeOut(SessionContextOut):
    changed: bool = Field(description="False when the session already was in that state.")


def _context(session: Session) -> SessionContextOut:
    return SessionContextOut(
        session_id=session.session_id,
        agent=session.agent,
        items=session_items(session),
        preset=session.preset,
        profile=session.profile,
    )


def _lines(items: list[SessionItemOut]) -> list[str]:
    return [item_line(i.type, i.name, i.server, i.include_mode) for i in items] or ["(no items)"]


def _create(ctx: ToolContext, args: CreateSessionArgs) -> SessionContextOut:
    return _context(ctx.broker.create_session(args.agent, args.preset, ctx.profile))


def _created_text(out: SessionContextOut) -> str:
    head = f"Created session {out.session_id} with {len(out.items)} always item(s)."
    if out.profile is not None:
        head += f" Profile: {out.profile}."
    return "\n".join([head, *_lines(out.items)])


def _list(ctx: ToolContext, args: SessionIdArgs) -> SessionContextOut:
    return _context(ctx.broker.session(args.session_id))


def _list_text(out: SessionContextOut) -> str:
    return "\n".join([f"Session {out.session_id}: {len(out.items)} item(s)", *_lines(out.items)])


def _add(ctx: ToolContext, args: ItemArgs) -> ItemChangeOut:
    broker = ctx.broker
    session, changed = broker.add_item(args.session_id, args.type, args.name, args.server)
    return ItemChangeOut(**_context(session).model_dump(), changed=changed)


def _remove(ctx: ToolContext, args: ItemArgs) -> ItemChangeOut:
    broker = ctx.broker
    session, changed = broker.remove_item(args.session_id, args.type, args.name, args.server)
    return ItemChangeOut(**_context(session).model_dump(), changed=changed)


def _change_text(verb: str) -> Callable[[ItemChangeOut], str]:
    def text(out: ItemChangeOut) -> str:
        state = verb if out.changed else "unchanged (nothing to do)"
        return "\n".join(
            [f"Session {out.session_id} {state}; {len(out.items)} item(s) now", *_lines(out.items)]
        )

    return text


CREATE_SESSION = ToolSpec(
    "create_session",
    "Start a session. Returns its session_id (pass it to the other tools) and the items "
    "every session starts with (include mode 'always').",
    CreateSessionArgs,
    SessionContextOut,
    _create,
    _created_text,
)
LIST_SESSION_CONTEXT = ToolSpec(
    "list_session_context",
    "The rules, references and tools currently in a session's context, with how each got "
    "there ('always' or 'manual').",
    SessionIdArgs,
    SessionContextOut,
    _list,
    _list_text,
    read_only=True,
)
ADD_CONTEXT_ITEM = ToolSpec(
    "add_context_item",
    "Add a catalog item to a session's context by hand (include mode 'manual'). Tools need "
    "their server.",
    ItemArgs,
    ItemChangeOut,
    _add,
    _change_text("updated: item added"),
)
REMOVE_CONTEXT_ITEM = ToolSpec(
    "remove_context_item",
    "Remove an item from a session's context, whatever its include mode.",
    ItemArgs,
    ItemChangeOut,
    _remove,
    _change_text("updated: item removed"),
)
