"""Peak memory (RSS) of a process holding the real model and a 10,000-chunk index.

    .venv/bin/python benchmarks/memory.py [--chunks 10000]

The index is built by the real model from texts drawn from the mcp-registry catalog; the
figure is the process's peak resident set (ru_maxrss). Target: <= 300 MB.
"""

from __future__ import annotations

import argparse
import random
import resource

from _common import SHARED

from contextcore.catalog import Catalog
from contextcore.config import BrokerConfig
from contextcore.factory import build_embedder
from contextcore.items import Tool
from contextcore.loaders import load_catalog_json
from contextcore.search import SearchEngine


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--chunks", type=int, default=10_000)
    args = parser.parse_args()
    registry = load_catalog_json(SHARED / "mcp-registry" / "catalog.json")
    words = [w for t in registry for w in t.description.split()]
    rng = random.Random(0)
    tools = [
        Tool(f"s{i % 40}", f"t{i}", " ".join(rng.choices(words, k=rng.randint(10, 40))))
        for i in range(args.chunks)
    ]
    embedder = build_embedder(BrokerConfig())
    assert embedder is not None
    engine = SearchEngine(Catalog(tools), embedder)
    stats = engine.index()
    result = engine.search("read a file from the repository")
    assert result.mode == "hybrid" and result.hits
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"items {stats.items}, chunks {stats.chunks}, model {embedder.status().source}")
    print(f"peak RSS {peak_mb:.0f} MB (target <= 300 MB)")


if __name__ == "__main__":
    main()
