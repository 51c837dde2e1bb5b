"""Code mode tests: the helpers live in code_env.py (imported by name, like tests/gateway)."""

from __future__ import annotations

import pytest


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"
