"""Usage events: which items a turn selected and which it used, stored with the session and
learned from.

An event is one JSON record in the session store (``append_usage_event``)::

    {"kind": "call" | "report" | "log", "request_id": ..., "at": <unix seconds>,
     "query": <the request's message>, "selected": [keys], "used": [keys], "unused": [keys],
     "model": <embedding model>, "vector": <the query's embedding, base64 float16>}

``call``: a downstream tool proxied with the session's ``session_id`` after a turn (used for
that turn, selected or not); ``report``: ``record_usage`` from a host; ``log``: an imported usage
log. The learned state is rebuilt from these events at startup, so it survives restarts with a
persistent store and forgetting removes both.

Each broker has one :class:`UsageRecorder` (``ContextBroker.usage``), so what it remembers (the
calls already recorded for a turn) is what ``forget`` clears.

Usage is kept per profile. The learned ranking is one for the whole broker, so it learns only
from sessions created under no profile: the events of a profile's sessions are stored and
counted in that profile's analytics, never taught to the ranking every profile's searches
share, so a host of one profile can never move another's rankings (nor the unrestricted
endpoint's). A host of a profile reports and forgets only what its profile allows.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Protocol

from .catalog import Catalog
from .errors import CatalogError, ContextCoreError, SessionError
from .items import ItemRef
from .learning import UsageLearner, decode_vector, encode_vector
from .profiles import Profile
from .search import SearchEngine
from .sessions import RequestContext

__all__ = ["ForgetResult", "UsageLog", "UsageRecorder", "read_usage_log"]

log = logging.getLogger(__name__)

EventKind = Literal["call", "report", "log"]
_SEEN = 4096


class UsageLog(Protocol):
    """The part of the session store usage events go through."""

    def append_usage_event(self, session_id: str | None, event: Mapping[str, Any]) -> int: ...

    def usage_events(self, session_id: str | None = None) -> list[dict[str, Any]]: ...

    def delete_usage_events(self, session_id: str | None = None) -> int: ...

    def header(self, session_id: str) -> Any: ...

    def list_session_ids(self) -> list[str]: ...


@dataclass(frozen=True)
class ForgetResult:
    """What ``forget`` removed."""

    events: int
    items: int


def read_usage_log(path: Path) -> list[tuple[str, list[ItemRef]]]:
    """The ``{"query": ..., "called": [keys]}`` lines of a usage log file."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise CatalogError(f"cannot read usage log {str(path)!r}: {exc.strerror}") from exc
    rows: list[tuple[str, list[ItemRef]]] = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            query, called = row["query"], row["called"]
        except (json.JSONDecodeError, KeyError, TypeError) as exc:
            raise CatalogError(
                f"{path}:{number}: expected {{'query': text, 'called': [keys]}} ({exc})"
            ) from exc
        if not isinstance(query, str) or not query.strip() or not isinstance(called, list):
            raise CatalogError(f"{path}:{number}: 'query' must be a text, 'called' a list of keys")
        rows.append((query, [ItemRef.parse(str(k)) for k in called]))
    return rows


