"""Train the query adapter: a 384 x 384 map ``W`` on query embeddings, ``q' = normalize(W q)``.

    .venv/bin/python -m benchmarks.query_adapter.train --pairs OUT [--cache FILE]
        [--write contextcore/data/query_adapter.npy] [--leave-out SOURCE]

``OUT`` is the folder ``pairs.py`` wrote. Loss: InfoNCE over in-batch negatives (a query's
other gold tools are not counted as negatives) plus ``penalty * ||W - I||^2``, which keeps the
map near the identity so what the model already ranks well stays ranked; Adam, plain numpy.

Choosing: 15% of each source's tools are held out, with every query that calls one of them;
temperature, penalty and epochs are those with the best mean nDCG@10 of those queries against
their source's whole tool pool. The written file is then trained on every pair with that
choice. ``--leave-out SOURCE`` trains (and chooses) without that source at all and reports its
queries against its own pool with and without the map: data it was not tuned on. No
development set of the broker (MetaTool, mcp-bench) is read here.
"""

from __future__ import annotations

import argparse
import itertools
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt

from benchmarks.query_adapter._data import (
    DEFAULT_CACHE,
    CachedEmbedder,
    Matrix,
    Pairs,
    chunk_matrix,
    load_pairs,
    mean_ndcg,
    tool_chunks,
)

TEMPERATURES = (0.03, 0.05, 0.1)
PENALTIES = (0.001, 0.003, 0.01, 0.1)
MAX_EPOCHS = 12
BATCH = 256
LEARNING_RATE = 1e-3
HELD_OUT_TOOLS = 0.15

Queries = npt.NDArray[np.int64]


@dataclass(frozen=True)
class Pool:
    """One source's tools as a ranking sees them: chunk vectors, each chunk's tool, tool ids."""

    chunks: Matrix
    owner: npt.NDArray[np.int64]
    ids: list[str]


@dataclass(frozen=True)
class Embedded:
    """The pairs with their vectors: queries, each tool's first chunk (what training pulls
    toward), and each source's pool (what a ranking scores, best chunk per tool)."""

    pairs: Pairs
    queries: Matrix
    first_chunks: Matrix
    pools: dict[str, Pool]


@dataclass(frozen=True)
class Choice:
    temperature: float
    penalty: float
    epochs: int
    score: float


def embed_pairs(pairs: Pairs, embedder: CachedEmbedder) -> Embedded:
    texts = zip(pairs.tool_ids, pairs.tool_texts, strict=True)
    chunks, owner = chunk_matrix(embedder, [tool_chunks(i, t) for i, t in texts])
    first = np.flatnonzero(np.r_[True, owner[1:] != owner[:-1]])
    sources = np.array(pairs.tool_sources)
    pools = {}
    for source in sorted(set(pairs.tool_sources)):
        keep = sources[owner] == source
        # Tools of a source are contiguous in the pair file: renumber their chunks from 0.
        local = np.cumsum(np.r_[True, np.diff(owner[keep]) != 0]) - 1
        ids = [i for i, s in zip(pairs.tool_ids, pairs.tool_sources, strict=True) if s == source]
        pools[source] = Pool(chunks[keep], local, ids)
    return Embedded(pairs, embedder.embed(pairs.query_texts), chunks[first], pools)


def pair_index(data: Embedded, queries: Queries) -> npt.NDArray[np.int64]:
    """``(n, 2)`` rows of (query, tool) for every gold tool of the given queries."""
    position = {tool_id: i for i, tool_id in enumerate(data.pairs.tool_ids)}
    rows = [(q, position[t]) for q in queries for t in sorted(data.pairs.query_gold[q])]
    return np.array(rows, dtype=np.int64).reshape(-1, 2)


def step_gradient(
    w: Matrix, q: Matrix, t: Matrix, same: npt.NDArray[np.bool_], temperature: float
) -> tuple[float, Matrix]:
    """InfoNCE loss of a batch and its gradient in ``W`` (``same``: off-diagonal pairs whose
    tool is a gold tool of the row's query, left out of the negatives)."""
    u = q @ w.T
    norm = np.linalg.norm(u, axis=1, keepdims=True)
    qn = u / norm
    logits = qn @ t.T / temperature
    logits[same] = -np.inf
    logits -= logits.max(axis=1, keepdims=True)
    p = np.exp(logits)
    p /= p.sum(axis=1, keepdims=True)
    n = len(q)
    loss = -float(np.mean(np.log(np.diagonal(p) + 1e-12)))
    d_logits = (p - np.eye(n, dtype=np.float32)) / n
    d_qn = d_logits @ t / temperature
    d_u = (d_qn - qn * np.sum(qn * d_qn, axis=1, keepdims=True)) / norm
    return loss, (d_u.T @ q).astype(np.float32)


