"""``context-broker eval`` as a person runs it: the report on stdout, progress on stderr,
the misses per query on request, and the sample query set shipped for the example agent."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest

from tests.support.broker_procs import BROKER, ROOT, server_env

EXAMPLE_QUERIES = ROOT / "examples" / "eval-queries.jsonl"
EXAMPLE_CONFIG = ROOT / "config.example.toml"


async def _eval(*args: str, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    """``context-broker eval ARGS`` from the repository root: (exit code, stdout, stderr)."""
    with anyio.fail_after(120):
        done = await anyio.run_process(
            [BROKER, "eval", *args], cwd=ROOT, env=env or server_env(), check=False
        )
    return done.returncode, done.stdout.decode(), done.stderr.decode()


def _files(folder: Path) -> tuple[str, str]:
    catalog = {
        "servers": {
            "time": {
                "tools": [
                    {"name": "get_current_time", "description": "Get the current time"},
                    {"name": "convert_time", "description": "Convert a time between timezones"},
                ]
            }
        }
    }
    (folder / "c.json").write_text(json.dumps(catalog), encoding="utf-8")
    queries = [
        {"query": "convert the time to another timezone", "gold": ["tool:time/convert_time"]},
        # A miss at 1: BM25 ranks get_current_time above the gold item for this one.
        {"query": "time in Tokyo", "gold": ["tool:time/convert_time"]},
    ]
    (folder / "q.jsonl").write_text("\n".join(json.dumps(q) for q in queries), encoding="utf-8")
    return str(folder / "c.json"), str(folder / "q.jsonl")


async def test_misses_lists_each_querys_gold_items_outside_its_top_k(tmp_path: Path) -> None:
    catalog, queries = _files(tmp_path)
    common = ("--catalog", catalog, "--queries", queries, "--mode", "lexical", "--k", "1,2")

    code, out, err = await _eval(*common, "--misses", "1", "--json")
    assert code == 0, err
    report = json.loads(out)
    assert report["misses_at"] == 1
    assert report["misses"] == [
        {
            "query": "time in Tokyo",
            "missing": {"tool:time/convert_time": 2},
            "top": ["tool:time/get_current_time"],
        }
    ]

    code, out, _ = await _eval(*common, "--misses", "1")
    assert code == 0
    assert "misses at 1: 1 of 2 queries" in out
    assert "'time in Tokyo'\n    missed tool:time/convert_time (rank 2)" in out
    assert "    top: tool:time/get_current_time" in out


async def test_without_misses_the_report_is_unchanged(tmp_path: Path) -> None:
    catalog, queries = _files(tmp_path)
    code, out, err = await _eval(
        "--catalog", catalog, "--queries", queries, "--mode", "lexical", "--json", "--quiet"
    )
    assert code == 0 and err == ""
    assert "misses" not in json.loads(out)


async def test_the_sample_queries_name_only_items_of_the_example_config() -> None:
    code, out, err = await _eval(
        "--config", str(EXAMPLE_CONFIG), "--queries", str(EXAMPLE_QUERIES), "--mode", "lexical",
        "--json",
    )  # fmt: skip
    assert code == 0, err
    report = json.loads(out)
    assert report["missing_gold"] == [] and report["warnings"] == []
    assert report["n_queries"] >= 20 and report["n_items"] == 12


@pytest.mark.model
async def test_eval_shows_progress_on_stderr_while_indexing(tmp_path: Path) -> None:
    env = server_env()
    env["CONTEXT_BROKER_SEARCH__EMBEDDING_CACHE"] = str(tmp_path / "embeddings.sqlite3")
    code, out, err = await _eval(
        "--config", str(EXAMPLE_CONFIG), "--queries", str(EXAMPLE_QUERIES), "--json",
        "--misses", env=env,
    )  # fmt: skip
    assert code == 0, err
    report = json.loads(out)  # stdout holds the report and nothing else
    lines = [line for line in err.splitlines() if line.startswith("eval: ")]
    assert lines[1] == "eval: indexing 12 items (loading the model, embedding what is not cached)"
    assert lines[2].startswith("eval: indexed 12 items in ") and "13 embedded" in lines[2]
    assert lines[-1] == f"eval: ranked {report['n_queries']}/{report['n_queries']} queries"
    assert report["mode"] == "served" and report["metrics"]["recall@5"] >= 0.9
    assert report["misses_at"] == 5 and len(report["misses"]) <= 2
