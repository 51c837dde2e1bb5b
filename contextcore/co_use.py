"""Tools used together: which learned items were used for the same request.

Two items used for one turn (search then fetch, read then write: the calls a host makes after
one ``build_request_context``, or the keys of one usage-log line) are each other's companions.
Counts are kept per session, so forgetting one session removes its pairs exactly, and are
stored with the same decay scale as the learner's evidence, so ``count(A, B) / evidence(A)``
(how often a use of A came with B) needs no decay of its own.

Items are the learner's row numbers. The turns still open for pairing are bounded
(``_OPEN_TURNS``), and so is what one turn can pair (``_PER_TURN`` items).
"""

from __future__ import annotations

from collections import OrderedDict, defaultdict
from collections.abc import Hashable

__all__ = ["CoUse"]

_OPEN_TURNS = 4096
_PER_TURN = 16

Pair = tuple[int, int]


class CoUse:
    """Per-session counts of items used for the same turn, and their totals."""

    def __init__(self) -> None:
        self._turns: OrderedDict[tuple[str | None, Hashable], list[int]] = OrderedDict()
        self._parts: dict[str | None, dict[Pair, float]] = {}
        self._totals: defaultdict[int, dict[int, float]] = defaultdict(dict)

    def __bool__(self) -> bool:
        return bool(self._totals)

    def used(self, row: int, session_id: str | None, turn: Hashable, scale: float) -> None:
        """Record that item ``row`` was used for ``turn`` of ``session_id``; it becomes a
        companion of every item used for that turn before it."""
        key = (session_id, turn)
        earlier = self._turns.get(key)
        if earlier is None:
            earlier = self._turns[key] = []
            while len(self._turns) > _OPEN_TURNS:
                self._turns.popitem(last=False)
        if row in earlier or len(earlier) >= _PER_TURN:
            return
        part = self._parts.setdefault(session_id, {})
        for other in earlier:
            for pair in ((other, row), (row, other)):
                part[pair] = part.get(pair, 0.0) + scale
                self._add(pair, scale)
        earlier.append(row)

    def forget(self, session_id: str) -> None:
        """Remove every pair one session taught (the totals are summed again from the
        other sessions, so they hold exactly what those taught)."""
        gone = self._parts.pop(session_id, None)
        self._turns = OrderedDict((k, v) for k, v in self._turns.items() if k[0] != session_id)
        if not gone:
            return
        for a, b in gone:
            self._totals[a].pop(b, None)
        for part in self._parts.values():
            for pair, count in part.items():
                if pair in gone:
                    self._add(pair, count)
        for a in {a for a, _ in gone}:
            if not self._totals[a]:
                del self._totals[a]

    def companions(self, row: int) -> dict[int, float]:
        """The items used together with ``row``, with their (decay-scaled) counts."""
        return self._totals.get(row, {})

    def rescale(self, factor: float) -> None:
        """Multiply every count by ``factor`` (the learner rebasing its decay)."""
        for part in self._parts.values():
            for pair in part:
                part[pair] *= factor
        for companions in self._totals.values():
            for b in companions:
                companions[b] *= factor

    def _add(self, pair: Pair, count: float) -> None:
        a, b = pair
        companions = self._totals[a]
        companions[b] = companions.get(b, 0.0) + count
