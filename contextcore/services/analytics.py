"""Inclusion analytics over recorded turns: what was included, how, and how strongly search
matched, per session or across sessions; with the usage events, what was used, how precise
each item's selection was, and which include modes to change. Computed from the turn logs and
usage events the session store keeps, so the figures persist with the store."""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from ..catalog import Catalog
from ..errors import ContextCoreError
from ..items import ItemRef
from ..sessions import RequestContext, Session
from ..store import SessionStore, load_session
from ..suggestions import Suggestion, suggestions, used_per_turn

__all__ = [
    "ItemUsage",
    "UsageStats",
    "format_usage",
    "load_sessions",
    "sessions_of",
    "usage_stats",
]

_BUCKETS = 10


@dataclass
class ItemUsage:
    """How often one item was in a request context, by include mode, and its agent scores."""

    ref: ItemRef
    by_mode: dict[str, int] = field(default_factory=lambda: {"always": 0, "manual": 0, "agent": 0})
    scores: list[float] = field(default_factory=list)
    used: int = 0
    """Turns it was used in (a proxied call or a host's report), selected or not."""
    missed: int = 0
    """Turns it was used in without having been selected."""
    observed: int = 0
    """Turns with recorded usage that selected it."""

    @property
    def included(self) -> int:
        return sum(self.by_mode.values())

    @property
    def precision(self) -> float | None:
        """Of the turns with recorded usage that selected it, the share that used it."""
        return (self.used - self.missed) / self.observed if self.observed else None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {**self.ref.to_dict(), "key": self.ref.key}
        out["included"] = self.included
        out["by_mode"] = dict(self.by_mode)
        out["agent_scores"] = _score_summary(self.scores)
        out["selected"] = self.included
        out["used"] = self.used
        out["missed"] = self.missed
        out["selected_with_usage"] = self.observed
        precision = self.precision
        out["precision"] = round(precision, 4) if precision is not None else None
        return out


def _score_summary(scores: list[float]) -> dict[str, float | int] | None:
    if not scores:
        return None
    return {
        "count": len(scores),
        "min": round(min(scores), 4),
        "median": round(statistics.median(scores), 4),
        "mean": round(statistics.fmean(scores), 4),
        "max": round(max(scores), 4),
    }


@dataclass(frozen=True)
class UsageStats:
    """The analytics a user tunes include modes and thresholds with."""

    sessions: int
    turns: int
    items: list[ItemUsage]
    histogram: list[int]
    never_selected: list[str]
    never_included: list[str]
    searches_without_strong_match: int
    searches_without_agent_items: int
    searches_failed: int
    warnings: list[str] = field(default_factory=list)
    turns_with_usage: int = 0
    selected_never_used: list[str] = field(default_factory=list)
    suggestions: list[Suggestion] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        width = 1.0 / _BUCKETS
        return {
            "sessions": self.sessions,
            "turns": self.turns,
            "items": [u.to_dict() for u in self.items],
            "agent_score_histogram": [
                {"from": round(i * width, 2), "to": round((i + 1) * width, 2), "count": n}
                for i, n in enumerate(self.histogram)
            ],
            "never_selected": self.never_selected,
            "never_included": self.never_included,
            "searches_without_strong_match": self.searches_without_strong_match,
            "searches_without_agent_items": self.searches_without_agent_items,
            "searches_failed": self.searches_failed,
            "warnings": list(self.warnings),
            "turns_with_usage": self.turns_with_usage,
            "selected_never_used": list(self.selected_never_used),
            "suggestions": [s.to_dict() for s in self.suggestions],
        }


def usage_stats(
    sessions: Iterable[Session],
    catalog: Catalog,
    *,
    warnings: Sequence[str] = (),
    events: Iterable[Mapping[str, Any]] = (),
    shown: Callable[[ItemRef], bool] | None = None,
) -> UsageStats:
    """Aggregate the turn logs of ``sessions`` and the usage ``events`` recorded for them;
    with ``shown`` (a profile's test), only the items it passes are named anywhere.

    ``never_selected`` lists enabled ``agent`` items search never chose; ``never_included``
    enabled items of any mode that were in no request context. A search "without a strong
    match" chose no item at or above the ``include_score`` in force for that turn. A turn
    with a malformed value is skipped and named in ``warnings`` (after the given ones).

    Usage counts only turns with recorded usage (``call`` and ``report`` events; imported
    logs have no turn): an item's precision is the share of those turns selecting it that
    used it, and ``selected_never_used`` lists items such turns selected and never used.
    """
    tally = _Tally()
    notes = list(warnings)
    used_in = used_per_turn(events, notes)
    count = 0
    for session in sessions:
        count += 1
        for turn in session.turns:
            problem = _turn_problem(turn)
            if problem is not None:
                notes.append(
                    f"session {session.session_id!r}: turn {turn.request_id!r} skipped: {problem}"
                )
                continue
            tally.add(turn, used_in.get((session.session_id, turn.request_id)))
    return tally.stats(count, catalog, notes, shown)


