"""Time of every text path on adversarial input, at n, 2n, 4n and 8n characters.

Inputs are single tokens without spaces of the kinds that made patterns quadratic (a hex
blob, ``a-a-a-...``, ``a/a/a/...``, ``Aa_0.`` repeated) and, for contrast, prose sentences.
The largest size is ``[server] max_message_chars`` (1,000,000). Paths:

- ``summarize``: the extractive summarizer over one message;
- ``history``: append the message plus 11 short ones, then ``get_history``, which summarizes
  (the history limits are raised so a 1,000,000-character message is accepted);
- ``request``: ``build_request_context`` with the text as the message (lexical search over a
  small catalog);
- ``chunk+bm25``: chunking a rule whose text and description are the input, and indexing the
  chunks with BM25.

Each row prints the fastest of ``--runs`` times per size, the ratio to the previous size and
the ratio of 8n to n: linear growth shows as about 2x per doubling and 8x overall (quadratic
as 4x and 64x). The baseline row is a plainly
linear operation on the same input (compact JSON of the message, then ``str.split``),
measured in the same run.

    .venv/bin/python benchmarks/text_paths.py [--base 125000] [--runs 3]
"""

from __future__ import annotations

import argparse
import gc
import itertools
import json
from collections.abc import Callable

from _common import timed
from context_broker.server.parts import build_parts
from context_broker.server.settings import AppConfig

from contextcore.chunking import item_chunks
from contextcore.config import HistoryConfig, InlineItem, LimitsConfig
from contextcore.history import ExtractiveSummarizer
from contextcore.items import Rule
from contextcore.lexical import Bm25Index
from contextcore.services.history import HistoryService
from tests.support.hash_embedder import HashEmbedder

UNITS = {
    "hex": "deadbeef",
    "dashes": "a-",
    "slashes": "src_/",
    "mixed": "Aa_0.",
    "prose": "The build failed in src/app.py, so we decided to retry. ",
}
LIMITS = LimitsConfig(max_history_message_chars=1_100_000, max_append_chars=2_000_000)
RULES = tuple(
    InlineItem(name=f"rule-{i}", description=f"rule about topic {i}", text=f"Do thing {i}.")
    for i in range(20)
)


def blob(unit: str, size: int) -> str:
    """``unit`` repeated to exactly ``size`` characters."""
    return (unit * (size // len(unit) + 1))[:size]


def _baseline(text: str) -> None:
    json.dumps({"role": "user", "content": text}).split()


def _summarize(text: str) -> None:
    ExtractiveSummarizer().summarize([{"role": "user", "content": text}], None, 500)


def _history(text: str) -> None:
    broker = build_parts(AppConfig(), embedder=HashEmbedder()).broker
    service = HistoryService(broker, HistoryConfig(), limits=LIMITS)
    sid = broker.create_session("bench").session_id
    rest = [
        {"role": "assistant" if i % 2 else "user", "content": f"message {i}"} for i in range(1, 12)
    ]
    service.append_messages(sid, [{"role": "user", "content": text}, *rest])
    result = service.get_history(sid)
    assert result.summary_update is not None and result.summary_update.stored


def _request_builder() -> Callable[[str], None]:
    config = AppConfig(rules=RULES)
    broker = build_parts(config, embedder=HashEmbedder()).broker
    sid = broker.create_session("bench").session_id

    def run(text: str) -> None:
        broker.build_request_context(sid, text)

    return run


def _chunk_bm25(text: str) -> None:
    rule = Rule(name="long", text=text, description=text[: len(text) // 10])
    Bm25Index(item_chunks(rule))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--base", type=int, default=125_000, help="n, in characters")
    parser.add_argument("--runs", type=int, default=5, help="runs per cell (the fastest)")
    args = parser.parse_args()
    sizes = [args.base * k for k in (1, 2, 4, 8)]
    paths: dict[str, Callable[[str], None]] = {
        "baseline": _baseline,
        "summarize": _summarize,
        "history": _history,
        "request": _request_builder(),
        "chunk+bm25": _chunk_bm25,
    }
    head = " ".join(f"{s:>10,}" for s in sizes)
    print(f"{'path':<11} {'input':<8} {head}   per doubling (linear ~2x)   8n/n (linear ~8x)")
    worst = 0.0
    for unit_name, unit in UNITS.items():
        for path_name, path in paths.items():
            times = [_best(path, blob(unit, size), args.runs) for size in sizes]
            ratios = [b / a for a, b in itertools.pairwise(times)]
            overall = times[-1] / times[0]
            if path_name != "baseline":
                worst = max(worst, overall)
            cells = " ".join(f"{t * 1000:>8.1f}ms" for t in times)
            steps = " ".join(f"{r:.2f}x" for r in ratios)
            print(f"{path_name:<11} {unit_name:<8} {cells}   {steps:<26} {overall:.1f}x")
    print(f"largest 8n/n ratio over the text paths: {worst:.1f}x (linear: 8x, quadratic: 64x)")


def _best(path: Callable[[str], None], text: str, runs: int) -> float:
    """The fastest of ``runs`` calls: the least disturbed by whatever else the machine runs."""
    gc.collect()
    return min(timed(lambda: path(text)) for _ in range(runs))


if __name__ == "__main__":
    main()
