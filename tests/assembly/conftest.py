"""Fixtures for assemble_context: a broker with a fixed catalog, its history service, and an
MCP server exposing the broker's tools plus ASSEMBLY_TOOLS (built locally until the tool is
registered in ``server.host.mcp_server``)."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

_HERE = str(Path(__file__).resolve().parent)
_ROOT = str(Path(__file__).resolve().parents[2])
for _path in (_ROOT, _HERE):
    if _path not in sys.path:
        sys.path.insert(0, _path)

from assembly_env import AssemblyEnv, build_env  # noqa: E402


@pytest.fixture
def make_env() -> Callable[..., AssemblyEnv]:
    """``make_env(history=HistoryConfig(...), models={...})`` → broker, service, server."""

    def make(**kwargs: Any) -> AssemblyEnv:
        return build_env(**kwargs)

    return make


@pytest.fixture
def env(make_env: Callable[..., AssemblyEnv]) -> AssemblyEnv:
    return make_env()
