"""Tools within reach: the further candidates a request context names one line each.

A small embedder is good at "roughly here" and poor at "exactly this one", and a host's
model picks well among tools it knows exist. So beside the few tools a request context gives
in full, it names further candidates chosen to carry reach, each with the name to call it
by and what it does:

- ``server``: the other tools of the servers already chosen (real tasks use several tools of
  one server: create a document, add a paragraph, convert it);
- ``rank``: the next ranked tools;
- ``step``: the best tools of each planned step.

:func:`reach_pools` draws them from one ranking's arrays (no second search);
:func:`within_reach` picks among them within a token budget, at most ``per_server`` lines
from any one server, so a server with hundreds of tools cannot take the list over. Nothing is
named when the request selected no tool (an off-topic message lists no candidates).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Literal

import numpy as np
import numpy.typing as npt

from .index import Layout
from .items import ContextItem, ItemRef

__all__ = [
    "Candidate",
    "ReachSettings",
    "ReachSource",
    "brief_description",
    "candidate_line",
    "dominant_server",
    "reach_pools",
    "within_reach",
]

ReachSource = Literal["server", "rank", "step"]


@dataclass(frozen=True)
class ReachSettings:
    """How many further candidates a request context names, and how they are chosen."""

    tokens: int = 1200
    """Budget of the candidate lines, in estimated tokens (0: no candidates)."""
    per_server: int = 8
    """At most this many candidate lines from one server."""
    ranked: int = 20
    """The next ranked tools considered."""
    per_step: int = 2
    """The best tools of each planned step considered."""
    min_score: float = 0.15
    """Ranked and step candidates scoring below this are not named."""
    directory_tokens: int = 400
    """A conversation's first text names every tool by server, one line per server, when
    that directory costs at most this many tokens (a small catalog; 0: never)."""
    min_best: float = 0.30
    """Candidates are named only when the best tool given in full scores at least this: an
    off-topic message's best tools score lower (measured on the development sets), and it
    gets no list of guesses."""
    line_chars: int = 90
    """What a line says of a tool: the start of its description, at most this long."""


@dataclass(frozen=True)
class Candidate:
    """A tool within reach: its score for the request and where it came from."""

    ref: ItemRef
    score: float
    source: ReachSource
    step: int | None = None
    uncapped: bool = False
    """Of a server that holds nearly every tool: no per-server cap applies to it."""


DOMINANT_SHARE = 0.9
"""A server holding at least this share of a catalog's tools is the catalog (one API behind
one server): the per-server cap does not apply to it."""
_LINE_TOKENS = 20  # about what one candidate line costs


def dominant_server(layout: Layout) -> str | None:
    """The server holding at least :data:`DOMINANT_SHARE` of the layout's tools, if any."""
    servers = layout.servers[layout.types == "tool"]
    if servers.size == 0:
        return None
    names, counts = np.unique(servers, return_counts=True)
    top = int(np.argmax(counts))
    return str(names[top]) if counts[top] >= DOMINANT_SHARE * servers.size else None


