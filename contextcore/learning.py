"""Learning from usage: each item represented by the requests that led to its use.

An item's usage representation is the (decayed) sum of the normalized embeddings of the
requests it was used for, kept per session so forgetting one session is exact, plus a ring of
its most recent requests (at most ``max_requests_per_item``) for a nearest-request vote. At
search time the usage score

    usage = 0.75 * cos(query, centroid) + 0.25 * max cos(query, recent request)

is added to an item's hybrid score (its best chunk's) with the weight ``weight * n / (n + 5)``
(``n`` its decayed count of learned requests; 0 below ``min_evidence``), so an item without
history ranks exactly as it did without learning. Which learned items are scored:

- every item with at least ``reach_evidence`` learned requests, wherever the cold ranking put
  it: one product of the query with the centroids of those items, kept as one contiguous
  matrix, so usage alone can bring in an item the cold ranking buries;
- items with less evidence only among the owners of the best ``4 * _CANDIDATES`` chunks by
  hybrid score (a single request is weak evidence to pull an item from anywhere).

The nearest-request vote is cast for the ``_VOTERS`` best of them after the centroid.

Tools used together: items used for the same turn are companions (:mod:`.co_use`). After the
usage lift, the best ``_LEADERS`` items lift their companions by
``companion_weight * share * c / (c + 2) * leader's score`` (``c`` the decayed count of turns
that used both, ``share`` the part of the leader's learned requests that did), never past the
leader: a companion comes with the item that brings it, not ahead of it.

Cost per search on top of today's: one partial sort that the search reuses to pick its top
chunks, the product with the reaching items' centroids, a product with at most 96 other
centroid rows, one with the recent requests of at most 5 items, and a small sort of the best
chunks when there are companions. With nothing learned it costs nothing and changes nothing.

State is kept in contiguous float32 matrices updated in place and grown by doubling: one row
per learned item (its decayed sum and the normalized centroid) and one row per kept recent
request (a slot reused when an item's ring is full or a session is forgotten).

Learning one request costs O(dim) (no re-indexing). Memory per learned request: one float32
vector in the request matrix (``4 * dim`` bytes, 1,536 for MiniLM) until the item's ring is
full; per (item, session) one float32 sum (1,536 bytes); per reaching item one more row.
Vectors are rounded to float16 before they are learned, so the state rebuilt from stored events
after a restart is bit for bit the same.
"""

from __future__ import annotations

import base64
import math
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from .co_use import CoUse
from .index import Layout
from .items import ItemRef
from .learned_ranking import ReachingItems, best_chunks, leading_items, pool_chunks, top_chunks

__all__ = ["LearningSettings", "UsageLearner", "decode_vector", "encode_vector"]

_EVIDENCE_HALF = 5.0  # learned requests at which an item gets half the full weight
_CENTROID_SHARE = 0.75
_CANDIDATES = 24  # learning may lift the learned items among the best 4 * 24 chunks
_VOTERS = 5  # of those, the best after the centroid also get the nearest-request vote
_LEADERS = 3  # the best items after the usage lift lift their companions
_COMPANION_HALF = 2.0  # turns used together at which a companion gets half its lift
_REMEMBERED_QUERIES = 512
_MAX_EXPONENT = 60.0  # rebase decayed sums before their scale leaves float32's range

Clock = Callable[[], float]
Vector = npt.NDArray[np.float32]


@dataclass(frozen=True)
class LearningSettings:
    """How strongly and for how long usage shapes ranking."""

    enabled: bool = True
    weight: float = 4.0
    min_evidence: int = 1
    decay_days: float = 0.0
    """Half-life of a learned request in days; 0 keeps every request at full weight."""
    max_requests_per_item: int = 32
    reach_evidence: int = 3
    """Learned requests from which an item is scored wherever the cold ranking put it
    (below: only among the best 96 chunks)."""
    companion_weight: float = 0.25
    """Lift of a leading item's companions, as a share of its score at full co-use."""