@dataclass
class _Tally:
    """Counts over the turns read so far."""

    usage: dict[ItemRef, ItemUsage] = field(default_factory=dict)
    histogram: list[int] = field(default_factory=lambda: [0] * _BUCKETS)
    turns: int = 0
    weak: int = 0
    empty: int = 0
    failed: int = 0
    reported: int = 0

    def add(self, turn: RequestContext, used: set[ItemRef] | None) -> None:
        """Count one well-formed turn and, when usage was recorded for it, what it used."""
        self.turns += 1
        if used is not None:
            self.reported += 1
            _count_use(self.usage, turn, used)
        agent_scores: list[float] = []
        for item in turn.items:
            row = self.usage.setdefault(item.ref, ItemUsage(item.ref))
            row.by_mode[item.include_mode] += 1
            row.observed += used is not None
            if item.include_mode == "agent" and item.similarity_score is not None:
                row.scores.append(item.similarity_score)
                agent_scores.append(item.similarity_score)
                bucket = min(_BUCKETS - 1, max(0, int(item.similarity_score * _BUCKETS)))
                self.histogram[bucket] += 1
        if turn.search_mode is None:
            self.failed += 1
            return
        if not agent_scores:
            self.empty += 1
        threshold = turn.include_score
        if threshold is not None and not any(s >= threshold for s in agent_scores):
            self.weak += 1

    def stats(
        self,
        sessions: int,
        catalog: Catalog,
        notes: list[str],
        shown: Callable[[ItemRef], bool] | None = None,
    ) -> UsageStats:
        """The totals, with the catalog's items never selected or included and suggestions;
        only the items ``shown`` passes (None: all)."""
        usage = self.usage
        enabled = catalog.enabled()
        if shown is not None:
            usage = {ref: row for ref, row in usage.items() if shown(ref)}
            enabled = [i for i in enabled if shown(i.ref)]
        never_selected = sorted(
            i.ref.key
            for i in enabled
            if i.effective_include == "agent"
            and (i.ref not in usage or usage[i.ref].by_mode["agent"] == 0)
        )
        never_included = sorted(i.ref.key for i in enabled if i.ref not in usage)
        rows = sorted(usage.values(), key=lambda u: (-u.included, u.ref.key))
        unused = sorted(u.ref.key for u in rows if u.observed and not u.used)
        modes = {i.ref: i.effective_include for i in enabled}
        advice = suggestions(usage, modes, never_selected, self.turns, self.reported)
        return UsageStats(
            sessions,
            self.turns,
            rows,
            self.histogram,
            never_selected,
            never_included,
            self.weak,
            self.empty,
            self.failed,
            notes,
            self.reported,
            unused,
            advice,
        )


def _count_use(usage: dict[ItemRef, ItemUsage], turn: RequestContext, used: set[ItemRef]) -> None:
    selected = {item.ref for item in turn.items}
    for ref in used:
        row = usage.setdefault(ref, ItemUsage(ref))
        row.used += 1
        row.missed += ref not in selected


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _turn_problem(turn: RequestContext) -> str | None:
    """What is wrong with a stored turn's values, or None when they can be counted."""
    for i, item in enumerate(turn.items):
        if item.include_mode not in ("always", "manual", "agent"):
            return f"items[{i}].include_mode is {item.include_mode!r}"
        if item.similarity_score is not None and not _is_number(item.similarity_score):
            return f"items[{i}].similarity_score is {item.similarity_score!r}, not a number"
    if turn.include_score is not None and not _is_number(turn.include_score):
        return f"include_score is {turn.include_score!r}, not a number"
    return None


def load_sessions(
    store: SessionStore, session_id: str | None = None, profile: str | None = None
) -> tuple[list[Session], list[str]]:
    """Every stored session (or just one; with ``profile``, only those created under it),
    and a warning for each one that could not be read (a damaged row), which is left out
    rather than failing the whole report."""
    ids = [session_id] if session_id is not None else store.list_session_ids()
    sessions: list[Session] = []
    warnings: list[str] = []
    for sid in ids:
        if profile is not None and _profile_of(store, sid) != profile:
            continue
        try:
            found = load_session(store, sid)
        except _UNREADABLE as exc:
            found = _readable_part(store, sid, exc, warnings)
        if found is not None:
            sessions.append(found)
            warnings += [  # turns the store skipped as damaged (it never fails on one)
                f"session {sid!r}: stored turn {r.seq} skipped: {r.reason}"
                for r in store.skipped_records(sid)
                if r.kind == "turn"
            ]
    return sessions, warnings


