"""Tokens a host's model reads per turn through the broker, against listing every tool.

    .venv/bin/python benchmarks/context_tokens.py [--quick] [--calls N]

Per turn the model reads the text content of ``build_request_context`` at the defaults (preset
normal, full detail, the 4,000-token budget), built with ``ContextBroker`` and rendered with
``render_context`` (tools named ``<server>__<tool>``, none listed by the host). A host without
the broker lists every downstream tool instead: the JSON of each tool's name, description and
input schema as ``tools/list`` gives them, summed. Tokens are counted two ways: the broker's
estimate (characters / 4) and the tokenizer of the prepared all-MiniLM-L6-v2 model (WordPiece,
via the ``tokenizers`` package), a real tokenizer though not any chat model's.

(a) The five reference servers (50 tools, all searched as ``agent`` items), the messages of
    examples/queries.jsonl whose expected item is a tool. Target: <= 20% of the listing.
(b) The Docker MCP registry catalog (755 tools) plus the 199 MetaTool tools, so the MetaTool
    queries' gold tools exist. Target: <= 3% of the listing. In the same run: recall of the
    gold tools among the agent items selected at the defaults (top_n 5 and the floors) against
    the same selection without floors (min_score = min_score_tools = 0). Target: within 1 point.
    The queries are embedded ahead in batches by the same model, to keep the run short.
(c) ``build_request_context`` over stdio (a real ``context-broker serve`` subprocess) with a
    1,000-item catalog (500 tools, 500 rules, semantic search on): p50 of ``detail="full"``
    against ``detail="names"``, interleaved call by call. Target: full <= 1.3x names.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import anyio
from _common import SHARED, CachedEmbedder
from context_broker.server.embedding import build_embedder, default_model_dir
from context_broker.server.gateway.naming.names import assign_names
from context_broker.server.settings import AppConfig
from mcp import Client, StdioServerParameters
from relevance import EXAMPLE_QUERIES, NamedTools, five_servers
from tokenizers import Tokenizer

from contextcore.catalog import Catalog
from contextcore.context_text import estimate_tokens, render_context
from contextcore.embedding import Embedder
from contextcore.items import ContextItem, ItemRef, Tool
from contextcore.loaders import load_catalog_json
from contextcore.search import SearchEngine
from contextcore.services.broker import ContextBroker
from contextcore.services.evaluation import EvalQuery, load_queries

REGISTRY = SHARED / "mcp-registry" / "catalog.json"
METATOOL = SHARED / "metatool"
SETS = ("queries-single.jsonl", "queries-multi.jsonl")
BROKER = str(Path(sys.executable).parent / "context-broker")
TARGET_FIVE, TARGET_REGISTRY, MAX_RECALL_DROP, MAX_RATIO = 0.20, 0.03, 1.0, 1.3

Counter = Callable[[str], int]


def wordpiece_counter() -> Counter:
    """Tokens of a text by the prepared MiniLM tokenizer, no truncation, no special tokens."""
    path = default_model_dir(AppConfig().search.model) / "tokenizer.json"
    if not path.is_file():
        raise SystemExit(f"no tokenizer at {str(path)!r}; run `context-broker setup-model` first")
    tokenizer = Tokenizer.from_file(str(path))
    tokenizer.no_truncation()
    tokenizer.no_padding()
    return lambda text: len(tokenizer.encode(text, add_special_tokens=False).ids)


@dataclasses.dataclass
class Tokens:
    """Per-turn token counts, both ways."""

    estimate: list[int] = dataclasses.field(default_factory=list)
    wordpiece: list[int] = dataclasses.field(default_factory=list)

    def add(self, text: str, count: Counter) -> None:
        self.estimate.append(estimate_tokens(text))
        self.wordpiece.append(count(text))


def listing_tokens(listing: Sequence[dict[str, Any]], count: Counter) -> tuple[int, int]:
    """Both token counts of a host's tool list: each tool's JSON, summed."""
    texts = [json.dumps(tool, ensure_ascii=False) for tool in listing]
    return sum(estimate_tokens(t) for t in texts), sum(count(t) for t in texts)


def broker_over(items: Sequence[ContextItem], embedder: Embedder | None) -> ContextBroker:
    catalog = Catalog(items)
    return ContextBroker(catalog, SearchEngine(catalog, embedder))


def turn(broker: ContextBroker, names: NamedTools, message: str, **kwargs: Any) -> Any:
    """One request context at the defaults (or ``kwargs``) in a new session, and its text."""
    sid = broker.create_session().session_id
    context = broker.build_request_context(sid, message, **kwargs)
    budget = broker.search.settings.max_context_tokens
    return context, render_context(context, broker.lookup, names, max_tokens=budget).text


def compare(label: str, tokens: Tokens, listed: tuple[int, int], target: float) -> bool:
    """Print the per-turn figures against the listing; PASS when the mean is within target."""
    ok = True
    for name, per_turn, whole in (
        ("chars/4", tokens.estimate, listed[0]),
        ("MiniLM WordPiece", tokens.wordpiece, listed[1]),
    ):
        mean = statistics.fmean(per_turn)
        share = mean / whole
        ok = ok and share <= target
        print(
            f"  {label:<10} {name:<17} listing {whole:>8,}  per turn mean {mean:>7,.0f} "
            f"p95 {sorted(per_turn)[int(0.95 * (len(per_turn) - 1))]:>6,}  max {max(per_turn):>6,}"
            f"  = {share * 100:5.1f}% (target <= {target * 100:.0f}%: "
            f"{'PASS' if share <= target else 'FAIL'})"
        )
    return ok


# -- (a) five servers --------------------------------------------------------------------


def five(embedder: Embedder | None, count: Counter) -> bool:
    servers = five_servers()
    broker = broker_over(servers.tools, embedder)
    names = NamedTools(servers.names)
    messages = [
        q.query for q in load_queries(EXAMPLE_QUERIES) if all(g.startswith("tool:") for g in q.gold)
    ]
    tokens = Tokens()
    for message in messages:
        tokens.add(turn(broker, names, message)[1], count)
    print(
        f"(a) five reference servers: {len(servers.listing)} tools listed vs the request context "
        f"of {len(messages)} tool messages (examples/queries.jsonl)"
    )
    return compare("five", tokens, listing_tokens(servers.listing, count), TARGET_FIVE)


# -- (b) registry + MetaTool -------------------------------------------------------------


def registry_items() -> list[Tool]:
    items = [*load_catalog_json(REGISTRY), *load_catalog_json(METATOOL / "catalog.json")]
    return [dataclasses.replace(t, server_include="agent") for t in items if isinstance(t, Tool)]


def _listing(tools: Sequence[Tool], names: dict[ItemRef, str]) -> list[dict[str, Any]]:
    return [
        {"name": names[t.ref], "description": t.description, "inputSchema": dict(t.input_schema)}
        for t in tools
    ]


def _recall(gold: frozenset[str], context: Any) -> float:
    """The share of ``gold`` among the context's agent items."""
    selected = {row.ref.key for row in context.items if row.include_mode == "agent"}
    return len(gold & selected) / len(gold)


