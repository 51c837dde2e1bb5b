"""Embedding a large batch in a short-lived child process.

The onnxruntime arena grows with every batch it runs and is never given back; embedding a
whole catalog in the serving process would leave it holding that memory for good. A child
process embeds instead and exits, and the serving process keeps only the vectors. Run as
``python -m server.embedding._child_main``: a JSON request on stdin, raw float32 rows on
stdout.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Sequence
from typing import Any

import numpy as np

from contextcore.embedding import Vectors
from contextcore.errors import ModelError

__all__ = ["embed_in_child"]


def embed_in_child(settings: dict[str, Any], texts: Sequence[str], *, timeout: float) -> Vectors:
    """Embed ``texts`` with a fresh ``FastEmbedEmbedder(**settings)`` in a child process."""
    request = json.dumps({"settings": settings, "texts": list(texts)}).encode("utf-8")
    try:
        done = subprocess.run(
            [sys.executable, "-m", "context_broker.server.embedding._child_main"],
            input=request,
            capture_output=True,
            timeout=timeout,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ModelError(f"bulk embedding process failed: {exc}") from exc
    if done.returncode != 0:
        tail = done.stderr.decode("utf-8", "replace").strip()[-600:]
        raise ModelError(f"bulk embedding process exited with {done.returncode}: {tail}")
    rows = np.frombuffer(done.stdout, dtype=np.float32)
    if not texts or rows.size % len(texts):
        raise ModelError("bulk embedding process returned a malformed result")
    return rows.reshape(len(texts), rows.size // len(texts)).copy()
