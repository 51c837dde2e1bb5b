"""Builds the broker's MCP server (low-level ``Server``: exact schemas and error control)
from an already built broker; the broker reaches the handlers through closures."""

from __future__ import annotations

import logging
from typing import Any

from mcp import MCPError, types
from mcp.server import Server, ServerRequestContext

from contextcore.broker import ContextBroker
from tools.surface import CONTEXT_TOOLS, ToolSpec

from .resources import ResourceReader, resource_templates
from .tool_calls import ToolRunner

__all__ = ["SERVER_NAME", "build_server", "list_tools"]

log = logging.getLogger(__name__)

SERVER_NAME = "context-broker"
INSTRUCTIONS = (
    "Call create_session once per conversation and keep its session_id. Before answering each "
    "user message, call build_request_context(session_id, message) and use the rules, "
    "references and tools it returns. list_turns and get_request_context show later what was "
    "used for any turn and why."
)


def list_tools(specs: tuple[ToolSpec, ...] = CONTEXT_TOOLS) -> list[types.Tool]:  # type: ignore[type-arg]
    """The MCP tool definitions of ``specs``."""
    return [
        types.Tool(
            name=s.name,
            description=s.description,
            input_schema=s.input_schema(),
            output_schema=s.output_schema(),
            annotations=types.ToolAnnotations(read_only_hint=s.read_only, open_world_hint=False),
        )
        for s in specs
    ]


def build_server(broker: ContextBroker, *, version: str = "") -> Server[Any]:
    """An MCP server exposing ``broker``'s tools and resources on any transport."""
    runner = ToolRunner(broker, CONTEXT_TOOLS)
    reader = ResourceReader(broker)
    tool_list = list_tools()

    async def on_list_tools(
        ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=tool_list)

    async def on_call_tool(
        ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        spec = runner.specs.get(params.name)
        if spec is None:
            names = ", ".join(runner.specs)
            raise MCPError(
                types.INVALID_PARAMS,
                f"unknown tool {params.name[:100]!r}; this server has: {names}",
            )
        return await runner.call(spec, params.arguments or {})

    async def on_list_resources(
        ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListResourcesResult:
        return types.ListResourcesResult(resources=reader.list())

    async def on_list_templates(
        ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListResourceTemplatesResult:
        return types.ListResourceTemplatesResult(resource_templates=resource_templates())

    async def on_read_resource(
        ctx: ServerRequestContext[Any], params: types.ReadResourceRequestParams
    ) -> types.ReadResourceResult:
        return await reader.read(str(params.uri))

    server: Server[Any] = Server(
        SERVER_NAME,
        version=version,
        instructions=INSTRUCTIONS,
        get_tool_input_schema=lambda name: (
            runner.specs[name].input_schema() if name in runner.specs else None
        ),
        on_list_tools=on_list_tools,
        on_call_tool=on_call_tool,
        on_list_resources=on_list_resources,
        on_list_resource_templates=on_list_templates,
        on_read_resource=on_read_resource,
    )
    _add_logging(server)
    return server


def _add_logging(server: Server[Any]) -> None:
    """Accept ``logging/setLevel`` from handshake-era hosts (the broker sends no log
    notifications; its log goes to stderr). Registered after construction: passing it to
    the constructor warns that the capability is deprecated in 2026-07-28, where the SDK
    does not route it anyway."""

    async def on_set_level(
        ctx: ServerRequestContext[Any], params: types.SetLevelRequestParams
    ) -> types.EmptyResult:
        log.debug("client asked for log level %s", params.level)
        return types.EmptyResult()

    server.add_request_handler("logging/setLevel", types.SetLevelRequestParams, on_set_level)