def registry(embedder: Embedder | None, count: Counter, limit: int | None) -> bool:
    tools = registry_items()
    exposed = assign_names((t.server, t.name) for t in tools)
    names = {ItemRef("tool", tool, server): name for (server, tool), name in exposed.items()}
    broker = broker_over(tools, embedder)
    started = time.perf_counter()
    stats = broker.search.index()
    print(
        f"\n(b) registry + MetaTool: {len(tools)} tools, indexed in "
        f"{time.perf_counter() - started:.1f}s ({stats.chunks} chunks)",
        flush=True,
    )
    tokens = Tokens()
    ok = True
    rows = []
    for name in SETS:
        queries: list[EvalQuery] = load_queries(METATOOL / name)[:limit]
        if isinstance(embedder, CachedEmbedder):
            embedder.warm([q.query for q in queries])
        floored = unfloored = 0.0
        sizes = []
        for q in queries:
            context, text = turn(broker, NamedTools(names), q.query)
            tokens.add(text, count)
            sizes.append(sum(1 for row in context.items if row.include_mode == "agent"))
            floored += _recall(q.gold, context)
            bare, _ = turn(broker, NamedTools(names), q.query, min_score=0.0, min_score_tools=0.0)
            unfloored += _recall(q.gold, bare)
        f, u = floored / len(queries) * 100, unfloored / len(queries) * 100
        ok = ok and u - f <= MAX_RECALL_DROP
        rows.append((name, len(queries), u, f, statistics.fmean(sizes)))
    print(f"  {'set':<22}{'queries':>8}{'no floors':>11}{'defaults':>10}{'drop':>6}  items/turn")
    for name, n, u, f, size in rows:
        print(f"  {name:<22}{n:>8}{u:>11.1f}{f:>10.1f}{u - f:>6.1f}  {size:.2f}")
    print(
        f"  recall@5 of the gold tools in the request context within {MAX_RECALL_DROP:.0f} point "
        f"of no floors on every set: {'PASS' if ok else 'FAIL'}"
    )
    registry_only = [t for t in tools if t.server != "metatool"]
    only = listing_tokens(_listing(registry_only, names), count)
    print(f"  listing the registry alone ({len(registry_only)} tools): {only[0]:,} / {only[1]:,}")
    listed = listing_tokens(_listing(tools, names), count)
    return compare("registry", tokens, listed, TARGET_REGISTRY) and ok


