"""Reach: which needed tools a host's model is told of, and what it pays for them.

    .venv/bin/python benchmarks/reach.py [--set all|mcp-bench|mcp-bench-plans|metatool-single|
        metatool-multi|example|reference] [--split all|dev|holdout] [--limit N] [--json]
        [--no-cache] [--no-small-talk]

A host's model reads the broker's own ``tools/list`` and the text content of
``build_request_context`` (ARCHITECTURE.md, "What a host's model reads"). Per query set this
measures that text as the model reads it:

- named: the share of gold items the text names (:func:`named`: for a tool, one line with
  ``server S, tool T``, as a full entry's heading or a candidate line has it), averaged over
  queries; all named: the share of queries with every gold item named;
- the text's median and p90 length in tokens (characters / 4, ``estimate_tokens``);
- the broker's own ``tools/list`` (names, descriptions, input schemas as JSON; also with output
  schemas), taken over MCP (in-memory client) from the server built from a config at its
  defaults with one empty downstream server, so it is what a host with servers behind the
  broker is listed;
- listing every catalog tool directly (name, description, input schema JSON), and the ratio
  (median text + own listing) / that listing;
- off-topic messages (:data:`OFF_TOPIC`, and the 30 of :data:`OFF_TOPIC_HELDOUT` that the
  small-talk list was never tuned on): mean agent items selected and candidate lines listed.

How the text is obtained: the broker is built from a config by the server's own code
(``load_config``, ``build_parts``, the catalog loaded from ``[sources] catalog_files``) and
``build_request_context`` is called through the server's ``ToolRunner`` (what the MCP server
runs for a ``tools/call``) in a new session per query, default arguments plus the query's
``intents`` when it has a plan. The tool directory names each tool ``<server>__<tool>`` as the
gateway does (``assign_names``), i.e. the text a host reads when those servers are connected.
A catalog file's servers without an ``include`` are ``always`` in the product; here each gets
``include = "agent"`` (a copy of the catalog in a temporary folder), so tools are selected.

Sets: the shared ones in ../shared/benchmarks (mcp-bench without and with the model's plan,
MetaTool single (first 500 by default) and multi), and ``example``: config.example.toml plus
the five reference servers' tools (benchmarks/data/reference_tools.json) as ``agent``, with
examples/queries.jsonl and examples/eval-queries.jsonl (rule and reference gold too: one is
named by its ``### NNN name`` heading); ``reference``: those five servers' tools alone, with
the opening request of each of the 60 conversations of benchmarks/conversations.jsonl (gold:
the tools it called; written for the conversation benchmark, never used to tune reach).
``--split dev|holdout`` keeps the queries whose sha256 of the query text is even (dev) or odd
(holdout): tune on dev, quote holdout.
Every text the model embeds is kept in .cache/reach-embeddings.sqlite3 (``--no-cache``: not),
so a second run costs little; the vectors, hence the texts, are the same either way.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import math
import re
import statistics
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import anyio
from _common import ROOT, SHARED, CachedEmbedder
from context_broker.server.embedding import build_embedder
from context_broker.server.gateway.naming.names import assign_names
from context_broker.server.host.tool_calls import ToolRunner
from context_broker.server.parts import build_parts
from context_broker.server.runtime import build_runtime
from context_broker.server.settings import AppConfig, load_config
from context_broker.tools.requests import BUILD_REQUEST_CONTEXT
from mcp import Client, types

from contextcore.context_text import estimate_tokens
from contextcore.embedding import Embedder
from contextcore.embedding_cache import (
    SqliteEmbeddingCache,
)
from contextcore.items import ItemRef, Tool
from contextcore.services.evaluation import EvalQuery, load_queries
from contextcore.services.history import HistoryService
from contextcore.signatures import python_line

EXAMPLE_CONFIG = ROOT / "config.example.toml"
CACHE = ROOT / ".cache" / "reach-embeddings.sqlite3"
REFERENCE_TOOLS = ROOT / "benchmarks" / "data" / "reference_tools.json"
CONVERSATIONS = ROOT / "benchmarks" / "conversations.jsonl"
OFF_TOPIC = (
    "what's a good name for a cat?",
    "tell me a joke about penguins",
    "thanks, that's all",
    "hello",
    "what is the meaning of life?",
    "lorem ipsum dolor sit amet",
)
# Off-topic messages the small-talk list (contextcore/data/small_talk.txt) was never tuned on.
OFF_TOPIC_HELDOUT = (
    "hmm, interesting",
    "you're funny",
    "what's the capital of love?",
    "sing me a song",
    "do you dream?",
    "I just got back from vacation",
    "my dog ate my homework",
    "roses are red, violets are blue",
    "what's heavier, a kilo of feathers or a kilo of steel?",
    "let me think about it",
    "alright, moving on",
    "please be more polite",
    "I disagree with you",
    "what time do you go to sleep?",
    "can we be friends?",
    "you are the best",
    "that was a silly answer",
    "why is the sky blue?",
    "how many fingers am I holding up?",
    "knock knock",
    "I want to learn to juggle",
    "what rhymes with orange?",
    "perfect, cheers",
    "whatever",
    "is pineapple on pizza acceptable?",
    "what's your opinion on cats versus dogs?",
    "tell me about yourself",
    "I have nothing to do",
    "remind me what we were talking about",
    "good night",
)


@dataclasses.dataclass(frozen=True)
class QuerySet:
    """One query set over one catalog (``catalog``: a key of :data:`CATALOGS`)."""

    catalog: str
    queries: tuple[Path, ...]
    default_limit: int | None = None


CATALOGS: dict[str, Path | None] = {
    "mcp-bench": SHARED / "mcp-bench" / "catalog.json",
    "metatool": SHARED / "metatool" / "catalog.json",
    "example": None,  # config.example.toml plus the reference servers' tools
    "reference": None,  # the reference servers' tools alone, at defaults
}
SETS: dict[str, QuerySet] = {
    "mcp-bench": QuerySet("mcp-bench", (SHARED / "mcp-bench" / "queries.jsonl",)),
    "mcp-bench-plans": QuerySet("mcp-bench", (SHARED / "mcp-bench" / "queries-plans.jsonl",)),
    "metatool-single": QuerySet("metatool", (SHARED / "metatool" / "queries-single.jsonl",), 500),
    "metatool-multi": QuerySet("metatool", (SHARED / "metatool" / "queries-multi.jsonl",)),
    "example": QuerySet(
        "example", (ROOT / "examples" / "queries.jsonl", ROOT / "examples" / "eval-queries.jsonl")
    ),
    "reference": QuerySet("reference", (CONVERSATIONS,)),
}

# -- what the text names -------------------------------------------------------------------

_CANDIDATE_LINE = re.compile(r"^- .*\(server .*, tool .*\):(?: |$)", re.MULTILINE)


def named(text: str, key: str) -> bool:
    """Whether ``text`` names the item ``key`` so that a model can call or use it.

    A tool ``tool:S/T`` counts when one line holds ``server S, tool T`` (followed by ``)``,
    ``;``, ``,``, ``:`` or the line's end, so ``tool T`` is not a prefix of a longer name): both
    a full entry's heading ``### <exposed> (server S, tool T) — ...`` (its description and
    schema follow) and a candidate line ``- <exposed> (server S, tool T): <description>``
    have it. A line naming the tool without its server does not count, nor does the
    "Not included" line (``- tool:S/T (...): get_context_items(...)``), which does not say
    what the tool does. A small catalog's directory line ``- server S: T1, T2`` names each
    of its tools (the model fetches a schema by ``S/T``). A rule or reference ``rule:N``
    counts when a line is its heading ``### NNN N`` (priority, name; its text follows)."""
    ref = ItemRef.parse(key)
    if ref.type == "tool":
        server, tool = re.escape(ref.server or ""), re.escape(ref.name)
        pattern = rf"(?<![\w-])server {server}, tool {tool}(?=[);,:]|$)"
        # a small catalog's directory: ``- server S: T1, T2, ...``
        pattern += rf"|^- server {server}: (?:[^\n]*, )?{tool}(?=, |$)"
    else:
        pattern = rf"^### \d{{3}} {re.escape(ref.name)}(?= — |$)"
    return re.search(pattern, text, re.MULTILINE) is not None


