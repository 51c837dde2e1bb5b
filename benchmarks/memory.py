"""Memory (RSS) of a process holding the real model and a 10,000-chunk index.

    .venv/bin/python benchmarks/memory.py [--chunks 10000] [--batch-size 16]

Two fresh processes: "cold" embeds every chunk with the real model (filling an embedding
cache), "warm" is a restart that reads the index from that cache and loads the model for the
query. Each searches once without and once with a six-step plan, then prints its peak RSS
(VmHWM, which includes the transient activations of embedding batches) and its steady RSS
after a search (VmRSS). Target: <= 300 MB (<= 400 MB with the plan).
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import tempfile
from pathlib import Path

from _common import SHARED


def _status(field: str) -> float:
    text = Path("/proc/self/status").read_text()
    return int(text.split(f"{field}:")[1].split()[0]) / 1024


def child(chunks: int, batch_size: int, cache: Path) -> None:
    from context_broker.server.embedding import FastEmbedEmbedder, resolve_model_dir
    from context_broker.server.settings import AppConfig

    from contextcore.catalog import Catalog
    from contextcore.embedding_cache import SqliteEmbeddingCache
    from contextcore.items import Tool
    from contextcore.loaders import load_catalog_json
    from contextcore.search import SearchEngine

    registry = load_catalog_json(SHARED / "mcp-registry" / "catalog.json")
    words = [w for t in registry for w in t.description.split()]
    rng = random.Random(0)
    tools = [
        Tool(f"s{i % 40}", f"t{i}", " ".join(rng.choices(words, k=rng.randint(10, 40))))
        for i in range(chunks)
    ]
    config = AppConfig()
    embedder = FastEmbedEmbedder(
        config.search.model, model_dir=resolve_model_dir(config), batch_size=batch_size
    )
    engine = SearchEngine(Catalog(tools), embedder, cache=SqliteEmbeddingCache(cache))
    stats = engine.index()
    result = engine.search("read a file from the repository")
    assert result.mode == "hybrid" and result.hits
    steps = ["read a file", "search the web", "draw a chart", "write a document"]
    planned = engine.search("make a report", intents=[*steps, "convert it to PDF", "email it"])
    assert planned.hits
    print(
        json.dumps(
            {
                "chunks": stats.chunks,
                "embedded": stats.embedded,
                "peak_mb": _status("VmHWM"),
                "steady_mb": _status("VmRSS"),
            }
        )
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--chunks", type=int, default=10_000)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--child", type=Path, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child is not None:
        child(args.chunks, args.batch_size, args.child)
        return
    with tempfile.TemporaryDirectory() as tmp:
        cache = Path(tmp) / "emb.sqlite3"
        for phase in ("cold", "warm"):
            out = subprocess.run(
                [
                    sys.executable,
                    __file__,
                    "--chunks",
                    str(args.chunks),
                    "--batch-size",
                    str(args.batch_size),
                    "--child",
                    str(cache),
                ],
                capture_output=True,
                text=True,
                check=True,
            )
            r = json.loads(out.stdout.strip().splitlines()[-1])
            print(
                f"{phase}: {r['chunks']} chunks ({r['embedded']} embedded), "
                f"peak RSS {r['peak_mb']:.0f} MB, steady RSS {r['steady_mb']:.0f} MB"
            )
    print("target: <= 300 MB")


if __name__ == "__main__":
    main()