# -- (c) stdio latency, full vs names ------------------------------------------------------

_TOPICS = (
    "database migrations",
    "unit testing",
    "deployment",
    "logging",
    "caching",
    "authentication",
    "error handling",
    "code review",
    "monitoring",
    "feature flags",
)
_VERBS = ("prefer", "avoid", "always check", "document", "measure", "automate", "review")


def write_thousand(folder: Path) -> Path:
    """A config over a catalog of 500 registry tools and 500 generated rules, all ``agent``."""
    rng = random.Random(7)
    data = json.loads(REGISTRY.read_text(encoding="utf-8"))
    servers: dict[str, Any] = {}
    left = 500
    for server, spec in data["servers"].items():
        tools = spec["tools"][:left]
        left -= len(tools)
        servers[server] = {"include": "agent", "tools": tools}
        if not left:
            break
    rules = []
    for i in range(500):
        topic = rng.choice(_TOPICS)
        text = " ".join(
            f"{rng.choice(_VERBS)} {topic} step {rng.randint(1, 99)}." for _ in range(12)
        )
        rules.append({"name": f"rule-{i:04d}", "description": f"Notes on {topic}", "text": text})
    (folder / "catalog.json").write_text(json.dumps({"servers": servers, "rules": rules}))
    config = folder / "bench.toml"
    config.write_text(
        '[search]\nsemantic = true\nembedding_cache = "embeddings.sqlite3"\n'
        '[sources]\ncatalog_files = ["catalog.json"]\n',
        encoding="utf-8",
    )
    return config


QUERIES = [f"How do we handle {t} in this project?" for t in _TOPICS] + [
    "Search the repository for documents about invoices",
    "Create a new issue for the login bug",
    "List the files in the shared folder",
    "Send a message to the team channel",
    "Query the database for last week's orders",
]


async def stdio_latency(config: Path, calls: int) -> dict[str, list[float]]:
    params = StdioServerParameters(
        command=BROKER, args=["--log-level", "WARNING", "serve", "--config", str(config)]
    )
    samples: dict[str, list[float]] = {"full": [], "names": []}
    async with Client(params, mode="legacy") as client:
        with anyio.fail_after(60):
            created = await client.call_tool("create_session", {})
        sid = created.structured_content["session_id"]
        with anyio.fail_after(300):  # the first call loads the model and indexes 1,000 items
            for q in QUERIES[:3]:
                await client.call_tool("build_request_context", {"session_id": sid, "message": q})
        for i in range(calls):
            order = ("full", "names") if i % 2 == 0 else ("names", "full")
            for detail in order:
                args = {"session_id": sid, "message": QUERIES[i % len(QUERIES)], "detail": detail}
                start = time.perf_counter()
                with anyio.fail_after(60):
                    result = await client.call_tool("build_request_context", args)
                samples[detail].append((time.perf_counter() - start) * 1000)
                if result.is_error:
                    raise SystemExit(f"build_request_context failed: {result.content}")
    return samples


def latency(calls: int) -> bool:
    with tempfile.TemporaryDirectory() as tmp:
        samples = anyio.run(stdio_latency, write_thousand(Path(tmp)), calls)
    p50 = {d: statistics.median(s) for d, s in samples.items()}
    ratio = p50["full"] / p50["names"]
    print(
        f"\n(c) build_request_context over stdio, 1,000 items (500 tools, 500 rules), "
        f"{calls} calls each, interleaved"
    )
    for detail, values in samples.items():
        p95 = sorted(values)[int(0.95 * (len(values) - 1))]
        print(f"  detail={detail:<6} p50 {p50[detail]:6.2f} ms  p95 {p95:6.2f} ms")
    ok = ratio <= MAX_RATIO
    print(f"  full/names p50 {ratio:.2f}x (target <= {MAX_RATIO}x): {'PASS' if ok else 'FAIL'}")
    return ok


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="300 queries per set, 60 calls")
    parser.add_argument("--calls", type=int, default=None, help="stdio calls per detail")
    args = parser.parse_args()
    model = build_embedder(AppConfig())
    embedder = CachedEmbedder(model) if model is not None else None
    count = wordpiece_counter()
    print("tokens per turn: the broker's text at the defaults vs a host listing every tool\n")
    ok = five(embedder, count)
    ok = registry(embedder, count, 300 if args.quick else None) and ok
    ok = latency(args.calls or (60 if args.quick else 200)) and ok
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
