"""Benchmark: the general history pipeline on long generated agent conversations.

Prints the median time of several runs for 1,000 and 10,000 messages (tool calls, parallel
calls, large tool results), the growth ratio, and checks every output window is valid.

    python benchmarks/history_pipeline.py [--quick]
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from contextcore.history import build_pipeline, parse_messages, validate_window

TOOLS = ("read_file", "write_file", "run_command", "list_directory", "browser_snapshot")


def generate_conversation(
    size: int, seed: int = 0, interrupted: float = 0.0
) -> list[dict[str, Any]]:
    """An OpenAI-style agent conversation of about ``size`` messages (whole turns).

    ``interrupted`` is the share of tool calls whose result never arrives.
    """
    rng = random.Random(seed)
    out: list[dict[str, Any]] = [{"role": "system", "content": "You are a careful coding agent."}]
    turn = 0
    while len(out) < size:
        turn += 1
        out.append({"role": "user", "content": f"Step {turn}: please continue with task {turn}."})
        calls = [_call(rng, turn, j) for j in range(rng.choice((1, 1, 2, 3)))]
        out.append({"role": "assistant", "content": None, "tool_calls": calls})
        for call in calls:
            if rng.random() >= interrupted:
                out.append({"role": "tool", "tool_call_id": call["id"], "content": _body(rng)})
        out.append({"role": "assistant", "content": f"Done with step {turn}; next I will check."})
    return out


def _call(rng: random.Random, turn: int, index: int) -> dict[str, Any]:
    name = rng.choice(TOOLS)
    arguments = {"path": f"src/module_{rng.randrange(40)}.py"}
    if name == "write_file":
        arguments["content"] = "x = 1\n" * rng.randrange(10, 400)
    return {
        "id": f"call_{turn}_{index}",
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(arguments)},
    }


def _body(rng: random.Random) -> str:
    if rng.random() < 0.2:
        return json.dumps(
            {"nodes": [{"role": "button", "name": f"b{i}"} for i in range(rng.randrange(50, 600))]}
        )
    return "line of output\n" * rng.randrange(5, 800)


def _median_ms(action: Callable[[], Any], runs: int) -> tuple[float, Any]:
    times, result = [], None
    for _ in range(runs):
        start = time.perf_counter()
        result = action()
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times), result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer runs")
    args = parser.parse_args()
    runs = 3 if args.quick else 9
    pipeline = build_pipeline("general")
    cold: dict[int, float] = {}
    warm: dict[int, float] = {}
    print(f"general pipeline {pipeline.names}, median of {runs} runs")
    print("  cold = Pipeline.run on wire dicts (validate, parse, JSON-size every message)")
    print("  warm = Pipeline.run_parsed on stored messages (the session path; sizes cached)")
    for size in (1_000, 10_000):
        messages = [dict(m.raw) for m in parse_messages(generate_conversation(size))]
        cold[size], result = _median_ms(lambda m=messages: pipeline.run(m), runs)
        stored = parse_messages(messages)
        warm[size], _ = _median_ms(lambda s=stored: pipeline.run_parsed(s, "openai"), runs)
        problems = validate_window(result.messages)
        report = result.report
        print(
            f"  {size:>6} messages: cold {cold[size]:7.1f} ms, warm {warm[size]:7.1f} ms  "
            f"(kept {report.messages_out}, tokens {report.tokens_before} -> "
            f"{report.tokens_after}, problems {len(problems)})"
        )
    print(
        f"  growth 1k -> 10k: cold x{cold[10_000] / cold[1_000]:.1f}, "
        f"warm x{warm[10_000] / warm[1_000]:.1f} (linear would be x10)"
    )
    verdict = "met" if cold[1_000] <= 50 else "MISSED"
    print(f"  target <= 50 ms for 1,000 messages (cold): {verdict}")


if __name__ == "__main__":
    main()
