"""`context-broker learn --log`, `forget [--session]` and `eval --usage-log` as real
subprocesses on small files: what a log teaches changes the ranking, forgetting restores it,
and eval measures with the log only."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from context_broker.server.host.mcp_server import build_server
from context_broker.server.parts import build_parts
from context_broker.server.settings import load_config
from context_broker.server.stores.sqlite import SqliteSessionStore
from mcp import Client

BROKER = str(Path(sys.executable).parent / "context-broker")
QUERY = "Put together some calm songs for my evening"
LISTS = "Organise anything into tidy lists you can share with friends."
RADIO = "Listen to live radio stations from around the world."
RECIPES = "Find recipes by ingredient and cooking time."
LOG = [
    ("Make me a relaxing playlist for after work", "{lists}"),
    ("I need a mellow music playlist to unwind", "{lists}"),
    ("soothing songs for a long drive", "{lists}"),
]


def run(*args: str | Path, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [BROKER, *map(str, args)], capture_output=True, text=True, timeout=120, check=check
    )


def write_log(path: Path, key: str) -> Path:
    lines = [json.dumps({"query": q, "called": [k.format(lists=key)]}) for q, k in LOG]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def write_config(tmp_path: Path, backend: str = "sqlite") -> Path:
    rules = "".join(
        f'\n[[rules]]\nname = "{name}"\ndescription = "{text}"\ntext = "{text}"\n'
        'include = "agent"\n'
        for name, text in (("lists", LISTS), ("radio", RADIO), ("recipes", RECIPES))
    )
    # The query adapter alone already brings "lists" up for QUERY: switched off here, so what
    # the log teaches is measured against a cold ranking that misses it.
    search = "[search]\nquery_adapter = false\n"
    path = tmp_path / "broker.toml"
    path.write_text(
        f'{search}[persistence]\nbackend = "{backend}"\npath = "sessions.db"\n{rules}',
        encoding="utf-8",
    )
    return path


async def ranking(path: Path) -> list[tuple[str, float]]:
    """The ranking for QUERY of a broker started from the config (what it learned from the
    store included), through search_context_items."""
    config = load_config(path, environ={})
    store = SqliteSessionStore(config.resolve(Path("sessions.db")))
    try:
        parts = build_parts(config, store=store)
        async with Client(build_server(parts.broker)) as client:
            with anyio.fail_after(60):
                result = await client.call_tool("search_context_items", {"query": QUERY})
        assert not result.is_error, result.content
        found: dict[str, Any] = result.structured_content  # type: ignore[assignment]
        return [(h["key"], h["similarity_score"]) for h in found["items"]]
    finally:
        store.close()


def learned_session(out: str) -> str:
    match = re.search(r"as session (\S+);", out)
    assert match, out
    return match.group(1)


@pytest.mark.model
async def test_learn_lifts_the_logged_item_and_forget_restores_the_cold_ranking(
    tmp_path: Path,
) -> None:
    path = write_config(tmp_path)
    log = write_log(tmp_path / "usage.jsonl", "rule:lists")
    cold = await ranking(path)
    assert cold[0][0] == "rule:radio"

    first = learned_session(run("learn", "--config", path, "--log", log).stdout)
    learned = await ranking(path)
    assert learned[0][0] == "rule:lists"
    second = learned_session(run("learn", "--config", path, "--log", log).stdout)
    assert second != first

    out = run("forget", "--config", path, "--session", first).stdout
    assert f"forgot 3 usage event(s) of session {first}" in out
    assert (await ranking(path))[0][0] == "rule:lists"  # the second import still counts
    out = run("forget", "--config", path).stdout
    assert "forgot 3 usage event(s) of all sessions" in out
    assert await ranking(path) == cold


@pytest.mark.model
def test_eval_with_a_usage_log_scores_higher_than_without(tmp_path: Path) -> None:
    catalog = {
        "servers": {
            "tunes": {
                "tools": [
                    {"name": "WhizList", "description": LISTS},
                    {"name": "RadioNow", "description": RADIO},
                ]
            },
            "food": {"tools": [{"name": "Recipes", "description": RECIPES}]},
        }
    }
    (tmp_path / "catalog.json").write_text(json.dumps(catalog), encoding="utf-8")
    queries = tmp_path / "queries.jsonl"
    gold = ["tool:tunes/WhizList"]
    queries.write_text(
        json.dumps({"query": QUERY, "gold": gold})
        + "\n"
        + json.dumps({"query": "I want a chill music playlist for studying", "gold": gold})
        + "\n",
        encoding="utf-8",
    )
    log = write_log(tmp_path / "usage.jsonl", "tool:tunes/WhizList")
    # The plain hybrid retriever: the served query adapter alone finds this query's item.
    base = ["eval", "--catalog", tmp_path / "catalog.json", "--queries", queries, "--json"]
    base += ["--mode", "hybrid"]
    without = json.loads(run(*base, "--quiet").stdout)["metrics"]
    learned = run(*base, "--usage-log", log)
    with_log = json.loads(learned.stdout)["metrics"]
    assert "learned from 3 logged request(s)" in learned.stderr
    assert without["recall@1"] == 0.0 and with_log["recall@1"] == 1.0
    assert with_log["ndcg@10"] > without["ndcg@10"]


def test_learn_and_forget_explain_what_is_wrong(tmp_path: Path) -> None:
    path = write_config(tmp_path)
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"query": "hello", "called": ["tool:a/b"]}\n{"called": []}\n', "utf-8")
    failed = run("learn", "--config", path, "--log", bad, check=False)
    assert failed.returncode == 2 and f"{bad}:2" in failed.stderr
    missing = run("learn", "--config", path, "--log", tmp_path / "none.jsonl", check=False)
    assert missing.returncode == 2 and "none.jsonl" in missing.stderr
    unknown = run("forget", "--config", path, "--session", "s_" + "0" * 32, check=False)
    assert unknown.returncode == 2 and "s_" + "0" * 32 in unknown.stderr
    (tmp_path / "m").mkdir()
    memory = run("forget", "--config", write_config(tmp_path / "m", "memory"), check=False)
    assert memory.returncode == 2 and "in memory only" in memory.stderr