_UNREADABLE = (ContextCoreError, ValueError, KeyError, TypeError)


def _profile_of(store: SessionStore, sid: str) -> str | None:
    """The profile a session was created under (None: none, or its header is unreadable,
    which the full read then reports)."""
    try:
        header = store.header(sid)
    except _UNREADABLE:
        return None
    return header.profile if header is not None else None


def _reason(exc: BaseException) -> str:
    return exc.message if isinstance(exc, ContextCoreError) else f"{type(exc).__name__}: {exc}"


def _readable_part(
    store: SessionStore, sid: str, exc: BaseException, warnings: list[str]
) -> Session | None:
    """A session whose turn log could not be read whole: its turns read one by one, each
    unreadable one left out and named; the whole session left out if even that fails."""
    try:
        header = load_session(store, sid, with_turns=False)
        count = store.turn_count(sid)
    except _UNREADABLE as again:
        warnings.append(f"session {sid!r} skipped: {_reason(again)}")
        return None
    if header is None:
        warnings.append(f"session {sid!r} skipped: {_reason(exc)}")
        return None
    turns: list[RequestContext] = []
    for position in range(count):
        try:
            turns += store.turns(sid, offset=position, limit=1)
        except _UNREADABLE as bad:
            warnings.append(f"session {sid!r}: stored turn {position} skipped: {_reason(bad)}")
    return replace(header, turns=tuple(turns))


def sessions_of(store: SessionStore, session_id: str | None = None) -> list[Session]:
    """Every readable stored session (or just one); see :func:`load_sessions`."""
    return load_sessions(store, session_id)[0]


def format_usage(stats: UsageStats, *, top: int = 15) -> str:
    """A short report for a person tuning include modes and thresholds."""
    lines = [f"{stats.sessions} session(s), {stats.turns} request context(s)"]
    if stats.turns:
        lines.append(
            f"searches with no match at or above include_score: "
            f"{stats.searches_without_strong_match} of {stats.turns}; with no agent item at "
            f"all: {stats.searches_without_agent_items}; failed: {stats.searches_failed}"
        )
    if stats.items:
        lines.append("most included (always / manual / agent, agent score median):")
        for u in stats.items[:top]:
            m = u.by_mode
            summary = _score_summary(u.scores)
            median = f", median {summary['median']:.2f}" if summary else ""
            lines.append(
                f"  {u.ref.key}: {u.included} ({m['always']} / {m['manual']} / {m['agent']}"
                f"{median})"
            )
    if any(stats.histogram):
        width = 1.0 / _BUCKETS
        bars = ", ".join(
            f"{i * width:.1f}-{(i + 1) * width:.1f}: {n}"
            for i, n in enumerate(stats.histogram)
            if n
        )
        lines.append(f"agent score distribution: {bars}")
    lines += _usage_lines(stats, top)
    if stats.warnings:
        lines.append(f"left out ({len(stats.warnings)}):")
        lines += [f"  {warning}" for warning in stats.warnings[:top]]
    if stats.never_selected:
        lines.append(f"agent items never selected ({len(stats.never_selected)}):")
        lines += [f"  {key}" for key in stats.never_selected[:top]]
        if len(stats.never_selected) > top:
            lines.append(f"  ... and {len(stats.never_selected) - top} more")
    if stats.suggestions:
        lines.append(f"suggested changes ({len(stats.suggestions)}):")
        for s in stats.suggestions[:top]:
            lines.append(f"  {s.key}: {s.include} -> {s.suggested}: {s.reason}")
        if len(stats.suggestions) > top:
            lines.append(f"  ... and {len(stats.suggestions) - top} more")
    return "\n".join(lines)


def _usage_lines(stats: UsageStats, top: int) -> list[str]:
    """Used against selected per item, for the turns with recorded usage."""
    if not stats.turns_with_usage:
        return ["no usage recorded yet (tools called through the broker, or record_usage)"]
    lines = [
        f"recorded usage in {stats.turns_with_usage} of {stats.turns} turn(s); "
        "used / selected (precision), used without being selected:"
    ]
    rows = sorted(stats.items, key=lambda u: (-u.used, -u.observed, u.ref.key))
    for u in [u for u in rows if u.used or u.observed][:top]:
        precision = u.precision
        share = f" ({precision:.0%})" if precision is not None else ""
        lines.append(f"  {u.ref.key}: {u.used - u.missed} / {u.observed}{share}, missed {u.missed}")
    if stats.selected_never_used:
        lines.append(f"selected but never used ({len(stats.selected_never_used)}):")
        lines += [f"  {key}" for key in stats.selected_never_used[:top]]
    return lines
