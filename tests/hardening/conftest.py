"""Shared fixtures of the hardening tests."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from mcp import Client

from contextcore.config import BrokerConfig, HistoryConfig, LimitsConfig
from contextcore.embedding import HashEmbedder
from contextcore.factory import build_broker
from contextcore.history_service import HistoryService
from server.mcp_server import build_server


@pytest.fixture
def history_client() -> Callable[..., Client]:
    """``history_client(limits)``: an in-memory client of a broker (memory store) with its
    history tools and the given ``[limits]``."""

    def make(limits: LimitsConfig | None = None) -> Client:
        broker = build_broker(BrokerConfig(), embedder=HashEmbedder()).broker
        service = HistoryService(broker, HistoryConfig(), limits=limits)
        server: Any = build_server(broker, history=service)
        return Client(server)

    return make
