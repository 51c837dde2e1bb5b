"""A broker with its history service behind the broker's own MCP server
(``server.host.mcp_server.build_server``), with summarizer providers under test control."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from context_broker.server.host.mcp_server import build_server
from context_broker.server.parts import build_parts
from context_broker.server.settings import AppConfig
from context_broker.server.stores.sqlite import SqliteSessionStore
from context_broker.server.summarizers import SummarizerFactory
from fake_llm import FakeLLM
from mcp import Client
from mcp.server import Server

from contextcore.config import HistoryConfig, SummarizerConfig
from contextcore.services.broker import ContextBroker
from contextcore.services.history import HistoryService
from tests.support.hash_embedder import HashEmbedder

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
    broker = build_parts(AppConfig(), embedder=HashEmbedder(), store=store).broker
    service = HistoryService(broker, config)
    summarizers = SummarizerFactory(
        config.summarizer, environ={"TEST_LLM_KEY": KEY} if environ is None else environ
    )
    server = build_server(broker, history=service, summarizers=summarizers)
    return HistoryEnv(broker, service, summarizers, server)


def chat(n: int, start: int = 0) -> list[dict[str, Any]]:
    """``n`` alternating user/assistant messages with a decision and a path each."""
    roles = ("user", "assistant")
    return [
        {"role": roles[i % 2], "content": f"message {i}: we decided to edit src/file_{i}.py"}
        for i in range(start, start + n)
    ]


def tool_turn(call_id: str) -> list[dict[str, Any]]:
    """An OpenAI-style read_file call and its result."""
    return [
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": call_id,
                    "type": "function",
                    "function": {"name": "read_file", "arguments": '{"path": "a.py"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": call_id, "content": "print('hi')"},
    ]


def summarizer_config(fake: FakeLLM, provider: str, **overrides: Any) -> SummarizerConfig:
    """Summarizer settings pointing at ``fake`` as the ``provider`` API."""
    base = fake.url if provider == "anthropic" else f"{fake.url}/v1"
    values: dict[str, Any] = {
        "provider": provider,
        "model": "test-model",
        "base_url": base,
        "api_key_env": "TEST_LLM_KEY",
        "timeout": 2.0,
    }
    return SummarizerConfig(**{**values, **overrides})
