"""Sessions and request contexts, the domain types the session store keeps
(:mod:`contextcore.store` holds the store protocol)."""

from __future__ import annotations

import re
import secrets
from dataclasses import dataclass, replace
from typing import Any, Literal

from .errors import SessionError
from .items import IncludeMode, ItemRef, parse_include, parse_item_type

__all__ = [
    "RequestContext",
    "RequestItem",
    "Session",
    "SessionItem",
    "check_session_id",
    "new_request_id",
    "new_session_id",
]

SessionMode = Literal["always", "manual"]
_SESSION_ID = re.compile(r"^s_[A-Za-z0-9_-]{32}$")


def new_session_id() -> str:
    """A fresh, unguessable session id (192 random bits)."""
    return "s_" + secrets.token_urlsafe(24)


def new_request_id() -> str:
    """A fresh request id (128 random bits)."""
    return "r_" + secrets.token_hex(16)


def check_session_id(session_id: object) -> str:
    """Return ``session_id`` if well formed, else raise ``SessionError`` naming the field."""
    if not isinstance(session_id, str) or not _SESSION_ID.match(session_id):
        raise SessionError(
            f"malformed session_id {session_id!r}; use an id returned by create_session",
            field="session_id",
        )
    return session_id


@dataclass(frozen=True)
class SessionItem:
    """An item in a session's context and how it got there."""

    ref: ItemRef
    include_mode: SessionMode

    def to_dict(self) -> dict[str, Any]:
        return {**self.ref.to_dict(), "include_mode": self.include_mode}

    @classmethod
    def from_dict(cls, row: dict[str, Any]) -> SessionItem:
        mode = parse_include(row["include_mode"])
        if mode == "agent":
            raise SessionError("a session item cannot have include mode 'agent'")
        ref = ItemRef(parse_item_type(row["type"]), row["name"], row.get("server"))
        return cls(ref, mode)


@dataclass(frozen=True)
class RequestItem:
    """An item used for one request: how it was included, and its score if search chose it."""

    ref: ItemRef
    include_mode: IncludeMode
    similarity_score: float | None = None
    intent: str | None = None
    """The planned step that brought the item (None: the message itself)."""
    via: str | None = None
    """How it came in other than by the message itself: ``search`` (a later
    ``search_context_items`` naming the request) or ``conversation`` (the session's earlier
    turns lifted it); None when the message chose it. A candidate (named one line each, see
    :mod:`contextcore.reach`) says why it is within reach: ``server``, ``rank`` or ``step``."""
    turn: str | None = None
    """With ``via="conversation"``: the earlier request it carried over from (the latest
    earlier turn when it was not chosen before; None for a host's own history)."""

    def to_dict(self) -> dict[str, Any]:
        out = {
            **self.ref.to_dict(),
            "include_mode": self.include_mode,
            "similarity_score": self.similarity_score,
        }
        if self.intent is not None:
            out["intent"] = self.intent
        if self.via is not None:
            out["via"] = self.via
        if self.turn is not None:
            out["turn"] = self.turn
        return out

    @classmethod
    def from_dict(cls, row: dict[str, Any]) -> RequestItem:
        ref = ItemRef(parse_item_type(row["type"]), row["name"], row.get("server"))
        mode = parse_include(row["include_mode"])
        return cls(
            ref,
            mode,
            row.get("similarity_score"),
            row.get("intent"),
            row.get("via"),
            row.get("turn"),
        )