def candidate_lines(text: str) -> int:
    """Lines of the form ``- <exposed> (server S, tool T): <description>``: the one-line
    candidates of a separate candidates section (0 when the text has none)."""
    return len(_CANDIDATE_LINE.findall(text))


def in_split(query: str, split: str) -> bool:
    """``dev``: the sha256 of the query text is even; ``holdout``: odd; ``all``: every one."""
    if split == "all":
        return True
    odd = hashlib.sha256(query.encode("utf-8")).digest()[-1] & 1
    return bool(odd) == (split == "holdout")


# -- the broker as the server builds it ------------------------------------------------------


class ExposedNames:
    """The tool directory of a broker whose catalog's servers are connected: each tool called
    ``<server>__<tool>`` as the gateway names it; none listed by the host (all ``agent``);
    with ``code_mode`` (on by default, as in the server), a tool entry also gives the Python
    signature ``run_code`` calls it by."""

    def __init__(self, tools: Sequence[Tool], code_mode: bool = True) -> None:
        self.names = assign_names((t.server, t.name) for t in tools)
        self.code_mode = code_mode

    def exposed_name(self, ref: ItemRef) -> str | None:
        return self.names.get((ref.server or "", ref.name))

    def listed(self, ref: ItemRef) -> bool:
        return False

    def python_line(self, item: Tool) -> str | None:
        return python_line(item, self.exposed_name(item.ref)) if self.code_mode else None


