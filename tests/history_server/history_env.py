"""A broker with its history service behind the broker's own MCP server
(``server.mcp_server.build_server``), with summarizer providers under test control."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mcp import Client
from mcp.server import Server

from contextcore.broker import ContextBroker
from contextcore.config import BrokerConfig, HistoryConfig, SummarizerConfig
from contextcore.embedding import HashEmbedder
from contextcore.factory import build_broker
from contextcore.history_service import HistoryService
from server.stores.sqlite import SqliteSessionStore
from server.mcp_server import build_server
from server.summarizers import SummarizerFactory

KEY = "sk-test-secret-key-1234"


@dataclass
class HistoryEnv:
    broker: ContextBroker
    service: HistoryService
    summarizers: SummarizerFactory
    server: Server[Any]

    def client(self, mode: str = "auto", **kwargs: Any) -> Client:
        return Client(self.server, mode=mode, **kwargs)


def build_env(
    *,
    history: HistoryConfig | None = None,
    summarizer: SummarizerConfig | None = None,
    store_path: Path | None = None,
    environ: Mapping[str, str] | None = None,
) -> HistoryEnv:
    config = history or HistoryConfig()
    if summarizer is not None:
        config = config.model_copy(update={"summarizer": summarizer})
    store = SqliteSessionStore(store_path) if store_path else None
    broker = build_broker(BrokerConfig(), embedder=HashEmbedder(), store=store).broker
    service = HistoryService(broker, config)
    summarizers = SummarizerFactory(
        config.summarizer, environ={"TEST_LLM_KEY": KEY} if environ is None else environ
    )
    server = build_server(broker, history=service, summarizers=summarizers)
    return HistoryEnv(broker, service, summarizers, server)
