"""Learning from usage: quality with MetaTool's usage log, the learning curve, and its cost.

    .venv/bin/python benchmarks/learning.py [--skip-quality] [--skip-cost] [--tune]

(a) nDCG@10 on queries-single.jsonl and queries-multi.jsonl without a learner, with an empty
    learner, and after learning usage-log.jsonl (5,997 logged requests disjoint from both query
    files; the test queries are never learned). Targets: 0.90 single; no log equal to no
    learner.
(b) The learning curve: nDCG@10 after the first 0 / 100 / 500 / 1,000 / 3,000 / all logged
    requests, as a table and as benchmarks/out/learning-curve.png.
(c) A second split, reported on its own: queries-multi.jsonl shuffled (seed 0), its first half
    learned as a usage log (each line's two gold tools used for one turn, so they are also
    companions), nDCG@10 on the other half, cold and learned, and learned without companions.
(d) Search p50 at 10,000 chunks with 10,000 learned requests (in turns of one to three items)
    against the same engine without a learner (query embedding excluded, random unit vectors as
    in search_latency.py); the p50 of recording one usage event (``UsageRecorder.record_usage``,
    vector already known) with the in-memory and the SQLite store; bytes per learned request.

``--tune`` prints the figures the defaults were chosen from, measured on splits of the logs
only (never on the test queries): ``reach_evidence`` on usage-log.jsonl (the first 80% after a
seeded shuffle learned, in prefixes of 300 / 1,000 / all, the rest as queries) and
``companion_weight`` on the learned half of (c) (its first half learned, the second as queries).

Needs the prepared model for (a) and (b); the log's embeddings are cached in benchmarks/out/.
"""

from __future__ import annotations

import argparse
import json
import random
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
from _common import ROOT, SHARED, median
from context_broker.server.embedding import build_embedder
from context_broker.server.settings import AppConfig
from search_latency import RandomEmbedder, synthetic_tools

from contextcore.catalog import Catalog
from contextcore.embedding import Embedder, Vectors
from contextcore.items import ItemRef
from contextcore.learning import LearningSettings, UsageLearner
from contextcore.loaders import load_catalog_json
from contextcore.memory_store import MemorySessionStore
from contextcore.metrics import ndcg_at
from contextcore.search import SearchEngine
from contextcore.services.broker import ContextBroker
from contextcore.services.evaluation import EvalQuery, load_queries
from contextcore.store import SessionStore
from contextcore.usage import read_usage_log

META = SHARED / "metatool"
OUT = ROOT / "benchmarks" / "out"
SIZES = (0, 100, 500, 1000, 3000)


def _vectors(embedder: Embedder, name: str, texts: list[str]) -> Vectors:
    """Embeddings of ``texts``, cached in benchmarks/out/ between runs."""
    path = OUT / f"learning-{name}-{len(texts)}.npy"
    if path.exists():
        return np.load(path)
    start = time.perf_counter()
    vectors = embedder.embed(texts)
    print(f"  embedded {len(texts)} {name} texts in {time.perf_counter() - start:.0f} s")
    OUT.mkdir(exist_ok=True)
    np.save(path, vectors)
    return vectors


def _ndcg(engine: SearchEngine, queries: list[EvalQuery], vectors: Vectors) -> float:
    total = 0.0
    for query, vector in zip(queries, vectors, strict=True):
        hits = engine.search(
            query.query, top_n=10, top_k=100_000, apply_include_score=False, query_vector=vector
        ).hits
        total += ndcg_at([h.ref.key for h in hits], set(query.gold), 10)
    return total / len(queries)


Log = list[tuple[str, list[ItemRef]]]


def _learner(
    log: Log, vectors: Vectors, count: int, settings: LearningSettings | None = None
) -> UsageLearner:
    """A learner taught the first ``count`` lines of ``log``, each line one turn."""
    learner = UsageLearner(settings)
    for line, ((_, refs), vector) in enumerate(zip(log[:count], vectors[:count], strict=True)):
        for ref in refs:
            learner.learn(ref, vector, session_id="usage-log", at=0.0, turn=line)
    return learner


