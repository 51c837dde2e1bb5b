"""Benchmark: how often trimmed windows break provider rules, LangChain vs ours.

Runs LangChain's ``trim_messages`` (strategy "last", approximate token counter,
include_system=True, with the ``start_on``/``end_on`` settings a user would pick) and our
``general`` pipeline on the same generated agent conversations and budgets, and counts the
outputs that ``validate_window`` rejects (a tool call not answered right after it, a result
without its call, an empty message). Conversations come clean and "messy" (10% of tool
calls interrupted, so their result never arrived). Needs ``pip install langchain-core``.

    python benchmarks/history_vs_langchain.py [--quick]
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from history_pipeline import generate_conversation

from contextcore.history import RunContext, build_pipeline, parse_messages, validate_window

BUDGETS = (2_000, 8_000, 24_000)


def _langchain() -> Any:
    try:
        from langchain_core import messages
    except ImportError:
        sys.exit("this benchmark needs LangChain: pip install langchain-core")
    return messages


def to_langchain(lc: Any, messages: list[dict[str, Any]]) -> list[Any]:
    """Our OpenAI-style dicts as LangChain message objects."""
    out = []
    for message in messages:
        role, content = message["role"], message.get("content") or ""
        if role == "system":
            out.append(lc.SystemMessage(content=content))
        elif role == "user":
            out.append(lc.HumanMessage(content=content))
        elif role == "tool":
            out.append(lc.ToolMessage(content=content, tool_call_id=message["tool_call_id"]))
        else:
            calls = [
                {
                    "name": c["function"]["name"],
                    "args": json.loads(c["function"]["arguments"]),
                    "id": c["id"],
                    "type": "tool_call",
                }
                for c in message.get("tool_calls", [])
            ]
            out.append(lc.AIMessage(content=content, tool_calls=calls))
    return out


def langchain_variants(lc: Any) -> dict[str, Callable[[list[Any], int], list[Any]]]:
    """The trim settings compared, by label."""

    def trim(**extra: Any) -> Callable[[list[Any], int], list[Any]]:
        return lambda msgs, budget: lc.trim_messages(
            msgs,
            max_tokens=budget,
            strategy="last",
            token_counter="approximate",
            include_system=True,
            **extra,
        )

    return {
        "trim_messages(last, include_system)": trim(),
        "trim_messages(last, include_system, start_on=human)": trim(start_on="human"),
        "trim_messages(last, include_system, start_on=human, end_on=(human, tool))": trim(
            start_on="human", end_on=("human", "tool")
        ),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer conversations")
    args = parser.parse_args()
    lc = _langchain()
    count = 15 if args.quick else 60
    rng = random.Random(7)
    ours = build_pipeline("general")
    variants = langchain_variants(lc)
    for label, interrupted in (("clean", 0.0), ("messy (10% interrupted calls)", 0.1)):
        conversations = [
            [
                dict(m.raw)
                for m in parse_messages(
                    generate_conversation(rng.randrange(40, 400), seed=s, interrupted=interrupted)
                )
            ]
            for s in range(count)
        ]
        bad_inputs = sum(1 for c in conversations if validate_window(c))
        runs = len(conversations) * len(BUDGETS)
        print(
            f"\n{label}: {len(conversations)} conversations x {len(BUDGETS)} budgets "
            f"{BUDGETS} = {runs} windows; invalid inputs: {bad_inputs}/{len(conversations)}"
        )
        for name, trim in variants.items():
            invalid, kept = 0, 0
            for conversation in conversations:
                converted = to_langchain(lc, conversation)
                for budget in BUDGETS:
                    window = lc.convert_to_openai_messages(trim(converted, budget))
                    invalid += bool(validate_window(window))
                    kept += len(window)
            print(f"  {name:<75} invalid {invalid:>4}/{runs}  avg kept {kept / runs:6.1f}")
        invalid, kept = 0, 0
        for conversation in conversations:
            for budget in BUDGETS:
                window = ours.run(conversation, _context(budget)).messages
                invalid += bool(validate_window(window))
                kept += len(window)
        print(
            f"  {'ours: general pipeline (sizeLimiter + toolCallBackfill)':<75} "
            f"invalid {invalid:>4}/{runs}  avg kept {kept / runs:6.1f}"
        )


def _context(budget: int) -> RunContext:
    return RunContext(max_tokens=budget)


if __name__ == "__main__":
    main()
