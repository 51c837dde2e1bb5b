"""A broker over a fixed catalog (rules, references, tools; no agent items, so what a request
selects is known) behind an in-memory MCP server with the context, history and assembly
tools, plus call helpers."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import anyio
from mcp import Client, MCPError, types
from mcp.server import Server, ServerRequestContext

from contextcore.assembly import AssemblyModelSpec
from contextcore.broker import ContextBroker
from contextcore.catalog import Catalog
from contextcore.config import HistoryConfig
from contextcore.embedding import HashEmbedder
from contextcore.history_service import HistoryService
from contextcore.items import Reference, Rule, Tool
from contextcore.search import SearchEngine
from server.mcp_server import list_tools
from server.tool_calls import ToolRunner
from tools._spec import ToolContext, ToolSpec
from tools.assembly import ASSEMBLE_CONTEXT, ASSEMBLY_TOOLS
from tools.history import HISTORY_TOOLS
from tools.surface import CONTEXT_TOOLS

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


def with_models(models: Mapping[str, AssemblyModelSpec]) -> ToolSpec:  # type: ignore[type-arg]
    """ASSEMBLE_CONTEXT seeing ``models`` as the config's named models (what the server
    will do by passing them to ToolContext)."""

    def run(ctx: ToolContext, args: Any) -> Any:
        return ASSEMBLE_CONTEXT.run(dataclasses.replace(ctx, models=models), args)

    return dataclasses.replace(ASSEMBLE_CONTEXT, run=run)


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
        "context-broker-assembly-test",
        get_tool_input_schema=lambda name: (
            runner.specs[name].input_schema() if name in runner.specs else None
        ),
        on_list_tools=on_list_tools,
        on_call_tool=on_call_tool,
    )


def build_env(
    *,
    history: HistoryConfig = QUIET,
    models: Mapping[str, Mapping[str, Any]] | None = None,
) -> AssemblyEnv:
    catalog = Catalog(sample_items())
    broker = ContextBroker(catalog, SearchEngine(catalog, HashEmbedder()))
    service = HistoryService(broker, history)
    specs = {k: AssemblyModelSpec.model_validate(v) for k, v in (models or {}).items()}
    assembly = (with_models(specs),) if models else ASSEMBLY_TOOLS
    runner = ToolRunner(broker, CONTEXT_TOOLS + HISTORY_TOOLS + assembly, history=service)
    return AssemblyEnv(broker, service, build_test_server(runner))


async def call(client: Client, name: str, /, **arguments: Any) -> dict[str, Any]:
    with anyio.fail_after(10):
        result = await client.call_tool(name, arguments)
    assert not result.is_error, result.content
    assert result.content[0].type == "text" and result.content[0].text
    assert isinstance(result.structured_content, dict)
    return result.structured_content


async def error(client: Client, name: str, /, **arguments: Any) -> str:
    with anyio.fail_after(10):
        result = await client.call_tool(name, arguments)
    assert result.is_error, result.structured_content
    text = result.content[0].text  # type: ignore[union-attr]
    assert text.startswith(name)
    return text


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