def _as_log(queries: list[EvalQuery]) -> Log:
    return [(q.query, [ItemRef.parse(k) for k in sorted(q.gold)]) for q in queries]


def _as_queries(log: Log) -> list[EvalQuery]:
    return [EvalQuery(q, frozenset(r.key for r in refs)) for q, refs in log]


def _shuffled(count: int, seed: int = 0) -> list[int]:
    order = list(range(count))
    random.Random(seed).shuffle(order)
    return order


def _multi_split(queries: list[EvalQuery], vectors: Vectors) -> tuple[Log, Vectors, Vectors]:
    """queries-multi shuffled (seed 0): the first half as a log, the rest to test."""
    order = _shuffled(len(queries))
    half = len(order) // 2
    learned, tested = order[:half], order[half:]
    return _as_log([queries[i] for i in learned]), vectors[learned], vectors[tested]


def quality() -> None:
    embedder = build_embedder(AppConfig())
    assert embedder is not None
    engine = SearchEngine(Catalog(load_catalog_json(META / "catalog.json")), embedder)
    engine.index()
    log = read_usage_log(META / "usage-log.jsonl")
    log_vectors = _vectors(embedder, "usage-log", [q for q, _ in log])
    sets = {}
    for name in ("single", "multi"):
        queries = load_queries(META / f"queries-{name}.jsonl")
        sets[name] = (queries, _vectors(embedder, f"queries-{name}", [q.query for q in queries]))
    sizes = [*SIZES, len(log)]
    curve: dict[str, list[float]] = {name: [] for name in sets}
    engine.learner = None
    plain = {name: _ndcg(engine, q, v) for name, (q, v) in sets.items()}
    engine.learner = UsageLearner()
    empty = {name: _ndcg(engine, q, v) for name, (q, v) in sets.items()}
    for size in sizes:
        engine.learner = _learner(log, log_vectors, size)
        for name, (queries, vectors) in sets.items():
            curve[name].append(_ndcg(engine, queries, vectors))
    print("nDCG@10            single   multi")
    print(f"no learner         {plain['single']:.4f}  {plain['multi']:.4f}")
    print(f"empty learner      {empty['single']:.4f}  {empty['multi']:.4f}")
    print(f"usage-log (all)    {curve['single'][-1]:.4f}  {curve['multi'][-1]:.4f}")
    print("\nlearning curve: logged requests -> nDCG@10 single / multi")
    for i, size in enumerate(sizes):
        print(f"  {size:>5}  {curve['single'][i]:.4f}  {curve['multi'][i]:.4f}")
    _plot(sizes, curve)
    split = multi_split(engine, *sets["multi"])
    (OUT / "learning.json").write_text(
        json.dumps(
            {"plain": plain, "empty": empty, "sizes": sizes, "curve": curve, "split": split},
            indent=1,
        )
    )


