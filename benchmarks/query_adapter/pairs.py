"""Rebuild the query adapter's training pairs from the public tool-use repositories.

    .venv/bin/python -m benchmarks.query_adapter.pairs --out OUT \\
        --bfcl PATH --seal-tools PATH --toolalpaca PATH --api-bank PATH

Each PATH is a checkout or a bare git directory of the repository named in ``SOURCES.md``
(``--api-bank`` is DAMO-ConvAI, whose ``api-bank/`` folder holds API-Bank). Writes
``OUT/tools.jsonl`` (``id``, ``source``, ``text``: the tool's searchable text exactly as the
broker builds it) and ``OUT/queries.jsonl`` (``source``, ``query``, ``tools``: the ids of the
tools the query's reference answer calls). Nothing from the repositories is kept in this project.
"""

from __future__ import annotations

import argparse
import ast
import json
import subprocess
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from contextcore.chunking import item_content
from contextcore.items import Tool

BFCL_DIR = "berkeley-function-call-leaderboard/bfcl_eval/data"
# Single-turn categories with a reference answer; multi-turn, memory and web-search rows are
# whole conversations, and the irrelevance ones call nothing.
BFCL_SETS = (
    "simple_python",
    "simple_java",
    "simple_javascript",
    "multiple",
    "parallel",
    "parallel_multiple",
    "live_simple",
    "live_multiple",
    "live_parallel",
    "live_parallel_multiple",
)
SEAL_SETS = ("dev", "test_in_domain", "test_out_domain")
TOOLALPACA_SETS = ("eval_simulated", "eval_real")
API_BANK_SAMPLES = ("level-1-given-desc", "level-2-toolsearcher")


class Repo:
    """Files of a fetched repository: a work tree, or a bare git directory read at HEAD."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.bare = not (path / ".git").exists() and (path / "HEAD").is_file()

    def read(self, rel: str) -> str:
        if not self.bare:
            return (self.path / rel).read_text(encoding="utf-8")
        return self._git("show", f"HEAD:{rel}")

    def listdir(self, rel: str) -> list[str]:
        """File names directly under ``rel``, sorted."""
        if not self.bare:
            return sorted(p.name for p in (self.path / rel).iterdir() if p.is_file())
        out = self._git("ls-tree", "--name-only", "HEAD", f"{rel}/")
        return sorted(line.rsplit("/", 1)[-1] for line in out.splitlines() if line)

    def commit(self) -> str:
        args = ["rev-parse", "HEAD"]
        if self.bare:
            return self._git(*args).strip()
        return subprocess.run(
            ["git", "-C", str(self.path), *args], capture_output=True, text=True, check=True
        ).stdout.strip()

    def _git(self, *args: str) -> str:
        return subprocess.run(
            ["git", f"--git-dir={self.path}", *args], capture_output=True, text=True, check=True
        ).stdout


@dataclass
class Collected:
    """Tools by id and queries with the ids of their gold tools, for one source."""

    source: str
    tools: dict[str, str] = field(default_factory=dict)
    queries: dict[str, set[str]] = field(default_factory=dict)
    _ids: dict[str, str] = field(default_factory=dict)

    def add_tool(self, name: str, description: str, schema: Mapping[str, Any]) -> str:
        """Register a tool by the broker's text for it and return its id; the same text is
        the same tool, and a name reused with another description (BFCL does) another one."""
        tool = Tool(self.source, name, description=description, input_schema=dict(schema))
        text = item_content(tool)
        if text in self._ids:
            return self._ids[text]
        tool_id, n = f"{self.source}:{name}", 1
        while tool_id in self.tools:
            n += 1
            tool_id = f"{self.source}:{name}#{n}"
        self.tools[tool_id] = text
        self._ids[text] = tool_id
        return tool_id

    def add_query(self, query: str, tool_ids: set[str]) -> None:
        query = " ".join(query.split())
        if query and tool_ids:
            self.queries.setdefault(query, set()).update(tool_ids)


def _jsonl(text: str) -> Iterator[dict[str, Any]]:
    for line in text.splitlines():
        if line.strip():
            yield json.loads(line)


def collect_bfcl(repo: Repo) -> Collected:
    """BFCL: the user's request, and each function its reference answer calls."""
    out = Collected("bfcl")
    for name in BFCL_SETS:
        answers = {
            row["id"]: row["ground_truth"]
            for row in _jsonl(repo.read(f"{BFCL_DIR}/possible_answer/BFCL_v4_{name}.json"))
        }
        for row in _jsonl(repo.read(f"{BFCL_DIR}/BFCL_v4_{name}.json")):
            called = {next(iter(call)) for call in answers.get(row["id"], [])}
            ids = {
                fn["name"]: out.add_tool(
                    fn["name"], fn.get("description", ""), fn.get("parameters") or {}
                )
                for fn in row["function"]
            }
            user = [m["content"] for m in row["question"][0] if m["role"] == "user"]
            gold = {ids[name] for name in called if name in ids}
            out.add_query(" ".join(user), gold)
    return out