def train_epochs(
    data: Embedded,
    train_q: Queries,
    temperature: float,
    penalty: float,
    epochs: int,
    seed: int = 0,
) -> Iterator[Matrix]:
    """Yield ``W`` after each epoch of Adam over the training queries' pairs."""
    rng = np.random.default_rng(seed)
    pairs = pair_index(data, train_q)
    gold_keys = np.unique(pairs[:, 0] * len(data.pairs.tool_ids) + pairs[:, 1])
    dim = data.queries.shape[1]
    eye = np.eye(dim, dtype=np.float32)
    w, m, v = eye.copy(), np.zeros_like(eye), np.zeros_like(eye)
    b1, b2, step = 0.9, 0.999, 0
    for _ in range(epochs):
        for batch in np.array_split(rng.permutation(len(pairs)), max(1, len(pairs) // BATCH)):
            qi, ti = pairs[batch, 0], pairs[batch, 1]
            keys = qi[:, None] * len(data.pairs.tool_ids) + ti[None, :]
            same = np.isin(keys, gold_keys) & ~np.eye(len(batch), dtype=bool)
            _, grad = step_gradient(w, data.queries[qi], data.first_chunks[ti], same, temperature)
            grad += 2 * penalty * (w - eye)
            step += 1
            m = b1 * m + (1 - b1) * grad
            v = b2 * v + (1 - b2) * grad * grad
            m_hat, v_hat = m / (1 - b1**step), v / (1 - b2**step)
            w = w - LEARNING_RATE * m_hat / (np.sqrt(v_hat) + 1e-8)
        yield w


def apply(w: Matrix, q: Matrix) -> Matrix:
    u = q @ w.T
    out: Matrix = u / np.linalg.norm(u, axis=1, keepdims=True)
    return out


def score(data: Embedded, queries: Queries, w: Matrix | None) -> float:
    """Mean nDCG@10 of these queries, each against its own source's whole tool pool."""
    p = data.pairs
    total = 0.0
    for source, pool in data.pools.items():
        qs = queries[[p.query_sources[q] == source for q in queries]]
        if not len(qs):
            continue
        vectors = data.queries[qs] if w is None else apply(w, data.queries[qs])
        gold = [p.query_gold[q] for q in qs]
        total += mean_ndcg(vectors, gold, pool.chunks, pool.owner, pool.ids) * len(qs)
    return total / len(queries)


def split(data: Embedded, sources: set[str], seed: int = 0) -> tuple[Queries, Queries]:
    """Training and validation queries of ``sources``: validation is every query calling one
    of a random 15% of each source's tools."""
    rng = np.random.default_rng(seed)
    p = data.pairs
    held: set[str] = set()
    for source in sorted(sources):
        ids = [t for t, s in zip(p.tool_ids, p.tool_sources, strict=True) if s == source]
        held.update(rng.choice(ids, size=round(HELD_OUT_TOOLS * len(ids)), replace=False))
    in_sources = [q for q, s in enumerate(p.query_sources) if s in sources]
    val = np.array([q for q in in_sources if p.query_gold[q] & held], dtype=np.int64)
    train = np.array([q for q in in_sources if not p.query_gold[q] & held], dtype=np.int64)
    return train, val


def choose(data: Embedded, sources: set[str]) -> Choice:
    """The temperature, penalty and epoch count best on the held-out tools' queries."""
    train_q, val_q = split(data, sources)
    best = Choice(0.0, 0.0, 0, score(data, val_q, None))
    print(
        f"  choosing on {len(val_q)} held-out queries (train {len(train_q)}); "
        f"identity {best.score:.4f}",
        flush=True,
    )
    for temperature, penalty in itertools.product(TEMPERATURES, PENALTIES):
        runs = train_epochs(data, train_q, temperature, penalty, MAX_EPOCHS)
        scores = [score(data, val_q, w) for w in runs]
        epoch = int(np.argmax(scores))
        print(
            f"  t={temperature} penalty={penalty}: best {scores[epoch]:.4f} at epoch "
            f"{epoch + 1} (" + " ".join(f"{s:.3f}" for s in scores) + ")",
            flush=True,
        )
        if scores[epoch] > best.score:
            best = Choice(temperature, penalty, epoch + 1, scores[epoch])
    return best


def train_all(data: Embedded, sources: set[str], choice: Choice) -> Matrix:
    """``W`` trained with ``choice`` on every query of ``sources``."""
    queries = np.array(
        [q for q, s in enumerate(data.pairs.query_sources) if s in sources], dtype=np.int64
    )
    *_, w = train_epochs(data, queries, choice.temperature, choice.penalty, choice.epochs)
    return w


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", type=Path, required=True)
    parser.add_argument("--cache", type=Path, default=DEFAULT_CACHE)
    parser.add_argument("--write", type=Path, help="where to save W (float16 .npy)")
    parser.add_argument("--leave-out", help="a source to keep out of training and report on")
    args = parser.parse_args()
    args.cache.parent.mkdir(parents=True, exist_ok=True)
    data = embed_pairs(load_pairs(args.pairs), CachedEmbedder(args.cache))
    sources = set(data.pairs.query_sources) - {args.leave_out}
    choice = choose(data, sources)
    print(f"chosen: {choice}")
    if choice.epochs == 0:
        raise SystemExit("no setting beat the identity on the held-out tools; nothing written")
    w = train_all(data, sources, choice)
    if args.leave_out:
        queries = np.array(
            [q for q, s in enumerate(data.pairs.query_sources) if s == args.leave_out]
        )
        print(
            f"left out {args.leave_out} ({len(queries)} queries): nDCG@10 "
            f"{score(data, queries, None):.4f} -> {score(data, queries, w):.4f}"
        )
    if args.write:
        np.save(args.write, w.astype(np.float16))
        print(f"wrote {args.write} ({args.write.stat().st_size} bytes)")


if __name__ == "__main__":
    main()
