"""Test setup for the history tests (builders live in ``history_builders``)."""

from __future__ import annotations

import sys
from pathlib import Path

# pytest puts this folder (not the repo root) on sys.path when tests have no __init__.py.
_ROOT = str(Path(__file__).resolve().parents[2])
if _ROOT not in sys.path:
    sys.path.insert(0, _ROOT)