@dataclasses.dataclass
class Served:
    """A broker built from a config, the runner of its tools, and its tools' listing."""

    runner: ToolRunner
    tools: list[Tool]
    directory: ExposedNames

    def listing_tokens(self) -> int:
        """Tokens of listing every catalog tool directly: each tool's JSON, summed."""
        return sum(
            estimate_tokens(
                json.dumps(
                    {
                        "name": self.directory.names[(t.server, t.name)],
                        "description": t.description,
                        "inputSchema": dict(t.input_schema),
                    },
                    ensure_ascii=False,
                    default=_plain,
                )
            )
            for t in self.tools
        )


def _plain(value: object) -> object:
    # A catalog may hold a schema as read-only mappings and tuples.
    if isinstance(value, Mapping):
        return dict(value)
    return list(value) if isinstance(value, Sequence) else str(value)


def agent_catalog(data: dict[str, Any], folder: Path) -> Path:
    """``data`` (catalog JSON) written to ``folder`` with ``include = "agent"`` on every
    server that sets none (a catalog's servers are ``always`` otherwise)."""
    servers = {
        name: {"include": "agent", **spec} for name, spec in (data.get("servers") or {}).items()
    }
    path = folder / "catalog.json"
    path.write_text(json.dumps({**data, "servers": servers}), encoding="utf-8")
    return path


def _catalog_tool(saved: dict[str, Any]) -> dict[str, Any]:
    """A tool of reference_tools.json (``input_schema``) as a catalog has it (``inputSchema``)."""
    return {
        "name": saved["name"],
        "description": saved.get("description", ""),
        "inputSchema": saved.get("input_schema", {}),
    }


def with_catalog(config: AppConfig, path: Path) -> AppConfig:
    """``config`` with ``path`` added to ``[sources] catalog_files``."""
    files = (*config.sources.catalog_files, path)
    return config.model_copy(
        update={"sources": config.sources.model_copy(update={"catalog_files": files})}
    )


def catalog_config(name: str, folder: Path) -> AppConfig:
    """The config of catalog ``name``: a config file naming the catalog (at defaults) for a
    shared set; config.example.toml plus the reference servers' tools for ``example``."""
    source = CATALOGS[name]
    if source is None:
        listed = json.loads(REFERENCE_TOOLS.read_text(encoding="utf-8"))
        servers = {
            server: {"tools": [_catalog_tool(t) for t in tools]} for server, tools in listed.items()
        }
        if name == "reference":
            return config_of({"servers": servers}, folder)
        return with_catalog(
            load_config(EXAMPLE_CONFIG), agent_catalog({"servers": servers}, folder)
        )
    return config_of(json.loads(source.read_text(encoding="utf-8")), folder)


def config_of(data: dict[str, Any], folder: Path) -> AppConfig:
    """A config file in ``folder`` whose one source is catalog ``data`` (servers ``agent``),
    every other key at its default, read by the server's own loader."""
    path = agent_catalog(data, folder)
    toml = folder / "broker.toml"
    toml.write_text(f"[sources]\ncatalog_files = [{json.dumps(str(path))}]\n", encoding="utf-8")
    return load_config(toml)


def serve(
    config: AppConfig, embedder: Embedder | None, small_talk: bool = True, code_mode: bool = True
) -> Served:
    """The broker of ``config`` (with ``embedder``; ``small_talk`` False: the small-talk
    check off; ``code_mode`` False: tool entries without their Python signature), indexed,
    and the server's tool runner."""
    if not small_talk:
        search = config.search.model_copy(update={"small_talk": False})
        config = config.model_copy(update={"search": search})
    parts = build_parts(config, embedder=embedder, use_config_embedder=False)
    parts.search.index()
    tools = [i for i in parts.catalog.items() if isinstance(i, Tool)]
    directory = ExposedNames(tools, code_mode)
    history = HistoryService(parts.broker, config.history, limits=config.limits)
    runner = ToolRunner(
        parts.broker, (BUILD_REQUEST_CONTEXT,), history=history, directory=directory
    )
    return Served(runner, tools, directory)