def multi_split(
    engine: SearchEngine, queries: list[EvalQuery], vectors: Vectors
) -> dict[str, float]:
    """(c): half of queries-multi learned as a log, nDCG@10 on the other half."""
    log, log_vectors, test_vectors = _multi_split(queries, vectors)
    order = _shuffled(len(queries))
    tested = [queries[i] for i in order[len(order) // 2 :]]
    engine.learner = None
    figures = {"cold": _ndcg(engine, tested, test_vectors)}
    engine.learner = _learner(log, log_vectors, len(log), LearningSettings(companion_weight=0))
    figures["learned, no companions"] = _ndcg(engine, tested, test_vectors)
    engine.learner = _learner(log, log_vectors, len(log))
    figures["learned"] = _ndcg(engine, tested, test_vectors)
    print(f"\nqueries-multi split: {len(log)} learned, {len(tested)} tested (nDCG@10)")
    for name, value in figures.items():
        print(f"  {name:24} {value:.4f}")
    return figures


def tune() -> None:
    """The figures the defaults were chosen from, on splits of the logs only."""
    embedder = build_embedder(AppConfig())
    assert embedder is not None
    engine = SearchEngine(Catalog(load_catalog_json(META / "catalog.json")), embedder)
    engine.index()
    log = read_usage_log(META / "usage-log.jsonl")
    log_vectors = _vectors(embedder, "usage-log", [q for q, _ in log])
    order = _shuffled(len(log))
    cut = len(order) * 4 // 5
    learn_log = [log[i] for i in order[:cut]]
    learn_vectors = log_vectors[order[:cut]]
    held = _as_queries([log[i] for i in order[cut:]])
    held_vectors = log_vectors[order[cut:]]
    print("usage-log: learned prefix, reach_evidence -> nDCG@10 on the held-out 20% of the log")
    for count in (300, 1000, len(learn_log)):
        row = []
        for reach in (1, 2, 3, 5, 10**9):
            settings = LearningSettings(reach_evidence=reach)
            engine.learner = _learner(learn_log, learn_vectors, count, settings)
            row.append(
                f"{reach if reach < 10**9 else 'never'}: {_ndcg(engine, held, held_vectors):.4f}"
            )
        print(f"  {count:>5}  " + "  ".join(row))
    multi = load_queries(META / "queries-multi.jsonl")
    multi_vectors = _vectors(embedder, "queries-multi", [q.query for q in multi])
    half, half_vectors, _ = _multi_split(multi, multi_vectors)
    quarter = len(half) // 2
    inner = _as_queries(half[quarter:])
    print("queries-multi learned half: companion_weight -> nDCG@10 (first half learned)")
    row = []
    for weight in (0.0, 0.25, 0.5, 1.0, 1.5, 2.0):
        settings = LearningSettings(companion_weight=weight)
        engine.learner = _learner(half, half_vectors, quarter, settings)
        row.append(f"{weight}: {_ndcg(engine, inner, half_vectors[quarter:]):.4f}")
    print("  " + "  ".join(row))


def _plot(sizes: list[int], curve: dict[str, list[float]]) -> None:
    try:
        import matplotlib
    except ImportError:
        print("  (no plot: matplotlib is not installed)")
        return

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 3.5), dpi=80)
    for name, values in curve.items():
        ax.plot(sizes, values, marker="o", label=f"queries-{name}")
    ax.set_xlabel("logged requests learned")
    ax.set_ylabel("nDCG@10")
    ax.set_title("MetaTool: learning from usage-log.jsonl")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    OUT.mkdir(exist_ok=True)
    fig.savefig(OUT / "learning-curve.png")
    print(f"  plot: {OUT / 'learning-curve.png'}")


def search_cost(queries: int = 300) -> None:
    registry = load_catalog_json(SHARED / "mcp-registry" / "catalog.json")
    vocabulary = sorted({w for t in registry for w in t.description.split() if w.isalpha()})
    rng = random.Random(0)
    engine = SearchEngine(
        Catalog(synthetic_tools(10_000, vocabulary, rng)), RandomEmbedder(), learner=None
    )
    engine.index()
    refs = engine._index.layout().refs
    texts = [" ".join(rng.choices(vocabulary, k=rng.randint(5, 15))) for _ in range(queries)]
    vectors = RandomEmbedder().embed(texts)
    learner = UsageLearner()
    learned = RandomEmbedder().embed([f"request {i}" for i in range(10_000)])
    turn = 0
    for vector in learned:
        turn += rng.random() < 0.5  # turns of one to a few items: their items are companions
        ref = refs[rng.randrange(len(refs))]
        learner.learn(ref, vector, session_id=f"s{turn % 100}", at=0.0, turn=turn)
    wall: dict[str, list[float]] = {"without": [], "with": []}
    cpu: dict[str, list[float]] = {"without": [], "with": []}
    runs = (("without", None), ("with", learner))
    for round_ in range(3):
        for i, (text, vector) in enumerate(zip(texts, vectors, strict=True)):
            # Each query with and without, in alternating order, so both see the same load.
            for label, value in runs if (i + round_) % 2 else runs[::-1]:
                engine.learner = value
                start, start_cpu = time.perf_counter(), time.thread_time()
                engine.search(text, query_vector=vector, top_k=20, top_n=5)
                cpu[label].append(time.thread_time() - start_cpu)
                wall[label].append(time.perf_counter() - start)
    reaching = learner._reaching().rows.size
    print(
        f"\nsearch p50 at 10,000 chunks, 10,000 learned requests over {len(learner.items())} "
        f"items ({reaching} with at least reach_evidence requests), {turn} turns"
    )
    for name, timings in (("wall", wall), ("CPU", cpu)):
        without, with_ = median(timings["without"]) * 1000, median(timings["with"]) * 1000
        print(
            f"  {name:4} without learning {without:.3f} ms, with {with_:.3f} ms: "
            f"{with_ / without:.2f}x"
        )
    layout = engine._index.layout()
    fused = np.zeros(len(layout.chunks), dtype=np.float32)
    term = []
    for text, vector in zip(texts, vectors, strict=True):
        fused[:] = layout.matrix @ vector if layout.matrix is not None else 0.0
        start_cpu = time.thread_time()
        learner.adjust(text, vector, fused, layout)
        term.append(time.thread_time() - start_cpu)
    print(f"  the learned term alone (UsageLearner.adjust): {median(term) * 1e6:.0f} us CPU p50")
    per = learner.memory_bytes() / learner.learned
    print(f"  learner memory {learner.memory_bytes() / 1e6:.1f} MB: {per:.0f} bytes per request")


