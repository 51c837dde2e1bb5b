"""The context broker's domain service: sessions, request contexts and the turn log."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

from ..assembly import context_messages
from ..catalog import Catalog
from ..context_text import estimate_tokens
from ..conversation import Recent, dependence, recent_turns
from ..errors import SearchInputError, SessionError
from ..items import ContextItem, ItemRef, ItemType, Tool, for_model, parse_item_type
from ..memory_store import MemorySessionStore
from ..presets import PresetName, Selection, parse_preset, resolve
from ..profiles import Profile, Profiles
from ..query_plan import check_intents
from ..reach import Candidate, candidate_line, within_reach
from ..search import SearchEngine, SearchResult
from ..sessions import (
    RequestContext,
    RequestItem,
    Session,
    SessionItem,
    check_session_id,
    new_request_id,
    new_session_id,
)
from ..store import SessionHeader, SessionStore, load_session
from ..usage import UsageRecorder

__all__ = ["ContextBroker"]

log = logging.getLogger(__name__)

Clock = Callable[[], datetime]


def _now() -> datetime:
    return datetime.now(UTC)


class ContextBroker:
    """Creates sessions, changes their context, and builds request contexts.

    Every change is one record operation on the store (add an item, append a turn), durable
    when the store returns; nothing reads or rewrites a whole session, so the cost of a call
    does not grow with the session's age and several brokers may share one store. Its
    :attr:`usage` records which items the turns used and teaches the search's learner.
    """

    def __init__(
        self,
        catalog: Catalog,
        search: SearchEngine,
        *,
        store: SessionStore | None = None,
        clock: Clock = _now,
        max_message_chars: int = 1_000_000,
        profiles: Profiles | None = None,
    ) -> None:
        self.catalog = catalog
        # A session created under a profile sees only what it allows (see contextcore.profiles).
        self.profiles: Profiles = dict(profiles or {})
        self.search = search
        self.store: SessionStore = store or MemorySessionStore()
        # The one recorder of this broker's usage: what it remembers is what forget clears.
        self.usage = UsageRecorder(self.store, search, catalog)
        self._clock = clock
        self._max_message_chars = max_message_chars
        self._always: tuple[int, list[ItemRef]] = (-1, [])
        self._pool: tuple[int, tuple[ItemRef, ...], int] = (-1, (), 0)

    def lookup(self, ref: ItemRef) -> ContextItem | None:
        """The catalog item for ``ref``, if it still exists."""
        return self.catalog.get(ref)

    def profile(self, name: str | None) -> Profile | None:
        """The profile called ``name`` (None for None); ``SessionError`` if the config has
        no such profile."""
        if name is None:
            return None
        found = self.profiles.get(name)
        if found is None:
            known = ", ".join(self.profiles) or "none"
            raise SessionError(
                f"unknown profile {name!r}; the config's profiles: {known}", field="profile"
            )
        return found

    def excluded(self, profile: Profile | None) -> set[ItemRef]:
        """The catalog items a search under ``profile`` must leave out."""
        if profile is None:
            return set()
        return profile.refused(i.ref for i in self.catalog.items())

    def _stamp(self) -> str:
        return self._clock().isoformat(timespec="milliseconds").replace("+00:00", "Z")

    def _always_refs(self, profile: Profile | None = None) -> list[ItemRef]:
        version = self.catalog.version
        if self._always[0] != version:
            always = self.catalog.with_mode("always")
            self._always = (version, [i.ref for i in always if for_model(i)])
        refs = self._always[1]
        return refs if profile is None else [r for r in refs if profile.allows(r)]

    def session(self, session_id: object) -> Session:
        """A session's header and items (not its turns: see :meth:`turns`); raise
        ``SessionError`` for a malformed or unknown id. Its items follow the catalog:
        ``always`` items that appeared since are added unless the session removed them, and
        items of a server removed from the configuration are left out while it is gone. A
        session created under a profile holds only the items that profile allows."""
        sid = check_session_id(session_id)
        header = self.store.header(sid)
        if header is None:
            raise SessionError(
                f"unknown session_id {sid!r}; create one with create_session", field="session_id"
            )
        profile = self.profile(header.profile)
        items = self.store.items(sid)
        if profile is not None:
            items = tuple(i for i in items if profile.allows(i.ref))
        known = {i.ref for i in items} | set(header.removed)
        new = [SessionItem(ref, "always") for ref in self._always_refs(profile) if ref not in known]
        if new:
            items = (*items, *self.store.add_items(sid, new))
        retired = self.catalog.retired
        if retired:  # kept in the store: they are back when their server is
            items = tuple(i for i in items if i.ref.server not in retired)
        return Session(
            sid,
            header.agent,
            header.created_at,
            items,
            removed=header.removed,
            preset=header.preset,
            profile=header.profile,
        )

    def full_session(self, session_id: object) -> Session:
        """A session with its whole turn log (for reports; reads every turn)."""
        session = self.session(session_id)
        found = load_session(self.store, session.session_id)
        assert found is not None
        return replace(found, items=session.items)

    def turns(
        self, session_id: object, offset: int = 0, limit: int | None = None
    ) -> list[RequestContext]:
        """The session's recorded request contexts in order (reads the turns only)."""
        sid = self.require_session(session_id)
        return self.store.turns(sid, offset, limit)

    def last_turn(self, session_id: object) -> RequestContext | None:
        """The session's latest request context, if any."""
        return self.store.last_turn(self.require_session(session_id))

    def require_session(self, session_id: object) -> str:
        """``session_id`` if it names a stored session (reads its header only), else
        ``SessionError``."""
        return self._header(session_id).session_id

    def require_profile(self, session_id: object, profile: str) -> None:
        """``SessionError`` unless the session was created under ``profile``: a host of one
        profile never reads or changes another's sessions."""
        header = self._header(session_id)
        if header.profile != profile:
            under = f"profile {header.profile!r}" if header.profile else "no profile"
            raise SessionError(
                f"session {header.session_id!r} was created under {under}; this connection "
                f"uses profile {profile!r}: create a session here with create_session",
                field="session_id",
            )

    def _header(self, session_id: object) -> SessionHeader:
        """The stored header of ``session_id``, else ``SessionError``."""
        sid = check_session_id(session_id)
        header = self.store.header(sid)
        if header is None:
            raise SessionError(
                f"unknown session_id {sid!r}; create one with create_session", field="session_id"
            )
        return header

    def create_session(
        self, agent: str | None = None, preset: str | None = None, profile: str | None = None
    ) -> Session:
        """A new session holding every enabled ``always`` item, with its own search preset
        if ``preset`` is given; under ``profile``, only the items it allows, and its preset
        unless ``preset`` is given."""
        chosen_profile = self.profile(profile)
        chosen = parse_preset(preset) if preset is not None else None
        if chosen is None and chosen_profile is not None:
            chosen = chosen_profile.preset
        items = tuple(SessionItem(ref, "always") for ref in self._always_refs(chosen_profile))
        session = Session(
            new_session_id(), agent, self._stamp(), items, preset=chosen, profile=profile
        )
        header = SessionHeader(
            session.session_id, agent, session.created_at, chosen, profile=profile
        )
        self.store.create_session(header, items)
        return session

    def selection(
        self,
        session: Session | None = None,
        preset: str | None = None,
        **values: float | int | None,
    ) -> Selection:
        """The search parameters in force for a request of ``session`` (config, then the
        session's preset, then the call's preset and explicit ``values``)."""
        s = self.search.settings
        config_values = {k: getattr(s, k) for k in s.explicit}
        session_preset: PresetName | None = None
        if session is not None and session.preset is not None:
            session_preset = parse_preset(session.preset)
        call_preset = parse_preset(preset) if preset is not None else None
        return resolve(s.preset, config_values, session_preset, call_preset, values)

    def _ref(self, item_type: str, name: object, server: object) -> ItemRef:
        kind: ItemType = parse_item_type(item_type, field="type")
        if not isinstance(name, str) or not name:
            raise SessionError(f"name must be a non-empty string, got {name!r}", field="name")
        if kind == "tool" and (not isinstance(server, str) or not server):
            raise SessionError("server is required for a tool", field="server")
        if kind != "tool" and server is not None:
            raise SessionError(f"server applies to tools only, not to a {kind}", field="server")
        return ItemRef(kind, name, server if kind == "tool" else None)  # type: ignore[arg-type]

    def add_item(
        self, session_id: str, item_type: str, name: str, server: str | None = None
    ) -> tuple[Session, bool]:
        """Add a catalog item by hand (mode ``manual``); returns (session, changed)."""
        ref = self._ref(item_type, name, server)
        session = self.session(session_id)
        self.catalog.require(ref)
        profile = self.profile(session.profile)
        if profile is not None and not profile.allows(ref):
            raise SessionError(
                f"{ref.type} {ref.name!r} is not in profile {profile.name!r}, which this "
                "session was created under",
                field="name",
            )
        if session.has(ref):
            return session, False
        added = self.store.add_items(session.session_id, [SessionItem(ref, "manual")])
        return self.session(session_id), bool(added)

    def remove_item(
        self, session_id: str, item_type: str, name: str, server: str | None = None
    ) -> tuple[Session, bool]:
        """Remove an item from the session whatever its mode; returns (session, changed)."""
        ref = self._ref(item_type, name, server)
        session = self.session(session_id)
        if not session.has(ref):
            return session, False
        changed = self.store.remove_item(session.session_id, ref)
        return self.session(session_id), changed

    def build_request_context(
        self,
        session_id: str,
        message: str,
        *,
        top_k: int | None = None,
        top_n: int | None = None,
        include_score: float | None = None,
        types: Iterable[str] | None = None,
        preset: str | None = None,
        min_score: float | None = None,
        min_score_tools: float | None = None,
        intents: Sequence[str] | None = None,
        conversation: float | None = None,
        continues: bool = False,
        shown: Callable[[RequestContext], Iterable[ItemRef]] | None = None,
    ) -> RequestContext:
        """Session items plus the agent items search selects for ``message`` and the host's
        planned ``intents`` (each step searched; an item records the step that brought it),
        with the preset and parameters in force, recorded in the session's turn log.

        ``conversation`` (0 to 1) is how much the session's recent turns count for a
        follow-up (default: the preset's; 0 selects as a fresh session would); the turns
        whose messages brought items in are recorded in ``context_turns`` and on the items.
        ``continues``: the host passed the ``session_id`` of an earlier result, so the turn
        continues that conversation (see :meth:`_in_conversation`). ``shown`` gives the
        items the caller's text of this turn does not give in full (names only, over its
        budget), recorded as ``partial`` so later turns do not count them as given."""
        session = self.session(session_id)
        self._check_message(message)
        steps = check_intents(intents)
        chosen = self.selection(
            session,
            preset,
            top_k=top_k,
            top_n=top_n,
            include_score=include_score,
            min_score=min_score,
            min_score_tools=min_score_tools,
            conversation_weight=_checked_weight(conversation),
        )
        recent = self._recent(session.session_id, message, chosen.conversation_weight)
        items = [RequestItem(i.ref, i.include_mode) for i in session.items]
        leave_out = {i.ref for i in session.items} | self.excluded(self.profile(session.profile))
        result, warnings = self._search_agent_items(
            message, steps, leave_out, chosen, types, recent
        )
        candidates: tuple[RequestItem, ...] = ()
        if result is not None:
            items += _found_items(result, steps, recent)
            candidates = self._within_reach(result, items, steps)
        warnings += self._source_warnings()
        mode = result.mode if result is not None else None
        context = self._turn(session, message, items, mode, warnings, chosen, steps, candidates)
        context = self._in_conversation(session.session_id, context, continues, leave_out)
        if shown is not None and (partial := tuple(dict.fromkeys(shown(context)))):
            context = replace(context, partial=partial)
        self.store.append_turn(session.session_id, context)
        return context

    def _source_warnings(self) -> list[str]:
        """What a request context says of downstream servers not running or still
        connecting: their tools are missing from it."""
        warnings = [
            f"downstream server {server!r} is not running ({reason}); its tools cannot be "
            "selected or called until it is (list_servers shows its state)"
            for server, reason in self.catalog.unavailable.items()
        ]
        if self.catalog.pending:
            warnings.append(
                "downstream servers still connecting, their tools were not searched: "
                + ", ".join(self.catalog.pending)
            )
        return warnings

    def _in_conversation(
        self, session_id: str, context: RequestContext, continues: bool, leave_out: set[ItemRef]
    ) -> RequestContext:
        """``context`` as its conversation's texts leave it: what they gave named (a turn
        that ``continues`` one), and a small catalog's directory when none named it yet,
        without ``leave_out`` (the session's items and what its profile refuses)."""
        earlier = self._earlier(session_id) if continues else Earlier()
        if continues:
            context = _continued(context, earlier)
        if earlier.directory:
            return context
        named = {row.ref for row in (*context.items, *context.candidates)}
        directory = self._directory(named | earlier.given | earlier.named | leave_out)
        return replace(context, directory=directory) if directory else context

    def _directory(self, leave_out: set[ItemRef]) -> tuple[ItemRef, ...]:
        """Every other tool a model may call, when naming them by server fits the
        directory's budget (a small catalog); else none."""
        budget = self.search.settings.reach.directory_tokens * 4  # in characters
        tools, size = self._directory_pool()
        if budget <= 0 or not tools:
            return ()
        pool = set(tools)
        if size - sum(len(r.name) + 2 for r in leave_out if r in pool) > budget:
            return ()  # a catalog this large is never named whole: decided without a walk
        kept = tuple(r for r in tools if r not in leave_out)
        return kept if _directory_size(kept) <= budget else ()

    def _directory_pool(self) -> tuple[tuple[ItemRef, ...], int]:
        """The tools a directory may name (enabled, not ``always``, not app-only) and the
        characters naming them all takes; kept per catalog version."""
        version = self.catalog.version
        if self._pool[0] != version:
            tools = tuple(
                t.ref
                for t in self.catalog.items(["tool"])
                if isinstance(t, Tool)
                and t.enabled
                and not t.app_only
                and t.effective_include != "always"
            )
            self._pool = (version, tools, _directory_size(tools))
        return self._pool[1], self._pool[2]

    def _earlier(self, session_id: str) -> Earlier:
        """What the earlier texts of the conversation a turn continues gave (see
        :func:`earlier_in_conversation`)."""
        total = self.store.turn_count(session_id)
        start = max(0, total - CONVERSATION_LOOKBACK)
        return earlier_in_conversation(self.store.turns(session_id, start, total - start))

    def _within_reach(
        self, result: SearchResult, items: Sequence[RequestItem], steps: tuple[str, ...]
    ) -> tuple[RequestItem, ...]:
        """The further tools the request context names one line each (see
        :mod:`contextcore.reach`), within the configured budget."""
        settings = self.search.settings.reach

        def cost(candidate: Candidate) -> int:
            ref = candidate.ref
            heading = f"{ref.server}__{ref.name} (server {ref.server}, tool {ref.name})"
            line = candidate_line(heading, self.lookup(ref), settings.line_chars)
            return estimate_tokens(line) + 1

        chosen = within_reach(result.reach, cost, settings, [i.ref for i in items])
        return tuple(
            RequestItem(
                c.ref,
                "agent",
                round(c.score, 4),
                steps[c.step] if c.step is not None and c.step < len(steps) else None,
                via=c.source,
            )
            for c in chosen
        )

    def _turn(
        self,
        session: Session,
        message: str,
        items: list[RequestItem],
        mode: str | None,
        warnings: list[str],
        chosen: Selection,
        steps: tuple[str, ...],
        candidates: tuple[RequestItem, ...] = (),
    ) -> RequestContext:
        """The request context of a turn, with the choice in force."""
        return RequestContext(
            new_request_id(),
            session.session_id,
            self._stamp(),
            message,
            tuple(items),
            mode,
            tuple(warnings),
            include_score=chosen.include_score,
            parameters=chosen.to_dict(),
            intents=steps,
            context_turns=_context_turns(items),
            profile=session.profile,
            candidates=candidates,
        )

    def _recent(self, session_id: str, message: str, weight: float) -> Recent:
        """The recent turns a follow-up may lean on (none read when the weight is 0)."""
        if weight <= 0 or dependence(message) <= 0:
            return Recent()
        return recent_turns(
            self.store, session_id, self.search.settings.conversation_turns, message
        )

    def search_items(
        self,
        query: str,
        *,
        intents: Sequence[str] | None = None,
        request: tuple[str, str] | None = None,
        profile: str | None = None,
        **options: Any,
    ) -> SearchResult:
        """What ``search_context_items`` serves: the ranking for ``query`` and ``intents``
        (``options`` as :meth:`SearchEngine.search` takes them). With ``request`` (a
        session id and a request id) the items found are added to that recorded request
        context, so its record shows every item the model was shown for the request.
        Items outside ``profile``, and outside the profile of the request's session, are
        never found."""
        sid = None
        leave_out = self.excluded(self.profile(profile))
        if request is not None:
            header = self._header(request[0])
            sid = header.session_id
            leave_out |= self.excluded(self.profile(header.profile))
            if self.store.turn(sid, request[1]) is None:
                raise SessionError(
                    f"no request {request[1]!r} in session {sid!r}; list_turns shows them",
                    field="request_id",
                )
        steps = check_intents(intents)
        if leave_out:
            options["exclude"] = leave_out | set(options.get("exclude") or ())
        result = self.search.search(query, intents=steps, **options)
        if request is not None and sid is not None and result.hits:
            found = tuple(replace(i, via="search") for i in _found_items(result, steps))
            self.store.extend_turn(sid, request[1], found)
        return result

    def _check_message(self, message: str) -> None:
        """The configured size limit; that ``message`` is a non-blank text is checked where
        it enters (the tools' argument models, the ``context`` prompt)."""
        if len(message) > self._max_message_chars:
            raise SearchInputError(
                f"message of {len(message)} characters exceeds the limit of "
                f"{self._max_message_chars} (server.max_message_chars); send a shorter message",
                field="message",
            )

    def _search_agent_items(
        self,
        message: str,
        intents: tuple[str, ...],
        in_session: set[ItemRef],
        chosen: Selection,
        types: Iterable[str] | None,
        recent: Recent,
    ) -> tuple[SearchResult | None, list[str]]:
        settings = replace(
            self.search.settings,
            top_k=chosen.top_k,
            top_n=chosen.top_n,
            include_score=chosen.include_score,
        )
        wanted = None if types is None else {parse_item_type(t, field="types") for t in types}
        try:
            result = self.search.rank(
                message,
                settings,
                types=wanted,
                modes=("agent",),
                exclude=in_session,
                min_score=chosen.floors(),
                intents=intents,
                context=recent.messages,
                context_weight=chosen.conversation_weight * dependence(message),
                carried=self._carried(recent),
                reach=True,
            )
        except SearchInputError:
            raise
        except Exception as exc:  # a failing search must never fail the request
            log.warning("search failed; request context built without agent items: %s", exc)
            return None, [f"search failed ({exc}); no agent items were selected"]
        return result, list(result.warnings)

    def _carried(self, recent: Recent) -> set[ItemRef]:
        """The tools called since the recent turns (by the downstream name or the
        ``<server>__<tool>`` name a host calls it by); when none is known, the items those
        turns chose. A call says what the turn was about better than a selection, which
        may have been wrong."""
        if not recent.called:
            return set(recent.items or ())
        names = set(recent.called)
        return {
            t.ref
            for t in self.catalog.items(["tool"])
            if t.ref.name in names or f"{t.ref.server}__{t.ref.name}" in names
        }

    def messages_for(self, context: RequestContext) -> list[dict[str, Any]]:
        """The LLM input built from a recorded request context (see ``context_messages``)."""
        return context_messages(context, self.lookup)

    def request(self, session_id: str, request_id: str) -> RequestContext:
        """A recorded request context (reads that one turn)."""
        sid = self.require_session(session_id)
        found = self.store.turn(sid, request_id)
        if found is None:
            raise SessionError(
                f"no request {request_id!r} in session {sid!r}; list_turns shows them",
                field="request_id",
            )
        return found


