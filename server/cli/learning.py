"""``context-broker learn``, ``forget`` and ``eval --usage-log``: learning from usage at the
command line."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from context_broker.server.parts import AppParts as Parts
from context_broker.server.parts import build_parts
from context_broker.server.settings import AppConfig, load_config

from contextcore.factory import build_learner
from contextcore.learning import LearningSettings, UsageLearner
from contextcore.search import SearchEngine
from contextcore.usage import read_usage_log

__all__ = ["add_parsers", "cmd_forget", "cmd_learn", "learn_from_log"]


def add_parsers(sub: Any, common: argparse.ArgumentParser, add_config: Any) -> None:
    """The ``learn`` and ``forget`` subcommands."""
    learn = sub.add_parser(
        "learn",
        help="import a usage log into the learned state kept in the session store",
        parents=[common],
    )
    add_config(learn)
    learn.add_argument(
        "--log", type=Path, required=True, help='JSONL: {"query": ..., "called": [keys]}'
    )
    forget = sub.add_parser(
        "forget", help="delete recorded usage and what was learned from it", parents=[common]
    )
    add_config(forget)
    forget.add_argument("--session", default=None, help="one session id (default: all)")


def _persistent_parts(config: AppConfig, *, embedder: bool) -> Parts | None:
    from ..stores import build_store

    if config.persistence.backend == "memory":
        print(
            "context-broker: sessions are kept in memory only ([persistence] backend = "
            '"memory"), so nothing learned would be kept; use backend = "sqlite"',
            file=sys.stderr,
        )
        return None
    return build_parts(config, store=build_store(config), use_config_embedder=embedder)


def cmd_learn(args: argparse.Namespace) -> int:
    config = load_config(args.config)
    rows = read_usage_log(args.log)
    parts = _persistent_parts(config, embedder=True)
    if parts is None:
        return 2
    session = parts.broker.create_session(agent=f"usage log {args.log.name}")
    count = parts.broker.usage.import_log(rows, session.session_id)
    print(
        f"learned {count} request(s) from {args.log} as session {session.session_id}; "
        f"context-broker forget --session {session.session_id} removes them"
    )
    return 0


def cmd_forget(args: argparse.Namespace) -> int:
    config = load_config(args.config)
    parts = _persistent_parts(config, embedder=False)
    if parts is None:
        return 2
    if args.session is not None:
        parts.broker.require_session(args.session)
    result = parts.broker.usage.forget(args.session)
    scope = f"session {args.session}" if args.session else "all sessions"
    print(f"forgot {result.events} usage event(s) of {scope}")
    return 0


def learn_from_log(engine: SearchEngine, path: Path, config: AppConfig | None = None) -> int:
    """Give ``engine`` a fresh learner taught by the log at ``path`` only; returns the
    requests learned."""
    rows = read_usage_log(path)
    learner = (build_learner(config) if config is not None else None) or UsageLearner(
        LearningSettings()
    )
    engine.learner = learner
    vectors = engine.embed_queries([q for q, _ in rows])
    if vectors is None:
        return 0
    for (_, refs), vector in zip(rows, vectors, strict=True):
        for ref in refs:
            learner.learn(ref, vector, session_id="usage-log", at=0.0)
    return len(rows)
