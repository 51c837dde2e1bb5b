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

from .errors import CatalogError, SessionError
from .items import ItemRef
from .learning import UsageLearner, decode_vector, encode_vector
from .services.broker import ContextBroker
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
    """Records usage events through the broker's store and teaches the search's learner."""

    def __init__(self, broker: ContextBroker, *, clock: Any = time.time) -> None:
        self.broker = broker
        self._clock = clock
        self._lock = threading.Lock()
        self._seen: OrderedDict[tuple[str, str, str], None] = OrderedDict()

    @property
    def learner(self) -> UsageLearner | None:
        return self.broker.search.learner

    @property
    def _store(self) -> UsageLog:
        return self.broker.store

    def rebuild(self) -> int:
        """Learn again from every stored event (at startup); returns the events learned."""
        learner = self.learner
        if learner is None:
            return 0
        model = self._model()
        learned = 0
        with self._lock:
            learner.forget()
            for event in self._store.usage_events():
                learned += self._learn(learner, event, model)
        return learned

    def tool_called(self, session_id: str, ref: ItemRef) -> bool:
        """Record that a proxied tool was used for the session's latest turn (once per turn
        and tool); False when the session has no turn yet."""
        turn = self.broker.last_turn(session_id)
        if turn is None:
            return False
        with self._lock:
            mark = (session_id, turn.request_id, ref.key)
            if mark in self._seen:
                return False
            self._seen[mark] = None
            while len(self._seen) > _SEEN:
                self._seen.popitem(last=False)
        self._record("call", session_id, turn, [ref], [])
        return True

    def record_usage(
        self, session_id: str, request_id: str, used: Sequence[str], unused: Sequence[str] = ()
    ) -> dict[str, Any]:
        """Record what a host reports for one turn; unknown keys or ids are errors naming
        them. Returns the stored event (without its vector)."""
        sid = self.broker.require_session(session_id)
        turn = self.broker.request(sid, request_id)
        used_refs, unused_refs = self._known(used, "used"), self._known(unused, "unused")
        both = sorted({r.key for r in used_refs} & {r.key for r in unused_refs})
        if both:
            raise SessionError(
                f"keys both used and unused: {', '.join(map(repr, both))}; list each once",
                field="unused",
            )
        event = self._record("report", sid, turn, used_refs, unused_refs)
        return {k: v for k, v in event.items() if k != "vector"}

    def import_log(self, rows: Iterable[tuple[str, list[ItemRef]]], session_id: str) -> int:
        """Learn from a usage log's lines, stored as ``log`` events of ``session_id``;
        returns the lines imported. Keys missing from the catalog are learned as well (the
        item may come back)."""
        rows = list(rows)
        vectors = self.broker.search.embed_queries([q for q, _ in rows]) if rows else None
        model = self._model()
        learner = self.learner
        for i, (query, refs) in enumerate(rows):
            event = self._event("log", None, query, [], refs, [])
            if vectors is not None and model is not None:
                event |= {"model": model, "vector": encode_vector(vectors[i])}
            seq = self._store.append_usage_event(session_id, event)
            if learner is not None:
                with self._lock:
                    self._learn(learner, {**event, "session_id": session_id, "seq": seq}, model)
        return len(rows)

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

    def _known(self, keys: Sequence[str], field: str) -> list[ItemRef]:
        refs: list[ItemRef] = []
        bad: list[str] = []
        for key in dict.fromkeys(keys):
            try:
                ref = ItemRef.parse(key)
            except CatalogError:
                bad.append(key)
                continue
            if self.broker.catalog.get(ref) is None:
                bad.append(key)
            else:
                refs.append(ref)
        if bad:
            raise CatalogError(
                f"unknown item keys in {field}: {', '.join(map(repr, bad))}; use keys such as "
                "'tool:<server>/<tool>', 'rule:<name>' or 'reference:<name>' that list_catalog "
                "shows",
                field=field,
            )
        return refs

    def _record(
        self,
        kind: EventKind,
        session_id: str,
        turn: RequestContext,
        used: list[ItemRef],
        unused: list[ItemRef],
    ) -> dict[str, Any]:
        selected = [i.ref for i in turn.items]
        event = self._event(kind, turn.request_id, turn.message, selected, used, unused)
        learner = self.learner
        model = self._model()
        if learner is not None and model is not None and used:
            query = turn.message[: self.broker.search.settings.max_query_chars]
            vector = learner.vector_for(query)
            if vector is None:
                found = self.broker.search.embed_queries([query])
                vector = found[0] if found is not None else None
            if vector is not None:
                event |= {"model": model, "vector": encode_vector(vector)}
        seq = self._store.append_usage_event(session_id, event)
        if learner is not None:
            with self._lock:
                self._learn(learner, {**event, "session_id": session_id, "seq": seq}, model)
        return event

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
        embedder = self.broker.search.embedder
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
