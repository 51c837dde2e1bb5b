"""The gateway's own state files (pins, OAuth tokens), written whole or not at all."""

from __future__ import annotations

import os
import tempfile
from contextlib import suppress
from pathlib import Path

__all__ = ["replace_private"]


def replace_private(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary file beside it and a rename, so a reader
    never sees half a file. The file is created 0600 (``mkstemp``): readable by its owner
    only. ``OSError`` when it cannot be written; the temporary file is then removed."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.replace(tmp, path)
    except BaseException:
        with suppress(OSError):
            os.unlink(tmp)
        raise