class UsageRecorder:
    """Records usage events in the session store and teaches the search's learner; built by
    the broker, one per broker."""

    def __init__(
        self, store: UsageLog, search: SearchEngine, catalog: Catalog, *, clock: Any = time.time
    ) -> None:
        self._store = store
        self._search = search
        self._catalog = catalog
        self._clock = clock
        self._lock = threading.Lock()
        self._seen: OrderedDict[tuple[str, str, str], None] = OrderedDict()
        self._shared: OrderedDict[str, bool] = OrderedDict()  # session: teaches the ranking

    @property
    def learner(self) -> UsageLearner | None:
        return self._search.learner

    def rebuild(self) -> int:
        """Learn again from every stored event (at startup); returns the events learned."""
        learner = self.learner
        if learner is None:
            return 0
        model = self._model()
        learned = 0
        shared: dict[str | None, bool] = {}
        with self._lock:
            learner.forget()
            for event in self._store.usage_events():
                sid = event.get("session_id")
                if sid not in shared:
                    shared[sid] = self._teaches_shared(sid)
                if shared[sid]:
                    learned += self._learn(learner, event, model)
        return learned

    def _teaches_shared(self, session_id: str | None) -> bool:
        """Whether a session's usage teaches the shared ranking: only a session created
        under no profile's does (see the module docstring). A session's profile never
        changes, so its header is read once per session while remembered."""
        if session_id is None:
            return True
        known = self._shared.get(session_id)
        if known is not None:
            return known
        try:
            header = self._store.header(session_id)
        except (ContextCoreError, ValueError, KeyError, TypeError):
            return False  # unreadable: its profile is unknown, so it teaches nothing
        shared = header is None or getattr(header, "profile", None) is None
        self._remember_shared(session_id, shared)
        return shared

    def _remember_shared(self, session_id: str, shared: bool) -> None:
        self._shared[session_id] = shared
        while len(self._shared) > _SEEN:
            self._shared.popitem(last=False)

    def call_event(
        self, session_id: str, turn: RequestContext | None, ref: ItemRef
    ) -> dict[str, Any] | None:
        """The usage event of a proxied call of ``ref`` for the session's latest ``turn``,
        ready to store (then :meth:`learned`); None when there is no turn yet or the call was
        already recorded for this turn and tool (each is recorded once)."""
        if turn is None:
            return None
        with self._lock:
            mark = (session_id, turn.request_id, ref.key)
            if mark in self._seen:
                return None
            self._seen[mark] = None
            while len(self._seen) > _SEEN:
                self._seen.popitem(last=False)
        return self._with_vector(self._turn_event("call", turn, [ref], []), turn, [ref])

    def learned(self, session_id: str, event: Mapping[str, Any], seq: int) -> None:
        """Teach the learner an event just stored as ``seq`` of ``session_id`` (not when
        the session is a profile's: see the module docstring)."""
        learner = self.learner
        if learner is None or not event.get("vector"):
            return  # nothing to teach: no need to know the session's profile
        with self._lock:
            if self._teaches_shared(session_id):
                self._learn(learner, {**event, "session_id": session_id, "seq": seq}, self._model())

    def record_usage(
        self,
        turn: RequestContext,
        used: Sequence[str],
        unused: Sequence[str] = (),
        profile: Profile | None = None,
    ) -> dict[str, Any]:
        """Record what a host reports for one recorded ``turn``; unknown keys, and under
        ``profile`` keys of items outside it, are errors naming them. Returns the stored
        event (without its vector)."""
        if profile is not None:  # the caller's profile is the session's (checked before)
            with self._lock:
                self._remember_shared(turn.session_id, False)
        used_refs = self._known(used, "used", profile)
        unused_refs = self._known(unused, "unused", profile)
        both = sorted({r.key for r in used_refs} & {r.key for r in unused_refs})
        if both:
            raise SessionError(
                f"keys both used and unused: {', '.join(map(repr, both))}; list each once",
                field="unused",
            )
        event = self._turn_event("report", turn, used_refs, unused_refs)
        event = self._with_vector(event, turn, used_refs)
        self.learned(turn.session_id, event, self._store.append_usage_event(turn.session_id, event))
        return {k: v for k, v in event.items() if k != "vector"}

    def import_log(self, rows: Iterable[tuple[str, list[ItemRef]]], session_id: str) -> int:
        """Learn from a usage log's lines, stored as ``log`` events of ``session_id``;
        returns the lines imported. Keys missing from the catalog are learned as well (the
        item may come back)."""
        rows = list(rows)
        vectors = self._search.embed_queries([q for q, _ in rows]) if rows else None
        model = self._model()
        for i, (query, refs) in enumerate(rows):
            event = self._event("log", None, query, [], refs, [])
            if vectors is not None and model is not None:
                event |= {"model": model, "vector": encode_vector(vectors[i])}
            self.learned(session_id, event, self._store.append_usage_event(session_id, event))
        return len(rows)

    def forget_profile(self, profile: str) -> ForgetResult:
        """Delete the usage events of every session created under ``profile`` (and what was
        learned from them): the other profiles' usage stays as it is."""
        events = items = 0
        for sid in self._store.list_session_ids():
            header = self._store.header(sid)
            if header is not None and getattr(header, "profile", None) == profile:
                done = self.forget(sid)
                events, items = events + done.events, items + done.items
        return ForgetResult(events, items)

    def forget(self, session_id: str | None = None) -> ForgetResult:
        """Delete the usage events of one session (None: all) and what was learned from
        them; the ranking of items left without history is exactly the one before."""
        with self._lock:
            removed = self._store.delete_usage_events(session_id)
            changed = self.learner.forget(session_id) if self.learner is not None else 0
            self._seen = OrderedDict(
                (k, None) for k in self._seen if session_id is not None and k[0] != session_id
            )
        return ForgetResult(removed, changed)

    def _known(
        self, keys: Sequence[str], field: str, profile: Profile | None = None
    ) -> list[ItemRef]:
        refs: list[ItemRef] = []
        bad: list[str] = []
        for key in dict.fromkeys(keys):
            try:
                ref = ItemRef.parse(key)
            except CatalogError:
                bad.append(key)
                continue
            if self._catalog.get(ref) is None or (profile is not None and not profile.allows(ref)):
                bad.append(key)
            else:
                refs.append(ref)
        if bad:
            raise CatalogError(
                f"unknown item keys in {field}: {', '.join(map(repr, bad))}; use keys such as "
                "'tool:<server>/<tool>', 'rule:<name>' or 'reference:<name>' that list_catalog "
                "shows (under a profile, only its items)",
                field=field,
            )
        return refs

    def _turn_event(
        self, kind: EventKind, turn: RequestContext, used: list[ItemRef], unused: list[ItemRef]
    ) -> dict[str, Any]:
        selected = [i.ref for i in turn.items]
        return self._event(kind, turn.request_id, turn.message, selected, used, unused)

    def _with_vector(
        self, event: dict[str, Any], turn: RequestContext, used: list[ItemRef]
    ) -> dict[str, Any]:
        """``event`` with the embedding of the turn's message, when something was used and
        there is a learner to teach (the learner's cached vector first)."""
        learner = self.learner
        model = self._model()
        if learner is None or model is None or not used:
            return event
        query = turn.message[: self._search.settings.max_query_chars]
        vector = learner.vector_for(query)
        if vector is None:
            found = self._search.embed_queries([query])
            vector = found[0] if found is not None else None
        if vector is None:
            return event
        return event | {"model": model, "vector": encode_vector(vector)}

    def _event(
        self,
        kind: EventKind,
        request_id: str | None,
        query: str,
        selected: list[ItemRef],
        used: list[ItemRef],
        unused: list[ItemRef],
    ) -> dict[str, Any]:
        return {
            "kind": kind,
            "request_id": request_id,
            "at": float(self._clock()),
            "query": query,
            "selected": [r.key for r in selected],
            "used": [r.key for r in used],
            "unused": [r.key for r in unused],
        }

    def _model(self) -> str | None:
        embedder = self._search.embedder
        return embedder.model_name if embedder is not None else None

    @staticmethod
    def _learn(learner: UsageLearner, event: Mapping[str, Any], model: str | None) -> int:
        """Teach ``learner`` one stored event; events embedded by another model are skipped.
        The items of one turn (its request id; an event without one is a turn of its own)
        are learned as used together."""
        vector = event.get("vector")
        if not vector or event.get("model") != model:
            return 0
        v = decode_vector(vector)
        turn = event.get("request_id") or ("event", event.get("seq"))
        for key in event.get("used", ()):
            learner.learn(
                ItemRef.parse(key), v, session_id=event.get("session_id"), at=event["at"], turn=turn
            )
        return 1
