"""``context-broker eval`` without ``--mode`` measures what the broker serves: its ranked list
for a query equals the order ``search_context_items`` returns over MCP for the same query and
intents, with the real model."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest
from mcp import Client, StdioServerParameters

from tests.support.broker_procs import BROKER, ROOT, server_env

pytestmark = pytest.mark.model

MCP_BENCH = ROOT.parent / "shared" / "benchmarks" / "mcp-bench"


def _files(folder: Path) -> tuple[Path, Path]:
    """Four rows of mcp-bench (two with the plan a host's model wrote, two without) and a
    catalog of their servers plus five others."""
    lines = (MCP_BENCH / "queries-plans.jsonl").read_text(encoding="utf-8").splitlines()
    rows = [json.loads(line) for line in lines[:4]]
    for row in rows[2:]:
        del row["intents"]
    queries = folder / "q.jsonl"
    queries.write_text("\n".join(json.dumps(r) for r in rows), encoding="utf-8")
    full = json.loads((MCP_BENCH / "catalog.json").read_text(encoding="utf-8"))
    wanted = {key.split(":", 1)[1].split("/")[0] for row in rows for key in row["gold"]}
    wanted |= set(sorted(set(full["servers"]) - wanted)[:5])
    catalog = folder / "catalog.json"
    servers = {name: full["servers"][name] for name in sorted(wanted)}
    catalog.write_text(json.dumps({"servers": servers}), encoding="utf-8")
    return catalog, queries


async def _served(config: Path, rows: list[dict[str, object]]) -> list[list[str]]:
    params = StdioServerParameters(command=BROKER, args=["serve", "--config", str(config)])
    out: list[list[str]] = []
    with anyio.fail_after(600):
        async with Client(params, mode="legacy") as client:
            for row in rows:
                args = {"query": row["query"], "top_n": 10}
                if row.get("intents"):
                    args["intents"] = row["intents"]
                result = await client.call_tool("search_context_items", args)
                assert not result.is_error, result.content
                assert isinstance(result.structured_content, dict)
                out.append([item["key"] for item in result.structured_content["items"]])
    return out


async def test_eval_with_no_mode_ranks_exactly_as_search_context_items_serves(
    tmp_path: Path,
) -> None:
    catalog, queries = _files(tmp_path)
    with anyio.fail_after(600):
        done = await anyio.run_process(
            [
                *(BROKER, "eval", "--catalog", str(catalog), "--queries", str(queries)),
                *("--k", "10", "--json", "--rankings", "--quiet"),
            ],
            cwd=tmp_path,
            env=server_env(),
            check=False,
        )
    assert done.returncode == 0, done.stderr.decode()
    report = json.loads(done.stdout)
    assert report["mode"] == "served"
    config = tmp_path / "broker.toml"
    config.write_text(f'[sources]\ncatalog_files = ["{catalog}"]\n', encoding="utf-8")
    rows = [json.loads(line) for line in queries.read_text().splitlines()]
    served = await _served(config, rows)
    ranked = [r["ranked"] for r in report["rankings"]]
    assert served == ranked
    assert all(ranked)