def encode_vector(vector: Vector) -> str:
    """A vector as base64 float16, the form stored in usage events."""
    return base64.b64encode(np.asarray(vector, dtype=np.float16).tobytes()).decode("ascii")


def decode_vector(text: str) -> Vector:
    """The float32 vector of :func:`encode_vector`'s text."""
    return np.frombuffer(base64.b64decode(text), dtype=np.float16).astype(np.float32)


@dataclass
class _Part:
    total: Vector
    count: float = 0.0
    events: int = 0


@dataclass
class _Item:
    row: int
    parts: dict[str | None, _Part] = field(default_factory=dict)
    recent: deque[tuple[str | None, int]] = field(default_factory=deque)
    """The (session, request slot) of the item's most recent requests, oldest first."""
    events: int = 0


class UsageLearner:
    """The learned state of every item, updated one request at a time."""

    def __init__(self, settings: LearningSettings | None = None, *, clock: Clock = time.time):
        self.settings = settings or LearningSettings()
        self._clock = clock
        # Held while state changes or a search reads it (learning runs in worker threads).
        self._lock = threading.RLock()
        self._reset()

    def _reset(self) -> None:
        self._items: dict[ItemRef, _Item] = {}
        self._refs: list[ItemRef] = []
        self._dim = 0
        self._sums = np.zeros((0, 0), dtype=np.float32)
        self._unit = np.zeros((0, 0), dtype=np.float32)
        self._counts = np.zeros(0, dtype=np.float64)
        self._events = np.zeros(0, dtype=np.int64)
        self._weight = np.zeros(0, dtype=np.float32)
        self._requests = np.zeros((0, 0), dtype=np.float32)  # one row per kept request
        self._free: list[int] = []  # request slots to reuse
        # Per item row, the request slots of its ring (-1: none), in no particular order.
        self._ring = np.full((0, 0), -1, dtype=np.int64)
        self._used_slots = 0
        self._epoch: float | None = None
        empty = np.zeros(0, np.int64)
        self._mapping: tuple[Layout | None, int, _Rows]
        self._mapping = (None, -1, _Rows(empty, empty, empty, True))
        self._by_row: list[_Item] = []
        self._reach = ReachingItems()
        self._co = CoUse()
        self._queries: OrderedDict[str, Vector] = OrderedDict()
        self.learned = 0

    # -- learning -------------------------------------------------------------------------

    def learn(
        self,
        ref: ItemRef,
        vector: Vector,
        *,
        session_id: str | None = None,
        at: float | None = None,
        turn: Hashable | None = None,
    ) -> None:
        """Learn that ``ref`` was used for a request embedded as ``vector`` (O(dim)).

        ``turn`` names the request within the session: items learned with the same one
        were used together and become each other's companions."""
        with self._lock:
            self._learn(ref, vector, session_id, at, turn)

    def _learn(
        self,
        ref: ItemRef,
        vector: Vector,
        session_id: str | None,
        at: float | None,
        turn: Hashable | None,
    ) -> None:
        v = np.asarray(vector, dtype=np.float16).astype(np.float32)
        at = self._clock() if at is None else at
        scale = self._scale(at)
        item = self._item(ref, v.size)
        part = item.parts.get(session_id)
        if part is None:
            part = item.parts[session_id] = _Part(np.zeros(self._dim, dtype=np.float32))
        part.total += v * scale
        part.count += scale
        part.events += 1
        self._keep_recent(item, session_id, v)
        item.events += 1
        self._sums[item.row] += v * scale
        self._counts[item.row] += scale
        self._events[item.row] += 1
        self._refresh_row(item.row)
        if turn is not None:
            self._co.used(item.row, session_id, turn, scale)
        self.learned += 1

    def forget(self, session_id: str | None = None) -> int:
        """Remove what was learned from one session (None: everything); returns how many
        items changed. Items left without requests rank exactly as before learning."""
        with self._lock:
            return self._forget(session_id)

    def _forget(self, session_id: str | None) -> int:
        if session_id is None:
            changed = len(self.items())
            self._reset()
            return changed
        changed = 0
        for item in self._items.values():
            gone = item.parts.pop(session_id, None)
            if gone is None:
                continue
            changed += 1
            self._free += [slot for sid, slot in item.recent if sid == session_id]
            item.recent = deque(r for r in item.recent if r[0] != session_id)
            self._ring[item.row] = -1
            self._ring[item.row, : len(item.recent)] = [slot for _, slot in item.recent]
            item.events -= gone.events
            self.learned -= gone.events
            self._rebuild_row(item)
        self._co.forget(session_id)
        return changed

    def evidence(self, ref: ItemRef) -> float:
        """The decayed count of requests learned for ``ref`` (0 when none)."""
        item = self._items.get(ref)
        if item is None:
            return 0.0
        return float(self._counts[item.row] * self._decay_now())

    def items(self) -> list[ItemRef]:
        """Every item with learned requests."""
        return [ref for ref, item in self._items.items() if item.events > 0]

    def memory_bytes(self) -> int:
        """Bytes held by vectors: item rows, per-session sums and recent requests (the
        matrices as allocated, so up to twice what they hold)."""
        rows = self._sums.nbytes + self._unit.nbytes + self._counts.nbytes + self._events.nbytes
        parts = sum(p.total.nbytes for i in self._items.values() for p in i.parts.values())
        return rows + parts + self._requests.nbytes + self._ring.nbytes

    # -- ranking --------------------------------------------------------------------------

    def remember(self, query: str, vector: Vector) -> None:
        """Keep a recent query's embedding, so recording its use needs no model call."""
        self._queries[query] = vector
        self._queries.move_to_end(query)
        while len(self._queries) > _REMEMBERED_QUERIES:
            self._queries.popitem(last=False)

    def vector_for(self, query: str) -> Vector | None:
        """The embedding of a recently searched query, if still remembered."""
        return self._queries.get(query)

    def adjust(
        self, query: str, query_vector: Vector, fused: npt.NDArray[np.float32], layout: Layout
    ) -> npt.NDArray[np.int64] | None:
        """Add each learned item's weighted usage score, then its leaders' companion lifts,
        to the items' best chunks in ``fused``, in place; items without history are left
        untouched.

        Returns chunks that hold at least the best ``4 * _CANDIDATES`` chunks afterwards (a
        caller can pick its top chunks among them), or None when nothing changed."""
        with self._lock:
            return self._adjust(query, query_vector, fused, layout)

    def _adjust(
        self, query: str, query_vector: Vector, fused: npt.NDArray[np.float32], layout: Layout
    ) -> npt.NDArray[np.int64] | None:
        self.remember(query, query_vector)
        s = self.settings
        if not s.enabled or self.learned == 0 or max(s.weight, s.companion_weight) <= 0:
            return None
        mapping = self._rows_of(layout)
        n, k = fused.size, min(4 * _CANDIDATES, fused.size)
        pool = np.argpartition(fused, n - k)[n - k :] if k < n else np.arange(n)
        near_chunks, near_rows = pool_chunks(fused, pool, mapping.row_of_chunk, mapping.single)
        reach = self._reaching()
        items = reach.chunks(layout, mapping.position_of_row)
        far_chunks = best_chunks(fused, items)
        far_rows = reach.rows[items.present]
        centroid = reach.matrix @ query_vector
        if not items.present.all():
            centroid = centroid[items.present]
        near = reach.outside(near_rows)
        near_chunks, near_rows = near_chunks[near], near_rows[near]
        chunks = np.concatenate((far_chunks, near_chunks))
        rows = np.concatenate((far_rows, near_rows))
        if rows.size == 0:  # a leader with companions is a learned item in the pool
            return None
        boost = np.concatenate((centroid, self._unit[near_rows] @ query_vector))
        self._lift(fused, chunks, rows, boost, query_vector)
        pool = top_chunks(fused, pool, far_chunks, k)
        companions = self._lift_companions(fused, pool, layout, mapping)
        return pool if companions.size == 0 else np.concatenate((pool, companions))

    def _lift(
        self,
        fused: npt.NDArray[np.float32],
        chunks: npt.NDArray[np.int64],
        rows: npt.NDArray[np.int64],
        boost: npt.NDArray[np.float32],
        query_vector: Vector,
    ) -> None:
        """Add the usage score of the items ``rows`` (``boost``: their centroid cosines) to
        their best ``chunks``."""
        weights = self._weights(rows)
        np.maximum(boost, 0.0, out=boost)
        boost *= weights
        boost *= _CENTROID_SHARE
        # The nearest-request vote, for the few items still in contention after the centroid
        # (an item below min_evidence has weight 0, so its vote adds nothing).
        k = rows.size - min(_VOTERS, rows.size)
        voters = np.argpartition(fused[chunks] + boost, k)[k:]
        vote = self._nearest(rows[voters], query_vector)
        vote *= weights[voters]
        vote *= 1 - _CENTROID_SHARE
        boost[voters] += vote
        # An item's score is its best chunk's, and the usage score is never negative: lifting
        # that one chunk lifts the item.
        fused[chunks] += boost

    def _lift_companions(
        self,
        fused: npt.NDArray[np.float32],
        pool: npt.NDArray[np.int64],
        layout: Layout,
        mapping: _Rows,
    ) -> npt.NDArray[np.int64]:
        """Lift the companions of the best items among ``pool``, each to at most just below
        the leader that brings it; returns the chunks lifted that are not in ``pool``."""
        if not self._co or self.settings.companion_weight <= 0:
            return np.zeros(0, dtype=np.int64)
        targets: dict[int, np.float32] = {}
        for position in leading_items(fused, pool, layout.owner, _LEADERS):
            row = int(mapping.row_at[position])
            if row < 0 or self._counts[row] <= 0:
                continue
            leader = np.float32(_item_score(fused, layout, position))
            below = np.nextafter(leader, np.float32(-np.inf))
            for other, lift in self._companion_lifts(row, leader):
                place = int(mapping.position_of_row[other])
                if place < 0:
                    continue
                chunk = _best_chunk(fused, layout, place)
                target = min(fused[chunk] + lift, below)
                if target > targets.get(chunk, fused[chunk]):
                    targets[chunk] = target
        for chunk, target in targets.items():
            fused[chunk] = target
        in_pool = set(pool.tolist())
        return np.asarray([c for c in targets if c not in in_pool], dtype=np.int64)

    def _companion_lifts(self, row: int, leader: np.float32) -> list[tuple[int, np.float32]]:
        """The rows used together with ``row`` and how much its score ``leader`` lifts
        each: more the more often they came together, never when the leader scores <= 0."""
        if leader <= 0:
            return []
        decay = self._decay_now()
        count = float(self._counts[row])
        weight = self.settings.companion_weight
        lifts = []
        for other, together in self._co.companions(row).items():
            evidence = together * decay
            share = min(1.0, together / count)
            lift = weight * share * evidence / (evidence + _COMPANION_HALF) * float(leader)
            lifts.append((other, np.float32(lift)))
        return lifts

    def _nearest(
        self, rows: npt.NDArray[np.int64], query_vector: Vector
    ) -> npt.NDArray[np.float32]:
        """Each row's best dot product (at least 0) between the query and its recent
        requests: one gather and one product, no loop per item."""
        slots = self._ring[rows]
        kept = slots >= 0
        sims = np.zeros(slots.shape, dtype=np.float32)
        sims[kept] = self._requests[slots[kept]] @ query_vector
        nearest: npt.NDArray[np.float32] = sims.max(axis=1)
        # A full ring has no empty place holding 0: the vote must still never be negative.
        np.maximum(nearest, 0.0, out=nearest)
        return nearest

    # -- internals ------------------------------------------------------------------------

    def _item(self, ref: ItemRef, dim: int) -> _Item:
        if self._dim == 0:
            self._dim = dim
            self._grow(8)
        elif dim != self._dim:
            raise ValueError(
                f"vector of dimension {dim} for {ref.key!r}; learned ones have {self._dim}"
            )
        item = self._items.get(ref)
        if item is None:
            row = len(self._refs)
            if row >= self._sums.shape[0]:
                self._grow(2 * self._sums.shape[0])
            item = self._items[ref] = _Item(row)
            self._refs.append(ref)
            self._by_row.append(item)
        return item

    def _keep_recent(self, item: _Item, session_id: str | None, v: Vector) -> None:
        """Keep ``v`` in the item's ring of recent requests, in the oldest one's slot when
        the ring is full."""
        if len(item.recent) >= self.settings.max_requests_per_item:
            _, slot = item.recent.popleft()  # the ring's slots stay the same
        else:
            slot = self._new_slot()
            place = len(item.recent)
            if place >= self._ring.shape[1]:
                wider = np.full((self._ring.shape[0], max(4, 2 * place)), -1, dtype=np.int64)
                wider[:, : self._ring.shape[1]] = self._ring
                self._ring = wider
            self._ring[item.row, place] = slot
        self._requests[slot] = v
        item.recent.append((session_id, slot))

    def _new_slot(self) -> int:
        if self._free:
            return self._free.pop()
        slot = self._used_slots
        self._used_slots += 1
        if slot >= self._requests.shape[0]:
            grown = np.zeros((max(64, 2 * slot), self._dim), dtype=np.float32)
            if slot:
                grown[:slot] = self._requests[:slot]
            self._requests = grown
        return slot

    def _grow(self, capacity: int) -> None:
        def grown(old: npt.NDArray[np.generic], shape: tuple[int, ...]) -> npt.NDArray[np.generic]:
            new = np.zeros(shape, dtype=old.dtype)
            if old.size:
                new[: old.shape[0]] = old
            return new

        self._sums = grown(self._sums, (capacity, self._dim))  # type: ignore[assignment]
        self._unit = grown(self._unit, (capacity, self._dim))  # type: ignore[assignment]
        self._counts = grown(self._counts, (capacity,))  # type: ignore[assignment]
        self._events = grown(self._events, (capacity,))  # type: ignore[assignment]
        self._weight = grown(self._weight, (capacity,))  # type: ignore[assignment]
        ring = np.full((capacity, self._ring.shape[1]), -1, dtype=np.int64)
        ring[: self._ring.shape[0]] = self._ring
        self._ring = ring

    def _refresh_row(self, row: int) -> None:
        norm = float(np.linalg.norm(self._sums[row]))
        self._unit[row] = self._sums[row] / norm if norm > 0 else 0.0
        self._refresh_weight(row)
        reaching = self._events[row] >= self.settings.reach_evidence and self._weight[row] > 0
        self._reach.update(row, bool(reaching), self._unit[row])

    def _rebuild_row(self, item: _Item) -> None:
        row = item.row
        self._sums[row] = 0.0
        self._counts[row] = 0.0
        for part in item.parts.values():
            self._sums[row] += part.total
            self._counts[row] += part.count
        self._events[row] = item.events
        self._refresh_row(row)

    def _rows_of(self, layout: Layout) -> _Rows:
        """Each chunk's learned row and the layout's position of each row (cached per
        layout until a new item is learned)."""
        cached_layout, count, rows = self._mapping
        if cached_layout is layout and count == len(self._refs):
            return rows
        row_at = np.full(len(layout.refs), -1, dtype=np.int64)
        position_of_row = np.full(len(self._refs), -1, dtype=np.int64)
        for row, ref in enumerate(self._refs):
            position = layout.position.get(ref)
            if position is not None:
                row_at[position] = row
                position_of_row[row] = position
        row_of_chunk = row_at[layout.owner]
        learned = row_of_chunk[row_of_chunk >= 0]
        single = bool(np.unique(learned).size == learned.size)
        rows = _Rows(row_of_chunk, row_at, position_of_row, single)
        self._mapping = (layout, len(self._refs), rows)
        return rows

    def _reaching(self) -> ReachingItems:
        """The items scored wherever the cold ranking put them, rebuilt if stale."""
        if self._reach.stale:
            count = len(self._refs)
            enough = self._events[:count] >= self.settings.reach_evidence
            members = np.flatnonzero(enough & (self._weight[:count] > 0)).astype(np.int64)
            self._reach.rebuild(members, self._unit[members])
        return self._reach

    def _weights(self, rows: npt.NDArray[np.int64]) -> npt.NDArray[np.float32]:
        """The usage score's weight for each row (0 below ``min_evidence``)."""
        if self.settings.decay_days <= 0:
            return self._weight[rows]
        counts = self._counts[rows] * self._decay_now()
        weights = (self.settings.weight * counts / (counts + _EVIDENCE_HALF)).astype(np.float32)
        weights[self._events[rows] < self.settings.min_evidence] = 0.0
        return weights

    def _refresh_weight(self, row: int) -> None:
        """Keep the row's weight at full evidence so a search without decay only reads it."""
        count = float(self._counts[row])
        enough = self._events[row] >= self.settings.min_evidence
        self._weight[row] = self.settings.weight * count / (count + _EVIDENCE_HALF) if enough else 0

    def _scale(self, at: float) -> float:
        """The factor a request learned at ``at`` is stored with (decay is lazy: sums grow
        with time and are scaled back at search time)."""
        days = self.settings.decay_days
        if days <= 0:
            return 1.0
        if self._epoch is None:
            self._epoch = at
        exponent = (at - self._epoch) / (days * 86_400.0)
        if exponent > _MAX_EXPONENT:
            self._rebase(at)
            exponent = 0.0
        return float(2.0**exponent)

    def _rebase(self, at: float) -> None:
        assert self._epoch is not None
        factor = 2.0 ** (-(at - self._epoch) / (self.settings.decay_days * 86_400.0))
        self._sums *= factor
        self._counts *= factor
        for item in self._items.values():
            for part in item.parts.values():
                part.total *= factor
                part.count *= factor
        self._co.rescale(factor)
        self._epoch = at

    def _decay_now(self) -> float:
        days = self.settings.decay_days
        if days <= 0 or self._epoch is None:
            return 1.0
        return math.pow(2.0, -(self._clock() - self._epoch) / (days * 86_400.0))


@dataclass(frozen=True)
class _Rows:
    """How a layout's chunks and items map to learned rows."""

    row_of_chunk: npt.NDArray[np.int64]
    """Each chunk's item's row, -1 for items without one."""
    row_at: npt.NDArray[np.int64]
    """Each item position's row, -1 for items without one."""
    position_of_row: npt.NDArray[np.int64]
    """Each row's item position in the layout, -1 when not in it."""
    single: bool
    """Every learned item in the layout has a single chunk."""


def _item_range(layout: Layout, position: int, size: int) -> tuple[int, int]:
    start = int(layout.starts[position])
    end = int(layout.starts[position + 1]) if position + 1 < len(layout.starts) else size
    return start, end


def _item_score(fused: npt.NDArray[np.float32], layout: Layout, position: int) -> float:
    start, end = _item_range(layout, position, fused.size)
    return float(fused[start:end].max())


def _best_chunk(fused: npt.NDArray[np.float32], layout: Layout, position: int) -> int:
    start, end = _item_range(layout, position, fused.size)
    return start + int(np.argmax(fused[start:end]))
