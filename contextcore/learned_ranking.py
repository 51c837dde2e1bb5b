"""Array helpers for lifting learned items in a search's chunk scores.

A search scores chunks; an item's score is its best chunk's. Learning adds to an item's best
chunk, so these helpers find best chunks (among a pool, or over each item's whole range),
keep the best chunks of a search after a lift, and name the leading items.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from .index import Layout

__all__ = ["ItemChunks", "best_chunks", "leading_items", "pool_chunks", "top_chunks"]

Scores = npt.NDArray[np.float32]
Indices = npt.NDArray[np.int64]


def pool_chunks(
    fused: Scores, pool: Indices, row_of_chunk: Indices, single: bool
) -> tuple[Indices, Indices]:
    """Among the chunks ``pool``, the best chunk of each learned item, and its row
    (``single``: every learned item has one chunk, so there is nothing to group). Chunks
    left out by the search's mask are -inf and stay so whatever is added."""
    rows = row_of_chunk[pool]
    keep = rows >= 0
    top, rows = pool[keep], rows[keep]
    if single or top.size < 2:
        return top, rows
    order = np.argsort(-fused[top], kind="stable")
    top, rows = top[order], rows[order]
    _, first = np.unique(rows, return_index=True)  # the first is the item's best chunk
    return top[first], rows[first]


@dataclass(frozen=True)
class ItemChunks:
    """The chunks of some items of a layout, item after item: ``chunks[starts[i]:]`` up to
    the next start are item i's (``starts`` None: one chunk each)."""

    present: npt.NDArray[np.bool_]
    """Which of the items asked for are in the layout."""
    chunks: Indices
    starts: Indices | None
    lengths: Indices | None

    @classmethod
    def of(cls, layout: Layout, positions: Indices) -> ItemChunks:
        """The chunks of the items at ``positions`` (-1: not in the layout)."""
        present = positions >= 0
        positions = positions[present]
        begin = layout.starts[positions]
        following = np.append(layout.starts, len(layout.chunks))
        lengths = following[positions + 1] - begin
        if lengths.size == 0 or bool((lengths == 1).all()):
            return cls(present, begin.astype(np.int64), None, None)
        starts = np.concatenate(([0], np.cumsum(lengths)[:-1])).astype(np.int64)
        offsets = np.arange(int(lengths.sum())) - np.repeat(starts, lengths)
        chunks = (np.repeat(begin, lengths) + offsets).astype(np.int64)
        return cls(present, chunks, starts, lengths.astype(np.int64))


def best_chunks(fused: Scores, items: ItemChunks) -> Indices:
    """Each item's best chunk under ``fused`` (its first on a tie)."""
    if items.starts is None or items.lengths is None:
        return items.chunks
    values = fused[items.chunks]
    best = np.maximum.reduceat(values, items.starts)
    at_best = np.flatnonzero(values == np.repeat(best, items.lengths))
    return items.chunks[at_best[np.searchsorted(at_best, items.starts)]]


def top_chunks(fused: Scores, pool: Indices, lifted: Indices, k: int) -> Indices:
    """The best ``k`` chunks among ``pool`` (the best ``k`` before a lift) and the chunks
    ``lifted``: nothing else was raised, so these are the best ``k`` of all."""
    mark = np.zeros(fused.size, dtype=np.bool_)
    mark[pool] = True
    candidates = np.concatenate((pool, lifted[~mark[lifted]]))
    if candidates.size <= k:
        return candidates
    cut = candidates.size - k
    return candidates[np.argpartition(fused[candidates], cut)[cut:]]


def leading_items(fused: Scores, pool: Indices, owner: Indices, count: int) -> list[int]:
    """The ``count`` best items (layout positions) among the chunks ``pool``, best first,
    skipping chunks left out by the search's mask."""
    order = pool[np.argsort(-fused[pool], kind="stable")]
    leaders: list[int] = []
    for chunk in order:
        if not np.isfinite(fused[chunk]):
            break
        item = int(owner[chunk])
        if item not in leaders:
            leaders.append(item)
            if len(leaders) == count:
                break
    return leaders


class ReachingItems:
    """The learned items scored wherever the cold ranking put them: their rows (ascending),
    their centroids as one contiguous matrix, and their chunks in the layout searched.

    A member's centroid is updated in place; a change of membership only marks the set
    stale, and it is rebuilt (in row order, so the same state always gives the same matrix)
    when a search next needs it."""

    def __init__(self) -> None:
        self.rows: Indices = np.zeros(0, dtype=np.int64)
        self.matrix: Scores = np.zeros((0, 0), dtype=np.float32)
        self._place: dict[int, int] = {}
        self._member = np.zeros(0, dtype=np.bool_)
        self._stale = True
        self._version = 0
        self._chunks: tuple[Layout | None, int, ItemChunks | None] = (None, -1, None)

    def update(self, row: int, member: bool, centroid: Scores) -> None:
        """Keep ``row`` in the set (with its new centroid) when ``member``, out otherwise."""
        place = self._place.get(row)
        if member != (place is not None):
            self._stale = True
        elif place is not None and not self._stale:
            self.matrix[place] = centroid

    def rebuild(self, members: Indices, centroids: Scores) -> None:
        """Hold exactly the rows ``members`` (ascending) with their ``centroids``."""
        self.rows = members
        self.matrix = np.ascontiguousarray(centroids, dtype=np.float32)
        self._place = {int(r): i for i, r in enumerate(members)}
        self._member = np.zeros(int(members.max()) + 1 if members.size else 0, dtype=np.bool_)
        self._member[members] = True
        self._stale = False
        self._version += 1

    @property
    def stale(self) -> bool:
        """Whether membership changed since the last rebuild."""
        return self._stale

    def outside(self, rows: Indices) -> npt.NDArray[np.bool_]:
        """Which of ``rows`` are not members."""
        inside = rows < self._member.size
        out = np.ones(rows.size, dtype=np.bool_)
        out[inside] = ~self._member[rows[inside]]
        return out

    def chunks(self, layout: Layout, position_of_row: Indices) -> ItemChunks:
        """The members' chunks in ``layout`` (cached until the layout or the set changes)."""
        cached_layout, version, chunks = self._chunks
        if cached_layout is layout and version == self._version and chunks is not None:
            return chunks
        chunks = ItemChunks.of(layout, position_of_row[self.rows])
        self._chunks = (layout, self._version, chunks)
        return chunks