def reach_pools(
    layout: Layout,
    order: npt.NDArray[np.float32],
    shown: npt.NDArray[np.float32],
    steps: npt.NDArray[np.float32] | None,
    chosen: Sequence[tuple[ItemRef, float]],
    settings: ReachSettings,
) -> list[Candidate]:
    """The candidates of one ranking, best source first: each step's best, then the other
    tools of the chosen tools' servers and the next ranked, by score.

    ``order`` and ``shown`` are the per-chunk scores the items are ordered by and shown
    with (-inf: left out of this search), ``steps`` the per-chunk score of each planned
    step (one column each), ``chosen`` the items the request context gives in full, with
    their scores."""
    tools_chosen = [(r, score) for r, score in chosen if r.type == "tool"]
    top = max((score for _, score in tools_chosen), default=0.0)
    if settings.tokens <= 0 or top < settings.min_best or not layout.refs:
        return []
    servers = {r.server for r, _ in tools_chosen}
    item_order = np.maximum.reduceat(order, layout.starts)
    item_shown = np.maximum.reduceat(shown, layout.starts)
    taken = {layout.position[r] for r, _ in chosen if r in layout.position}
    tools = (layout.types == "tool") & np.isfinite(item_order)
    if taken:
        tools[list(taken)] = False
    out: list[Candidate] = []
    if steps is not None:
        for step in range(steps.shape[1]):
            per_item = np.maximum.reduceat(steps[:, step], layout.starts)
            best = _best(per_item, tools & (per_item >= settings.min_score), settings.per_step)
            out += [Candidate(layout.refs[i], float(per_item[i]), "step", step) for i in best]
    siblings = tools & np.isin(layout.servers, sorted(s or "" for s in servers))
    dominant = dominant_server(layout)
    count = settings.per_server * len(servers)
    if dominant is not None and dominant in servers:  # the budget, not the cap, bounds it
        count = max(count, settings.tokens // _LINE_TOKENS)
    near = _best(item_order, siblings, count)
    ranked = _best(item_order, tools & (item_shown >= settings.min_score), settings.ranked)
    merged = [(i, "server") for i in near] + [(i, "rank") for i in ranked if i not in near]
    merged.sort(key=lambda pair: -float(item_order[pair[0]]))
    out += [Candidate(layout.refs[i], float(item_shown[i]), src) for i, src in merged]  # type: ignore[arg-type]
    if dominant is None:
        return out
    return [replace(c, uncapped=c.ref.server == dominant) for c in out]


def _best(scores: npt.NDArray[np.float32], allowed: npt.NDArray[np.bool_], count: int) -> list[int]:
    """The ``count`` best allowed positions of ``scores``, best first."""
    where = np.flatnonzero(allowed)
    if count <= 0 or where.size == 0:
        return []
    if where.size > count:
        where = where[np.argpartition(-scores[where], count - 1)[:count]]
    return [int(i) for i in where[np.argsort(-scores[where], kind="stable")]]


@functools.lru_cache(maxsize=4096)
def brief_description(text: str, max_chars: int) -> str:
    """The start of a description: its first sentence or line, at most ``max_chars`` (kept
    for the catalog's descriptions: every request prices its candidates' lines)."""
    flat = " ".join(text.split())
    for stop in (". ", "; ", "\n"):
        head, found, _ = flat.partition(stop)
        if found and len(head) >= 20:
            flat = head + ("." if stop == ". " else "")
            break
    if len(flat) <= max_chars:
        return flat
    cut = flat[: max_chars - 1].rsplit(" ", 1)[0]
    return cut + "…"


def candidate_line(heading: str, item: ContextItem | None, max_chars: int) -> str:
    """One candidate as a model reads it: ``- <heading>: <what it does>``."""
    what = brief_description(item.description, max_chars) if item is not None else ""
    return f"- {heading}: {what}" if what else f"- {heading}"


def within_reach(
    pools: Sequence[Candidate],
    cost: Callable[[Candidate], int],
    settings: ReachSettings,
    held: Sequence[ItemRef] = (),
) -> list[Candidate]:
    """The candidates to name, in ``pools``' order: each once, none of ``held`` (already in
    the request context), at most ``settings.per_server`` per server, within
    ``settings.tokens`` as ``cost`` counts a line. Then, with what budget is left, the
    candidates of a server that holds nearly every tool (``uncapped``) past that cap: the
    other servers keep their places first."""
    budget = settings.tokens
    seen = set(held)
    per_server: dict[str | None, int] = {}
    out: list[Candidate] = []
    overflow: list[Candidate] = []
    for candidate in pools:
        ref = candidate.ref
        if ref in seen:
            continue
        if per_server.get(ref.server, 0) >= settings.per_server:
            if candidate.uncapped:
                overflow.append(candidate)
            continue
        price = cost(candidate)
        if price > budget:
            return out
        budget -= price
        seen.add(ref)
        per_server[ref.server] = per_server.get(ref.server, 0) + 1
        out.append(candidate)
    for candidate in overflow:
        if candidate.ref in seen:
            continue
        price = cost(candidate)
        if price > budget:
            break
        budget -= price
        seen.add(candidate.ref)
        out.append(candidate)
    return out
