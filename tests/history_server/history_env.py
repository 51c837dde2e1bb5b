"""A broker with its history service behind an MCP server built like
``server.mcp_server.build_server``, plus the history tools and the request context passed
to the runner (so summaries can use sampling)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mcp import Client, MCPError, types
from mcp.server import Server, ServerRequestContext

from contextcore.broker import ContextBroker
from contextcore.config import BrokerConfig, HistoryConfig, SummarizerConfig
from contextcore.embedding import HashEmbedder
from contextcore.factory import build_broker
from contextcore.history_service import HistoryService
from contextcore.store_sqlite import SqliteSessionStore
from server.mcp_server import list_tools
from server.summarizers import SummarizerFactory
from server.tool_calls import ToolRunner
from tools.history import HISTORY_TOOLS
from tools.surface import CONTEXT_TOOLS

KEY = "sk-test-secret-key-1234"


@dataclass
class HistoryEnv:
    broker: ContextBroker
    service: HistoryService
    summarizers: SummarizerFactory
    server: Server[Any]

    def client(self, mode: str = "auto", **kwargs: Any) -> Client:
        return Client(self.server, mode=mode, **kwargs)


def build_test_server(runner: ToolRunner) -> Server[Any]:
    tool_list = list_tools(tuple(runner.specs.values()))

    async def on_list_tools(
        ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=tool_list)

    async def on_call_tool(
        ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        spec = runner.specs.get(params.name)
        if spec is None:
            raise MCPError(types.INVALID_PARAMS, f"unknown tool {params.name!r}")
        return await runner.call(spec, params.arguments or {}, ctx)

    return Server(
        "context-broker-test",
        get_tool_input_schema=lambda name: (
            runner.specs[name].input_schema() if name in runner.specs else None
        ),
        on_list_tools=on_list_tools,
        on_call_tool=on_call_tool,
    )


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
    runner = ToolRunner(
        broker, CONTEXT_TOOLS + HISTORY_TOOLS, history=service, summarizers=summarizers
    )
    return HistoryEnv(broker, service, summarizers, build_test_server(runner))