def record_cost(events: int = 300) -> None:
    """record_usage p50 per store, and its parts: the learner update alone, and the store's
    append alone (with SQLite in WAL mode and synchronous=FULL, one fsync per commit)."""
    from context_broker.server.stores.sqlite import SqliteSessionStore

    with tempfile.TemporaryDirectory() as tmp:
        stores: dict[str, SessionStore] = {
            "memory": MemorySessionStore(),
            "sqlite": SqliteSessionStore(Path(tmp) / "sessions.db"),
        }
        for label, store in stores.items():
            # Agent tools, so a turn selects a few of them (top_n) as a real one does.
            tools = synthetic_tools(200, ["alpha", "beta", "gamma"], random.Random(1))
            catalog = Catalog([replace(t, include="agent") for t in tools])
            learner = UsageLearner()
            engine = SearchEngine(catalog, RandomEmbedder(), learner=learner)
            broker = ContextBroker(catalog, engine, store=store)
            sid = broker.create_session().session_id
            turn = broker.build_request_context(sid, "alpha beta request")
            keys = [f"tool:s{i % 50}/tool_{i}" for i in range(3)]
            timings = []
            for i in range(events):
                start = time.perf_counter()
                # As the record_usage tool does: the turn, then the event.
                found = broker.request(sid, turn.request_id)
                broker.usage.record_usage(found, [keys[i % 3]])
                timings.append(time.perf_counter() - start)
            event = store.usage_events(sid)[-1]
            appends = []
            for _ in range(events):
                start = time.perf_counter()
                store.append_usage_event(sid, event)
                appends.append(time.perf_counter() - start)
            vector = RandomEmbedder().embed(["alpha beta request"])[0]
            ref = ItemRef.parse(keys[0])
            updates = []
            for _ in range(events):
                start = time.perf_counter()
                learner.learn(ref, vector, session_id=sid)
                updates.append(time.perf_counter() - start)
            print(
                f"record_usage p50 ({label} store): {median(timings) * 1000:.3f} ms; the store's "
                f"append alone {median(appends) * 1000:.3f} ms, the learner update alone "
                f"{median(updates) * 1e6:.0f} us; one stored event {len(json.dumps(event))} bytes"
            )
            store.close()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--skip-quality", action="store_true")
    parser.add_argument("--skip-cost", action="store_true")
    parser.add_argument("--tune", action="store_true")
    args = parser.parse_args()
    if args.tune:
        tune()
        return
    if not args.skip_quality:
        quality()
    if not args.skip_cost:
        search_cost()
        record_cost()


if __name__ == "__main__":
    main()