def collect_seal_tools(repo: Repo) -> Collected:
    """Seal-Tools: each query with every API its reference calls, from its 4,076-tool pool."""
    out = Collected("seal-tools")
    ids: dict[str, str] = {}
    for row in _jsonl(repo.read("Seal-Tools_Dataset/tool.jsonl")):
        schema = {"properties": row.get("parameters") or {}}
        ids[row["api_name"]] = out.add_tool(row["api_name"], row["api_description"], schema)
    for name in SEAL_SETS:
        for row in _jsonl(repo.read(f"Seal-Tools_Dataset/{name}.jsonl")):
            out.add_query(row["query"], {ids[c["api"]] for c in row["calling"] if c["api"] in ids})
    return out


def collect_toolalpaca(repo: Repo) -> Collected:
    """ToolAlpaca's evaluation sets: each instruction with the functions its golden answer uses;
    a function's text is its OpenAPI operation (description, parameters)."""
    out = Collected("toolalpaca")
    for name in TOOLALPACA_SETS:
        for api in json.loads(repo.read(f"data/{name}.json")):
            ids = {
                op_id: out.add_tool(f"{api['Name']}.{op_id}", desc, schema)
                for op_id, desc, schema in _openapi_operations(json.loads(api["Documentation"]))
            }
            for query, answer in zip(api["Instructions"], api["Golden_Answers"], strict=False):
                out.add_query(query, {ids[a["Action"]] for a in answer if a["Action"] in ids})
    return out


def _openapi_operations(doc: Mapping[str, Any]) -> Iterator[tuple[str, str, dict[str, Any]]]:
    for ops in (doc.get("paths") or {}).values():
        for op in ops.values():
            if not isinstance(op, dict) or "operationId" not in op:
                continue
            props: dict[str, Any] = {}
            for param in op.get("parameters") or []:
                props[param["name"]] = {"description": param.get("description", "")}
            body = op.get("requestBody", {}).get("content", {})
            for media in body.values():
                props.update((media.get("schema") or {}).get("properties") or {})
            desc = op.get("description") or op.get("summary") or ""
            yield op["operationId"], desc, {"properties": props}


def collect_api_bank(repo: Repo) -> Collected:
    """API-Bank's level-1 and level-2 dialogues: the user's words since the API calls before
    them, and each API then called (its tool searcher aside)."""
    out = Collected("api-bank")
    ids = {
        cls: out.add_tool(cls, desc, {"properties": params})
        for cls, desc, params in _api_bank_classes(repo)
        if cls != "ToolSearcher"
    }
    for folder in API_BANK_SAMPLES:
        base = f"api-bank/lv1-lv2-samples/{folder}"
        for name in repo.listdir(base):
            said: list[str] = []
            answered = False
            for turn in _jsonl(repo.read(f"{base}/{name}")):
                if turn["role"] == "User":
                    said = [*([] if answered else said), turn["text"]]
                    answered = False
                elif turn["role"] == "API" and turn["api_name"] in ids:
                    # Calls in a row (a token, then the agenda) answer the same words.
                    out.add_query(" ".join(said), {ids[turn["api_name"]]})
                    answered = True
    return out


def _api_bank_classes(repo: Repo) -> Iterator[tuple[str, str, dict[str, Any]]]:
    """Each API class's ``description`` and ``input_parameters``, read without running it."""
    for name in repo.listdir("api-bank/apis"):
        if not name.endswith(".py") or name in ("__init__.py", "api.py"):
            continue
        for node in ast.parse(repo.read(f"api-bank/apis/{name}")).body:
            if isinstance(node, ast.ClassDef):
                attrs = {
                    t.id: stmt.value
                    for stmt in node.body
                    if isinstance(stmt, ast.Assign)
                    for t in stmt.targets
                    if isinstance(t, ast.Name)
                }
                if "description" in attrs and "input_parameters" in attrs:
                    desc = ast.literal_eval(attrs["description"])
                    yield node.name, desc, ast.literal_eval(attrs["input_parameters"])


COLLECTORS = {
    "bfcl": collect_bfcl,
    "seal-tools": collect_seal_tools,
    "toolalpaca": collect_toolalpaca,
    "api-bank": collect_api_bank,
}


def write(out_dir: Path, collected: list[Collected]) -> None:
    """Write ``tools.jsonl`` and ``queries.jsonl`` under ``out_dir``."""
    out_dir.mkdir(parents=True, exist_ok=True)
    with (out_dir / "tools.jsonl").open("w", encoding="utf-8") as f:
        for c in collected:
            for tool_id, text in c.tools.items():
                f.write(json.dumps({"id": tool_id, "source": c.source, "text": text}) + "\n")
    with (out_dir / "queries.jsonl").open("w", encoding="utf-8") as f:
        for c in collected:
            for query, tools in c.queries.items():
                row = {"source": c.source, "query": query, "tools": sorted(tools)}
                f.write(json.dumps(row) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True)
    for source in COLLECTORS:
        parser.add_argument(f"--{source}", type=Path, required=True, dest=source)
    args = parser.parse_args()
    collected = []
    for source, collect in COLLECTORS.items():
        repo = Repo(getattr(args, source))
        c = collect(repo)
        pairs = sum(len(t) for t in c.queries.values())
        print(
            f"{source:<11} {repo.commit()} tools {len(c.tools):>5} queries "
            f"{len(c.queries):>5} pairs {pairs:>5}"
        )
        collected.append(c)
    write(args.out, collected)


if __name__ == "__main__":
    main()
