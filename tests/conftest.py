"""Settings every test shares: the Hypothesis profile, and the marks of the long suites.

Property tests stay random where developers run them (each run tries new cases), and run
derandomized under CI (``HYPOTHESIS_PROFILE=ci``, which ``.ci/run`` sets): the same cases on
every run and no example database, so whether a change lands never depends on luck.

The suites that take long carry a mark, so the fast loop of CONTRIBUTING can leave them out
(``-m "not slow and not conformance and not browser"``): ``conformance`` on every test under
``tests/conformance/`` (the MCP conformance suite in Node), ``browser`` on every test that uses
the ``browser`` fixture (Chromium), and ``slow("why")`` set by a test module itself, saying why
it cannot be quick. The modules with such tests run first, so that under pytest-xdist no worker
starts a long test when the others are nearly done.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import settings

settings.register_profile("ci", derandomize=True, database=None, print_blob=True)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))

CONFORMANCE_DIR = Path(__file__).resolve().parent / "conformance"
LONG_MARKS = ("slow", "conformance", "browser")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if CONFORMANCE_DIR in item.path.parents:
            item.add_marker(pytest.mark.conformance)
        if "browser" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.browser)
    # Whole modules move (a stable sort), so module-scoped fixtures still start once.
    long_modules = {item.path for item in items if _is_long(item)}
    items.sort(key=lambda item: item.path not in long_modules)


def _is_long(item: pytest.Item) -> bool:
    return any(item.get_closest_marker(name) for name in LONG_MARKS)