async def request_text(
    served: Served, message: str, intents: Sequence[str] = ()
) -> tuple[str, dict[str, Any]]:
    """``build_request_context`` for ``message`` in a new session: the result's text content
    (what the model reads) and its structured content."""
    session = served.runner.broker.create_session().session_id
    args: dict[str, Any] = {"session_id": session, "message": message}
    if intents:
        args["intents"] = list(intents)
    result = await served.runner.call(BUILD_REQUEST_CONTEXT, args)
    text = "\n".join(c.text for c in result.content if isinstance(c, types.TextContent))
    if result.is_error:
        raise SystemExit(f"build_request_context failed for {message[:80]!r}: {text}")
    return text, dict(result.structured_content or {})


# -- the broker's own tools/list ----------------------------------------------------------

_EMPTY_SERVER = "from mcp.server.mcpserver import MCPServer\nMCPServer('empty').run()\n"


async def _listed(config_path: Path) -> list[types.Tool]:
    runtime = build_runtime(load_config(config_path), config_path)
    async with runtime.gateway, Client(runtime.server) as client:
        return list((await client.list_tools()).tools)


def own_listing(folder: Path, code_mode: bool = True) -> dict[str, int]:
    """The broker's own ``tools/list`` a host sees from a server built from a config at its
    defaults with one downstream server (which lists no tool), over the in-memory client:
    tokens of each tool's name, description and input schema as JSON, summed, and the same
    with output schemas. ``code_mode`` False: with ``[code] enabled = false``."""
    toml = folder / "own.toml"
    toml.write_text(
        ("" if code_mode else "[code]\nenabled = false\n") + "[servers.empty]\n"
        f"command = {json.dumps(sys.executable)}\n"
        f'args = ["-c", {json.dumps(_EMPTY_SERVER)}]\n',
        encoding="utf-8",
    )
    tools = anyio.run(_listed, toml)
    plain = with_output = 0
    for tool in tools:
        wire = tool.model_dump(by_alias=True, mode="json", exclude_none=True)
        shown = {k: wire[k] for k in ("name", "description", "inputSchema") if k in wire}
        plain += estimate_tokens(json.dumps(shown, ensure_ascii=False))
        if "outputSchema" in wire:
            shown["outputSchema"] = wire["outputSchema"]
        with_output += estimate_tokens(json.dumps(shown, ensure_ascii=False))
    return {"tools": len(tools), "tokens": plain, "tokens_with_output": with_output}


# -- one set ------------------------------------------------------------------------------


@dataclasses.dataclass
class SetReport:
    """One set's figures (see the module docstring)."""

    name: str
    queries: int
    named: float
    all_named: float
    median_tokens: float
    p90_tokens: int
    listing_tokens: int
    ratio: float
    off_topic_agent: float
    off_topic_candidates: float
    heldout_off_agent: float
    heldout_off_candidates: float
    seconds: float


async def off_topic(served: Served, messages: Sequence[str]) -> tuple[float, float]:
    """Mean agent items selected and candidate lines listed for ``messages``."""
    agent: list[int] = []
    candidates: list[int] = []
    for message in messages:
        text, out = await request_text(served, message)
        agent.append(sum(1 for row in out.get("items", []) if row["include_mode"] == "agent"))
        candidates.append(candidate_lines(text))
    return statistics.fmean(agent), statistics.fmean(candidates)


def p90(values: Sequence[int]) -> int:
    ordered = sorted(values)
    return ordered[max(0, math.ceil(0.9 * len(ordered)) - 1)]


async def measure(
    name: str, served: Served, queries: Sequence[EvalQuery], own_tokens: int
) -> SetReport:
    """The set's figures: each query's text through :func:`request_text`, then the off-topic
    messages."""
    started = time.perf_counter()
    shares: list[float] = []
    lengths: list[int] = []
    for q in queries:
        text, _ = await request_text(served, q.query, q.intents)
        hits = sum(named(text, key) for key in q.gold)
        shares.append(hits / len(q.gold))
        lengths.append(estimate_tokens(text))
    off = [await off_topic(served, OFF_TOPIC), await off_topic(served, OFF_TOPIC_HELDOUT)]
    listing = served.listing_tokens()
    median = statistics.median(lengths) if lengths else 0.0
    return SetReport(
        name,
        len(queries),
        statistics.fmean(shares) if shares else 0.0,
        statistics.fmean(s == 1.0 for s in shares) if shares else 0.0,
        median,
        p90(lengths) if lengths else 0,
        listing,
        (median + own_tokens) / listing if listing else math.inf,
        *off[0],
        *off[1],
        time.perf_counter() - started,
    )


