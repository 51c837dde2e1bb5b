"""Gateway tests: the helpers live in gateway_env.py (imported by name, like tests/server)."""

from __future__ import annotations

import pytest


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"