def _found_items(
    result: SearchResult, intents: tuple[str, ...], recent: Recent | None = None
) -> list[RequestItem]:
    """A search's hits as request items, each naming the intent that brought it, or the
    earlier turn when the conversation did."""
    return [
        RequestItem(
            h.ref,
            "agent",
            round(h.similarity_score, 4),
            intents[h.intent] if h.intent is not None else None,
            via="conversation" if h.conversation else None,
            turn=recent.turn_of(h.ref) if h.conversation and recent is not None else None,
        )
        for h in result.hits
    ]


CONVERSATION_LOOKBACK = 50
"""The most earlier turns a continuing turn reads to learn what its conversation was given:
a turn's cost does not grow with the session's age, and a text more than this many turns
back is one a host has most likely compacted."""


def _directory_size(tools: Sequence[ItemRef]) -> int:
    """About the characters of a directory naming ``tools``: each name, and a line head
    per server."""
    servers = {r.server for r in tools}
    return sum(len(r.name) + 2 for r in tools) + sum(16 + len(s or "") for s in servers)


@dataclass(frozen=True)
class Earlier:
    """What the earlier texts of a conversation gave: items in full, further candidates
    named one line each, and whether one named a small catalog's every tool."""

    given: frozenset[ItemRef] = frozenset()
    named: frozenset[ItemRef] = frozenset()
    directory: bool = False


