"""Benchmark: assembling the LLM input with a 20-component model against the history pipeline
alone, on the same 1,000-message session (tool calls, parallel calls, large tool results).

Both run in one process, interleaved, over the session's stored (parsed) history with the
whole session in the window (a summary covering nothing, a task snapshot): the pipeline alone
is ``get_window`` with the ``general`` preset; assembly is parsing the model, building its
pipeline and :func:`contextcore.assembly.assemble` (rules, references, tools, summary,
snapshot, history, message and literals). Target: assembly median <= 2x the pipeline median.

    python benchmarks/assembly.py [--quick]
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from typing import Any

import _common  # noqa: F401  (puts the repository on sys.path)
from history_pipeline import generate_conversation

from contextcore.assembly import assemble, model_pipeline, parse_model
from contextcore.catalog import Catalog
from contextcore.history import (
    ConversationHistory,
    Summary,
    SummaryPolicy,
    TaskSnapshot,
    append_messages,
    get_window,
    validate_window,
)
from contextcore.items import Reference, Rule, Tool
from contextcore.sessions import RequestContext, RequestItem

SIZE = 1_000
BUDGET = 24_000


def catalog() -> Catalog:
    items: list[Rule | Reference | Tool] = []
    for i in range(5):
        items.append(Rule(f"rule-{i}", f"Rule {i}: " + "be careful. " * 40, f"rule {i}"))
        items.append(Reference(f"ref-{i}", f"Reference {i}: " + "api detail. " * 120, f"ref {i}"))
        schema = {"type": "object", "properties": {f"arg{j}": {"type": "string"} for j in range(4)}}
        items.append(Tool("srv", f"tool_{i}", f"Tool {i} does a thing", schema))
    return Catalog(items)


def request(cat: Catalog) -> RequestContext:
    items = tuple(RequestItem(item.ref, "always") for item in cat)
    return RequestContext("r_bench", "s_bench", "2026-01-01T00:00:00Z", "Continue.", items)


def session() -> ConversationHistory:
    history = append_messages(ConversationHistory(), generate_conversation(SIZE))
    snapshot = TaskSnapshot(goal="refactor the modules", completed_actions=("read", "plan"))
    return ConversationHistory(
        messages=history.messages,
        summary=Summary("The agent explored the code base.", 0, "extractive"),
        snapshot=snapshot,
        shape=history.shape,
    )


def model_data() -> dict[str, Any]:
    """20 components: 3 organising parents and 17 leaves (plus the intro)."""

    def literal(i: int) -> dict[str, Any]:
        return {
            "kind": "literal",
            "text": f"Literal note {i}: keep answers short.",
            "framing": "Note:",
        }

    return {
        "intro": "You are assisting with a refactoring task.",
        "components": [
            {
                "kind": "rules",
                "children": [
                    {"kind": "rules", "framing": "Follow these rules:"},
                    literal(0),
                    literal(1),
                ],
            },
            {
                "kind": "references",
                "children": [{"kind": "references"}, {"kind": "tools"}, literal(2), literal(3)],
            },
            {
                "kind": "summary",
                "children": [{"kind": "summary"}, {"kind": "snapshot"}, literal(4), literal(5)],
            },
            literal(6),
            literal(7),
            {"kind": "history", "framing": "The conversation so far:"},
            literal(8),
            literal(9),
            {"kind": "message", "framing": "The user now asks:"},
        ],
        "filters": "general",
    }


def _median_pair(
    first: Callable[[], Any], second: Callable[[], Any], runs: int
) -> tuple[float, float, Any, Any]:
    a_times, b_times = [], []
    a = b = None
    for _ in range(runs):
        start = time.perf_counter()
        a = first()
        a_times.append((time.perf_counter() - start) * 1000)
        start = time.perf_counter()
        b = second()
        b_times.append((time.perf_counter() - start) * 1000)
    return statistics.median(a_times), statistics.median(b_times), a, b


def _count(node: dict[str, Any]) -> int:
    return 1 + sum(_count(child) for child in node.get("children", ()))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer runs")
    args = parser.parse_args()
    runs = 5 if args.quick else 21
    cat = catalog()
    context = request(cat)
    history = session()
    policy = SummaryPolicy(window_without_summary=SIZE * 2)
    data = model_data()

    def pipeline_alone() -> Any:
        return get_window(history, filters="general", max_tokens=BUDGET, policy=policy)

    def assembly() -> Any:
        model = parse_model(data)
        return assemble(
            context,
            cat.get,
            history,
            model,
            pipeline=model_pipeline(model),
            policy=policy,
            max_tokens=BUDGET,
        )

    for _ in range(2):  # warm caches (message JSON sizes) for both
        pipeline_alone(), assembly()
    base, assembled, window, result = _median_pair(pipeline_alone, assembly, runs)
    nodes = sum(_count(c) for c in data["components"])
    report = result.report
    print(f"{len(history.messages)}-message session, {nodes}-component model, median of {runs}")
    print(
        f"  history pipeline alone (get_window, general): {base:7.2f} ms  "
        f"({window.report.messages_out} messages, ~{window.report.tokens_after} tokens)"
    )
    print(
        f"  assembly (parse model + assemble):            {assembled:7.2f} ms  "
        f"({len(result.messages)} messages, ~{report.total_tokens} tokens, "
        f"{len(report.components)} emitting rows)"
    )
    problems = validate_window(result.messages)
    verdict = "met" if assembled <= 2 * base else "MISSED"
    print(f"  ratio {assembled / base:.2f}x (target <= 2x): {verdict}")
    print(f"  assembled input problems: {len(problems)}")
    top = sorted(report.components, key=lambda c: -c.tokens)[:4]
    print("  biggest components: " + ", ".join(f"{c.path} {c.kind} ~{c.tokens}" for c in top))


if __name__ == "__main__":
    main()
