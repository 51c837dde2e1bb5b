"""The bulk-embedding child process (see ``server.embedding.child``): reads a JSON request
on stdin, writes the vectors' raw float32 rows on stdout, exits."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

from .fastembed import FastEmbedEmbedder

__all__: list[str] = []


def _main() -> None:
    request = json.loads(sys.stdin.buffer.read())
    settings = dict(request["settings"])
    for key in ("model_dir", "cache_dir"):
        if settings.get(key):
            settings[key] = Path(settings[key])
    embedder = FastEmbedEmbedder(**settings, bulk_threshold=None)
    vectors = embedder.embed(request["texts"])
    sys.stdout.buffer.write(np.ascontiguousarray(vectors, dtype=np.float32).tobytes())
    sys.stdout.buffer.flush()


if __name__ == "__main__":
    _main()