def first_turns(path: Path) -> list[EvalQuery]:
    """The opening request of each conversation of ``path`` (benchmarks/conversations.jsonl,
    written for the reference servers), its gold the tools it called."""
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        gold = frozenset(f"tool:{key}" for key in row["called"][0])
        out.append(EvalQuery(row["turns"][0], gold))
    return out


def set_queries(spec: QuerySet, split: str, limit: int | None) -> list[EvalQuery]:
    """The set's queries in file order, those of ``split``, the first ``limit`` of them."""
    read = {CONVERSATIONS: first_turns}
    every = [q for path in spec.queries for q in read.get(path, load_queries)(path)]
    queries = [q for q in every if in_split(q.query, split)]
    limit = limit if limit is not None else spec.default_limit
    return queries[:limit] if limit else queries


# -- the run ---------------------------------------------------------------------------------


def run(
    names: Sequence[str],
    split: str,
    limit: int | None,
    folder: Path,
    cache: Path | None,
    small_talk: bool = True,
) -> dict[str, Any]:
    """Every set of ``names`` (brokers built once per catalog) and the own listing;
    embeddings kept in ``cache`` (None: this run only); ``small_talk`` False: without the
    small-talk check, for comparison."""
    own = own_listing(folder)
    model = build_embedder(AppConfig())
    store = SqliteEmbeddingCache(cache) if cache is not None else None
    embedder = CachedEmbedder(model, store) if model is not None else None
    built: dict[str, Served] = {}
    reports = []
    for name in names:
        spec = SETS[name]
        if spec.catalog not in built:
            (folder / spec.catalog).mkdir()
            config = catalog_config(spec.catalog, folder / spec.catalog)
            built[spec.catalog] = serve(config, embedder, small_talk)
        queries = set_queries(spec, split, limit)
        report = anyio.run(measure, name, built[spec.catalog], queries, own["tokens"])
        print(f"reach: {name} done in {report.seconds:.0f}s", file=sys.stderr, flush=True)
        reports.append(report)
    return {"split": split, "own_listing": own, "sets": [dataclasses.asdict(r) for r in reports]}


def table(result: dict[str, Any]) -> str:
    own = result["own_listing"]
    lines = [
        f"split {result['split']}; the broker's own tools/list: {own['tools']} tools, "
        f"{own['tokens']:,} tokens ({own['tokens_with_output']:,} with output schemas)",
        f"{'set':<16}{'queries':>8}{'named':>7}{'all':>6}{'p50 tok':>8}{'p90 tok':>8}"
        f"{'list all':>9}{'ratio':>7}{'off: agent':>11}{'cand':>6}{'held-out off':>13}{'cand':>6}",
    ]
    for r in result["sets"]:
        lines.append(
            f"{r['name']:<16}{r['queries']:>8}{r['named']:>7.3f}{r['all_named']:>6.2f}"
            f"{r['median_tokens']:>8,.0f}{r['p90_tokens']:>8,}{r['listing_tokens']:>9,}"
            f"{r['ratio']:>7.1%}{r['off_topic_agent']:>11.2f}{r['off_topic_candidates']:>6.2f}"
            f"{r['heldout_off_agent']:>13.2f}{r['heldout_off_candidates']:>6.2f}"
        )
    lines.append(
        "named: share of gold items named in the text; all: share of queries with all named; "
        "ratio: (p50 text + own tools/list) / listing every catalog tool"
    )
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--set", default="all", choices=["all", *SETS], dest="which")
    parser.add_argument("--split", default="all", choices=["all", "dev", "holdout"])
    parser.add_argument("--limit", type=int, default=None, help="first N queries of each set")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument(
        "--no-cache", action="store_true", help=f"do not keep embeddings in {CACHE.name}"
    )
    parser.add_argument(
        "--no-small-talk", action="store_true", help="without the small-talk check (comparison)"
    )
    args = parser.parse_args()
    names = list(SETS) if args.which == "all" else [args.which]
    with tempfile.TemporaryDirectory() as tmp:
        cache = None if args.no_cache else CACHE
        result = run(names, args.split, args.limit, Path(tmp), cache, not args.no_small_talk)
    print(json.dumps(result) if args.json else table(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
