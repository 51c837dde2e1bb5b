"""Running another checkout's code beside this one's, for a benchmark's ``--baseline``.

The editable install maps ``context_broker.server``, ``context_broker.tools`` and
``contextcore`` to this repository's folders. A folder on ``PYTHONPATH`` is searched before that
mapping, so :func:`python_path` gives a checkout a ``context_broker`` package made of its own
``server`` and ``tools`` folders, and its own ``contextcore``.
"""

from __future__ import annotations

import functools
import os
import tempfile
from pathlib import Path

__all__ = ["python_path"]


@functools.cache
def _package_of(checkout: Path) -> Path:
    root = Path(tempfile.mkdtemp(prefix="cb-bench-"))
    package = root / "context_broker"
    package.mkdir()
    (package / "__init__.py").write_text("")
    for name in ("server", "tools"):
        (package / name).symlink_to(checkout.resolve() / name)
    return root


def python_path(checkout: Path) -> str:
    """The ``PYTHONPATH`` under which a Python imports ``checkout``'s code."""
    return os.pathsep.join((str(_package_of(checkout)), str(checkout)))
