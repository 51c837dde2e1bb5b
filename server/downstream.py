"""The gateway as the MCP server sees it: the exposed downstream tools, the ``call_tool`` and
``list_servers`` tools, downstream resources and prompts, and ``tools/list_changed``."""

from __future__ import annotations

import logging
import weakref
from typing import Any

import anyio
from mcp import types
from mcp.server.session import ServerSession
from mcp.server.subscriptions import InMemorySubscriptionBus
from mcp.shared.subscriptions import ToolsListChanged
from pydantic import ValidationError

from contextcore.broker import ContextBroker
from contextcore.errors import ContextCoreError
from tools.gateway import (
    CALL_TOOL_DESCRIPTION,
    LIST_SERVERS_DESCRIPTION,
    CallToolArgs,
    ListServersArgs,
    ListServersResult,
    ServerRow,
    render_servers,
)

from .gateway import ExposedTool, Gateway, GatewayError
from .tool_calls import describe_validation_error, error_result

__all__ = ["Downstream"]

log = logging.getLogger(__name__)

CALL_TOOL = "call_tool"
LIST_SERVERS = "list_servers"


def _tool(name: str, description: str, args: type[Any], result: type[Any] | None) -> types.Tool:
    return types.Tool(
        name=name,
        description=description,
        input_schema=args.model_json_schema(),
        output_schema=result.model_json_schema() if result is not None else None,
        annotations=types.ToolAnnotations(
            read_only_hint=result is not None, open_world_hint=result is None
        ),
    )


class Downstream:
    """Routes host requests to the gateway and tells hosts when exposed tools change."""

    def __init__(self, gateway: Gateway, broker: ContextBroker) -> None:
        self.gateway = gateway
        self.broker = broker
        self.bus = InMemorySubscriptionBus()
        self._sessions: weakref.WeakSet[ServerSession] = weakref.WeakSet()
        gateway.on_exposed_change = self._exposed_changed
        self._fixed = [
            _tool(CALL_TOOL, CALL_TOOL_DESCRIPTION, CallToolArgs, None),
            _tool(LIST_SERVERS, LIST_SERVERS_DESCRIPTION, ListServersArgs, ListServersResult),
        ]

    def remember(self, session: ServerSession | None) -> None:
        """Keep a host session that may want ``tools/list_changed`` later."""
        if session is not None:
            self._sessions.add(session)

    async def tools(self) -> list[types.Tool]:
        """``call_tool``, ``list_servers`` and every exposed downstream tool; waits for the
        first connection attempts, each bounded by its server's timeout."""
        await self.gateway.wait_ready()
        return [*self._fixed, *(t.as_mcp_tool() for t in self.gateway.exposed_tools())]

    def handles(self, name: str) -> bool:
        return name in (CALL_TOOL, LIST_SERVERS) or self.gateway.resolve(name) is not None

    async def call(
        self, name: str, arguments: dict[str, Any], session: ServerSession | None
    ) -> types.CallToolResult:
        """Run a gateway tool or forward an exposed tool; failures become tool errors."""
        if name == LIST_SERVERS:
            return self._list_servers()
        if name == CALL_TOOL:
            try:
                args = CallToolArgs.model_validate(arguments)
            except ValidationError as exc:
                return error_result(
                    f"call_tool: invalid arguments: {describe_validation_error(exc)}"
                )
            if args.session_id is not None:
                try:
                    self.broker.session(args.session_id)
                except ContextCoreError as exc:
                    return error_result(f"call_tool: {exc.field}: {exc.message}")
            return await self._forward(args.server, args.tool, args.arguments, session)
        target = self.gateway.resolve(name)
        assert target is not None
        return await self._forward(target[0], target[1], arguments, session)

    async def _forward(
        self, server: str, tool: str, arguments: dict[str, Any], session: ServerSession | None
    ) -> types.CallToolResult:
        async def progress(value: float, total: float | None, message: str | None) -> None:
            if session is not None:
                await session.report_progress(value, total, message)

        try:
            return await self.gateway.call_tool(server, tool, arguments, progress_callback=progress)
        except GatewayError as exc:
            return error_result(str(exc))

    def _list_servers(self) -> types.CallToolResult:
        rows = []
        for status in self.gateway.status():
            d = status.to_dict()
            rows.append(
                ServerRow(
                    name=d["name"],
                    transport=d["transport"],
                    state=d["state"],
                    connected=d["connected"],
                    tool_count=d["toolCount"],
                    last_error=d["lastError"],
                    last_refresh=d["lastRefresh"],
                    reconnects=d["reconnects"],
                )
            )
        out = ListServersResult(servers=rows)
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=render_servers(out))],
            structured_content=out.model_dump(mode="json"),
        )

    async def _exposed_changed(self, exposed: list[ExposedTool]) -> None:
        log.info("exposed downstream tools changed (%d now); notifying hosts", len(exposed))
        await self.bus.publish(ToolsListChanged())
        for session in list(self._sessions):
            try:
                with anyio.fail_after(5):
                    await session.send_tool_list_changed()
            except Exception as exc:  # a host that went away must not stop the others
                log.debug("could not send tools/list_changed: %s", exc)
                self._sessions.discard(session)
