"""Shared fixtures of the hardening tests."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from context_broker.server.host.mcp_server import build_server
from context_broker.server.parts import build_parts
from context_broker.server.settings import AppConfig
from mcp import Client

from contextcore.config import HistoryConfig, LimitsConfig
from contextcore.services.history import HistoryService
from tests.support.hash_embedder import HashEmbedder


@pytest.fixture
def history_client() -> Callable[..., Client]:
    """``history_client(limits)``: an in-memory client of a broker (memory store) with its
    history tools and the given ``[limits]``."""

    def make(limits: LimitsConfig | None = None) -> Client:
        broker = build_parts(AppConfig(), embedder=HashEmbedder()).broker
        service = HistoryService(broker, HistoryConfig(), limits=limits)
        server: Any = build_server(broker, history=service)
        return Client(server)

    return make
