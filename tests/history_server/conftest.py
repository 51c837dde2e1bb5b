"""Fixtures for the history tools: a broker, its history service, an MCP server exposing
both, and a fake LLM API on a real local socket."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

_HERE = str(Path(__file__).resolve().parent)
_ROOT = str(Path(__file__).resolve().parents[2])
for _path in (_ROOT, _HERE):
    if _path not in sys.path:
        sys.path.insert(0, _path)

from fake_llm import FakeLLM  # noqa: E402
from history_env import HistoryEnv, build_env  # noqa: E402

from contextcore.config import HistoryConfig, SummarizerConfig  # noqa: E402


@pytest.fixture
def fake_llm() -> Iterator[FakeLLM]:
    # The providers import their SDK on first use: seconds on a loaded machine, which belong
    # outside the tests' bounded waits (a worker may run a provider test before any other).
    importlib.import_module("anthropic")
    importlib.import_module("openai")
    with FakeLLM() as server:
        yield server


@pytest.fixture
def make_env(tmp_path: Path) -> Callable[..., HistoryEnv]:
    """``make_env(history=..., summarizer=..., store_path=...)`` → broker, service, server."""

    def make(**kwargs: Any) -> HistoryEnv:
        return build_env(**kwargs)

    return make


@pytest.fixture
def env(make_env: Callable[..., HistoryEnv]) -> HistoryEnv:
    return make_env()


@pytest.fixture
def anthropic_config(fake_llm: FakeLLM) -> SummarizerConfig:
    return SummarizerConfig(
        provider="anthropic",
        model="claude-test",
        base_url=fake_llm.url,
        api_key_env="TEST_LLM_KEY",
        timeout=2.0,
    )


__all__ = ["HistoryConfig"]
