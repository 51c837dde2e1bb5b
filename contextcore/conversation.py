"""What the session's recent turns add to one request: the earlier messages a follow-up
depends on, and how much it depends on them.

A follow-up names little of what it needs ("and in Oslo?", "now put a summary of it in
notes/summary.md"): its referent is in the turns before it. The broker reads only the last few
turns (their messages and the items chosen or used for them), so the cost does not grow with
the session's age; a host that keeps its own history and sends it with ``append_messages``
has its last user messages read instead (the tail only).

How much the past counts is ``weight * dependence(message)``: referring words and ellipsis
raise the dependence, an explicit change of topic sets it to 0.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .items import ItemRef
from .store import SessionStore
from .store_roles import MessageLog

__all__ = ["MAX_CONVERSATION_TURNS", "Recent", "dependence", "recent_turns"]

MAX_CONVERSATION_TURNS = 8

# An explicit change of topic: the past must not count at all.
_SWITCH = re.compile(
    r"\b(?:new (?:thing|topic|question|task|request)|unrelated|(?:a )?different "
    r"(?:question|topic|thing|task)|something else|another (?:thing|question|topic|task)"
    r"|change of (?:topic|subject)|switching (?:gears|topics?)|moving on|forget (?:that|it)"
    r"|never ?mind|separate (?:question|thing|task))\b",
    re.IGNORECASE,
)
# Words that point back at something said before.
_REFERRING = re.compile(
    r"\b(?:(?<!is )it(?! is\b)|its|it's|them|they|their|those|these|this|there|then|same|"
    r"again|he|she|him|her|"
    r"that(?=\s+(?:to|in|into|one|file|folder|again|too|as|for)\b|\s*[?.!,]|\s*$)|"
    r"also|too|one more|another one|the (?:result|results|file|answer|output|list)|"
    r"what about|how about|as well|instead|else)\b",
    re.IGNORECASE,
)
# A message that continues the previous one: "and in Oslo?", "now stage them", "ok, ...".
_CONTINUING = re.compile(
    r"^\s*(?:and|also|now|then|ok(?:ay)?|so|but|plus|what about|how about|same|next|after "
    r"that)\b",
    re.IGNORECASE,
)
_SHORT_WORDS = 4


def dependence(message: str) -> float:
    """How much ``message`` depends on the turns before it, in [0, 1]: 0 for an explicit
    change of topic, more for referring words, a continuing start and a short question."""
    if _SWITCH.search(message):
        return 0.0
    score = 0.0
    if _REFERRING.search(message):
        score += 0.5
    if _CONTINUING.search(message):
        score += 0.5
    if len(message.split()) <= _SHORT_WORDS:
        score += 0.3
    return min(1.0, score)


@dataclass(frozen=True)
class Recent:
    """The session's recent user messages (oldest first), the request ids of the turns
    they came from (empty for a host's own history), the items those turns chose, each with
    the latest turn that had it, and the tools called since (by name, from the history)."""

    messages: tuple[str, ...] = ()
    turns: tuple[str, ...] = ()
    items: Mapping[ItemRef, str] | None = None
    called: tuple[str, ...] = ()

    def turn_of(self, ref: ItemRef) -> str | None:
        """The turn an item carried over from, else the latest turn that chose anything (a
        turn that selected nothing, such as small talk, brought nothing over; None when
        no recent turn chose anything)."""
        if not self.items:
            return None
        if ref in self.items:
            return self.items[ref]
        chose = set(self.items.values())
        return next((t for t in reversed(self.turns) if t in chose), None)


def recent_turns(store: SessionStore, session_id: str, count: int, message: str) -> Recent:
    """The last ``count`` turns of a session; without turns, the last ``count`` user
    messages of its stored history (other than ``message`` itself, which a host may have
    appended before asking)."""
    if count <= 0:
        return Recent()
    said, called = _history_tail(store, session_id, count, message)
    total = store.turn_count(session_id)
    if total == 0:
        return Recent(said, called=called)
    turns = store.turns(session_id, max(0, total - count), count)
    items: dict[ItemRef, str] = {}
    for turn in turns:
        for item in turn.items:
            if item.include_mode == "agent":
                items[item.ref] = turn.request_id
    return Recent(
        tuple(t.message for t in turns),
        tuple(t.request_id for t in turns),
        items or None,
        called,
    )


# A user message is rarely more than a few records back (a tool call and its result sit
# between two of them): read this many records per message wanted, never the whole history.
_RECORDS_PER_MESSAGE = 6


def _history_tail(
    store: MessageLog, session_id: str, count: int, message: str
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The last ``count`` user messages of the stored history and the tools called in
    the records read (the tail only)."""
    end = store.message_count(session_id)
    if end == 0:
        return (), ()
    records = store.messages(session_id, max(0, end - _RECORDS_PER_MESSAGE * (count + 1)), end)
    texts = [t for t in (_user_text(r.raw) for r in records) if t]
    if texts and texts[-1].strip() == message.strip():
        texts.pop()
    called = (name for r in records for name in _called(r.raw))
    return tuple(texts[-count:]), tuple(dict.fromkeys(called))


def _called(raw: Mapping[str, Any]) -> list[str]:
    """The tools an assistant message calls, in either wire shape."""
    if raw.get("role") != "assistant":
        return []
    names = [(c.get("function") or {}).get("name") for c in raw.get("tool_calls") or ()]
    content = raw.get("content")
    if isinstance(content, Sequence) and not isinstance(content, str):
        names += [
            b.get("name") for b in content if isinstance(b, Mapping) and b.get("type") == "tool_use"
        ]
    return [n for n in names if isinstance(n, str) and n]


def _user_text(raw: Mapping[str, Any]) -> str:
    """The text of a user message in either wire shape ("" for anything else)."""
    if raw.get("role") != "user":
        return ""
    content = raw.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, Sequence):
        parts = [b.get("text", "") for b in content if isinstance(b, Mapping)]
        return " ".join(p for p in parts if isinstance(p, str) and p).strip()
    return ""