@dataclass(frozen=True)
class RequestContext:
    """What was used for one request and why; stored in the session's turn log."""

    request_id: str
    session_id: str
    timestamp: str
    message: str
    items: tuple[RequestItem, ...]
    search_mode: str | None = None
    warnings: tuple[str, ...] = ()
    include_score: float | None = None
    parameters: dict[str, Any] | None = None
    intents: tuple[str, ...] = ()
    """The steps the host planned for this request, as it sent them."""
    context_turns: tuple[str, ...] = ()
    """The earlier requests whose messages brought items in (``via="conversation"``)."""
    profile: str | None = None
    """The profile of the session it was built for (None: no profile)."""
    candidates: tuple[RequestItem, ...] = ()
    """Further tools named one line each (the text's "within reach" list), not in ``items``."""
    continues: bool = False
    """The host passed the ``session_id`` of an earlier result: this turn continues the
    conversation that turn belongs to (a call without one starts a conversation)."""
    given: tuple[ItemRef, ...] = ()
    """Items of ``items`` given in full earlier in this conversation: the text names them in
    one line instead of giving them again."""
    named_before: int = 0
    """Further candidates left out because an earlier text of this conversation named them."""
    directory: tuple[ItemRef, ...] = ()
    """The other tools of a small catalog, named by server in a conversation's first text
    (see ``ReachSettings.directory_tokens``)."""

    def with_items(self, found: tuple[RequestItem, ...]) -> RequestContext:
        """This request context with ``found`` added, except items it already holds."""
        held = {i.ref for i in self.items}
        new = tuple(i for i in found if i.ref not in held)
        return replace(self, items=(*self.items, *new)) if new else self

    @property
    def preset(self) -> str | None:
        """The search preset in force for this request (None for turns recorded before
        presets existed)."""
        return (self.parameters or {}).get("preset")

    def to_dict(self) -> dict[str, Any]:
        return {
            "request_id": self.request_id,
            "session_id": self.session_id,
            "timestamp": self.timestamp,
            "message": self.message,
            "items": [i.to_dict() for i in self.items],
            "search_mode": self.search_mode,
            "warnings": list(self.warnings),
            "include_score": self.include_score,
            "parameters": self.parameters,
            **({"intents": list(self.intents)} if self.intents else {}),
            **({"context_turns": list(self.context_turns)} if self.context_turns else {}),
            **({"profile": self.profile} if self.profile is not None else {}),
            **({"candidates": [i.to_dict() for i in self.candidates]} if self.candidates else {}),
            **({"continues": True} if self.continues else {}),
            **({"given": [r.to_dict() for r in self.given]} if self.given else {}),
            **({"named_before": self.named_before} if self.named_before else {}),
            **({"directory": [r.to_dict() for r in self.directory]} if self.directory else {}),
        }

    @classmethod
    def from_dict(cls, row: dict[str, Any]) -> RequestContext:
        return cls(
            request_id=row["request_id"],
            session_id=row["session_id"],
            timestamp=row["timestamp"],
            message=row["message"],
            items=tuple(RequestItem.from_dict(i) for i in row["items"]),
            search_mode=row.get("search_mode"),
            warnings=tuple(row.get("warnings", ())),
            include_score=row.get("include_score"),
            parameters=row.get("parameters"),
            intents=tuple(row.get("intents", ())),
            context_turns=tuple(row.get("context_turns", ())),
            profile=row.get("profile"),
            candidates=tuple(RequestItem.from_dict(i) for i in row.get("candidates", ())),
            continues=bool(row.get("continues", False)),
            given=tuple(
                ItemRef(parse_item_type(r["type"]), r["name"], r.get("server"))
                for r in row.get("given", ())
            ),
            named_before=int(row.get("named_before", 0)),
            directory=tuple(
                ItemRef(parse_item_type(r["type"]), r["name"], r.get("server"))
                for r in row.get("directory", ())
            ),
        )


@dataclass(frozen=True)
class Session:
    """A session's state as one value: its context items and, when loaded, its turn log.
    The store keeps each part as its own records (see :mod:`contextcore.store`).

    ``removed`` remembers items taken out by hand, so an ``always`` item that appears in the
    catalog later (a downstream server that connected late) is added to every session except
    those that removed it. ``preset`` is the session's search preset, if it chose one;
    ``profile`` the profile it was created under, if any."""

    session_id: str
    agent: str | None
    created_at: str
    items: tuple[SessionItem, ...] = ()
    turns: tuple[RequestContext, ...] = ()
    removed: tuple[ItemRef, ...] = ()
    preset: str | None = None
    profile: str | None = None

    def has(self, ref: ItemRef) -> bool:
        return any(i.ref == ref for i in self.items)

    def with_item(self, item: SessionItem) -> Session:
        removed = tuple(r for r in self.removed if r != item.ref)
        return replace(self, items=(*self.items, item), removed=removed)

    def without(self, ref: ItemRef) -> Session:
        items = tuple(i for i in self.items if i.ref != ref)
        removed = self.removed if ref in self.removed else (*self.removed, ref)
        return replace(self, items=items, removed=removed)

    def following(self, always: list[ItemRef]) -> Session:
        """This session with every ``always`` item it neither holds nor removed added."""
        known = {i.ref for i in self.items} | set(self.removed)
        new = tuple(SessionItem(ref, "always") for ref in always if ref not in known)
        return replace(self, items=(*self.items, *new)) if new else self

    def with_turn(self, turn: RequestContext) -> Session:
        return replace(self, turns=(*self.turns, turn))

    def turn(self, request_id: str) -> RequestContext:
        for turn in self.turns:
            if turn.request_id == request_id:
                return turn
        raise SessionError(
            f"no request {request_id!r} in session {self.session_id!r}; list_turns shows them",
            field="request_id",
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "session_id": self.session_id,
            "agent": self.agent,
            "created_at": self.created_at,
            "items": [i.to_dict() for i in self.items],
            "turns": [t.to_dict() for t in self.turns],
            "removed": [r.to_dict() for r in self.removed],
            "preset": self.preset,
            **({"profile": self.profile} if self.profile is not None else {}),
        }

    @classmethod
    def from_dict(cls, row: dict[str, Any]) -> Session:
        return cls(
            session_id=row["session_id"],
            agent=row.get("agent"),
            created_at=row["created_at"],
            items=tuple(SessionItem.from_dict(i) for i in row["items"]),
            turns=tuple(RequestContext.from_dict(t) for t in row["turns"]),
            removed=tuple(
                ItemRef(parse_item_type(r["type"]), r["name"], r.get("server"))
                for r in row.get("removed") or ()
            ),
            preset=row.get("preset"),
            profile=row.get("profile"),
        )