def earlier_in_conversation(turns: Sequence[RequestContext]) -> Earlier:
    """What the texts of the conversation that ends ``turns`` (oldest first) gave: the last
    turns back to the latest one that started a conversation (built without a
    ``session_id``), that one included. An item a text named as given earlier had been
    given in full before it, so every item counts but those its text did not give in full
    (``partial``)."""
    given: set[ItemRef] = set()
    named: set[ItemRef] = set()
    directory = False
    for turn in reversed(turns):
        partial = set(turn.partial)
        given.update(row.ref for row in turn.items if row.ref not in partial)
        named.update(row.ref for row in turn.candidates)
        named.update(turn.directory)
        directory = directory or bool(turn.directory)
        if not turn.continues:
            break
    return Earlier(frozenset(given), frozenset(named), directory)


def _continued(context: RequestContext, earlier: Earlier) -> RequestContext:
    """``context`` as a turn continuing a conversation whose texts gave ``earlier``: what
    they gave is named, and only new candidates of its chosen servers and steps are, none
    when every tool it selected was given before."""
    seen = earlier.given | earlier.named
    if not seen:  # the conversation's first text: nothing was given before it
        return replace(context, continues=True)
    # The conversation's first text cast the wide net (the next ranked tools); a later one
    # names what is new among its chosen servers' tools and its steps' best.
    fresh = tuple(r for r in context.candidates if r.ref not in seen and r.via != "rank")
    if all(row.ref in earlier.given for row in context.items if row.ref.type == "tool"):
        fresh = ()  # the tools it needs were given: the earlier candidates are still named
    # A new tool ranked below one the conversation was given is most likely not what the
    # follow-up is about: named one line (its schema one call away), not given in full.
    known = [
        row.similarity_score
        for row in context.items
        if row.ref in earlier.given and row.ref.type == "tool" and row.similarity_score is not None
    ]
    best_known = max(known, default=None)
    items, demoted = [], []
    for row in context.items:
        score = row.similarity_score
        below = best_known is not None and score is not None and score < best_known
        if row.ref.type == "tool" and row.ref not in earlier.given and below:
            demoted.append(replace(row, via="rank"))
        else:
            items.append(row)
    return replace(
        context,
        items=tuple(items),
        continues=True,
        given=tuple(row.ref for row in items if row.ref in earlier.given),
        candidates=(*demoted, *fresh),
        named_before=sum(1 for row in context.candidates if row.ref in seen),
    )


def _context_turns(items: Iterable[RequestItem]) -> tuple[str, ...]:
    """The earlier turns that brought items in, each once, in the items' order."""
    return tuple(dict.fromkeys(i.turn for i in items if i.via == "conversation" and i.turn))


def _checked_weight(value: object) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 1:
        raise SearchInputError(
            f"conversation must be a number from 0 to 1, got {value!r}", field="conversation"
        )
    return float(value)
