"""Fixtures for the server tests: a small config on disk and in-memory clients."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from context_broker.server.host.mcp_server import build_server
from context_broker.server.parts import build_parts
from context_broker.server.settings import AppConfig, load_config
from mcp import Client

from tests.support.broker_procs import write_config
from tests.support.hash_embedder import HashEmbedder


@pytest.fixture
def config_path(tmp_path: Path) -> Path:
    return write_config(tmp_path)


@pytest.fixture
def config(config_path: Path) -> AppConfig:
    return load_config(config_path, environ={})


@pytest.fixture
def make_client(config: AppConfig) -> Callable[..., Client]:
    """``make_client(mode=...)`` → an in-memory client of a broker with the hash embedder."""

    def make(mode: str = "auto", **overrides: object) -> Client:
        parts = build_parts(config, embedder=HashEmbedder())
        return Client(build_server(parts.broker), mode=mode, **overrides)  # type: ignore[arg-type]

    return make
