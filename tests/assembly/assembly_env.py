"""A broker over a fixed catalog (rules, references, tools; no agent items, so what a request
selects is known) behind an in-memory MCP server with the context, history and assembly
tools, plus call helpers."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from context_broker.server.host.mcp_server import build_server
from mcp import Client
from mcp.server import Server

from contextcore.assembly import AssemblyModelSpec
from contextcore.catalog import Catalog
from contextcore.config import HistoryConfig
from contextcore.items import Reference, Rule, Tool
from contextcore.search import SearchEngine
from contextcore.services.broker import ContextBroker
from contextcore.services.history import HistoryService
from tests.support.hash_embedder import HashEmbedder
from tests.support.mcp_calls import call

QUIET = HistoryConfig(auto_summarize=False)


def sample_items() -> list[Rule | Reference | Tool]:
    return [
        Rule("tone", "Answer plainly.", "How to talk", include="always", priority=5),
        Rule("commits", "Imperative subject lines.", "Commit messages", include="always"),
        Rule("release", "Tag and publish.", "Release steps", include="manual"),
        Reference("api", "GET /orders returns orders.", "Orders HTTP API", include="always"),
        Reference("schema", "orders(id, status)", "Database schema", include="manual"),
        Tool(
            "time",
            "get_current_time",
            "Get the current time in a timezone",
            {"type": "object", "properties": {"timezone": {"type": "string"}}},
            include="manual",
        ),
    ]


@dataclass
class AssemblyEnv:
    broker: ContextBroker
    service: HistoryService
    server: Server[Any]

    def client(self) -> Client:
        return Client(self.server)


def build_env(
    *,
    history: HistoryConfig = QUIET,
    models: Mapping[str, Mapping[str, Any]] | None = None,
) -> AssemblyEnv:
    """The real server (``build_server``) over a fixed catalog; ``models`` are passed as the
    config's named models."""
    catalog = Catalog(sample_items())
    broker = ContextBroker(catalog, SearchEngine(catalog, HashEmbedder()))
    service = HistoryService(broker, history)
    specs = {k: AssemblyModelSpec.model_validate(v) for k, v in (models or {}).items()}
    return AssemblyEnv(broker, service, build_server(broker, history=service, models=specs))


async def new_session(client: Client, *adds: tuple[str, str, str | None]) -> str:
    sid: str = (await call(client, "create_session"))["session_id"]
    for item_type, name, server in adds:
        args = {"session_id": sid, "type": item_type, "name": name}
        if server is not None:
            args["server"] = server
        await call(client, "add_context_item", **args)
    return sid


def chat(n: int, start: int = 0) -> list[dict[str, Any]]:
    roles = ("user", "assistant")
    return [
        {"role": roles[i % 2], "content": f"message {i}: about src/file_{i}.py"}
        for i in range(start, start + n)
    ]


def tool_turn(call_id: str, body: str = "print('hi')") -> list[dict[str, Any]]:
    call = {
        "id": call_id,
        "type": "function",
        "function": {"name": "read_file", "arguments": '{"path": "a.py"}'},
    }
    return [
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": call_id, "content": body},
    ]
