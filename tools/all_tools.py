"""Every tool of the broker, in the order hosts list them: every tool adapter of this package.

The MCP server answers every one of :data:`BROKER_TOOLS`, the request-context view's app-only
tool (``ui_request_context``, defined beside its view in ``server.ui.view``) and, with
downstream servers, the gateway's ``call_tool``, ``list_servers`` and exposed tools; which of
the broker's own it lists is ``[server] tools`` (``server.host.mcp_server.listed_names``).
"""

from __future__ import annotations

from ._spec import ToolSpec
from .analytics import GET_USAGE_STATS
from .assembly import ASSEMBLY_TOOLS
from .catalog import GET_CONTEXT_ITEMS, LIST_CATALOG, SEARCH_CONTEXT_ITEMS
from .history import HISTORY_TOOLS
from .requests import BUILD_REQUEST_CONTEXT, GET_REQUEST_CONTEXT, LIST_TURNS
from .sessions import ADD_CONTEXT_ITEM, CREATE_SESSION, LIST_SESSION_CONTEXT, REMOVE_CONTEXT_ITEM
from .usage import USAGE_TOOLS

__all__ = ["BROKER_TOOLS", "CONTEXT_TOOLS", "ToolSpec"]

CONTEXT_TOOLS: tuple[ToolSpec, ...] = (  # type: ignore[type-arg]
    CREATE_SESSION,
    LIST_SESSION_CONTEXT,
    ADD_CONTEXT_ITEM,
    REMOVE_CONTEXT_ITEM,
    BUILD_REQUEST_CONTEXT,
    SEARCH_CONTEXT_ITEMS,
    GET_CONTEXT_ITEMS,
    GET_REQUEST_CONTEXT,
    LIST_TURNS,
    LIST_CATALOG,
)
"""Sessions, request contexts and the catalog."""

BROKER_TOOLS: tuple[ToolSpec, ...] = (  # type: ignore[type-arg]
    *CONTEXT_TOOLS,
    *HISTORY_TOOLS,
    *ASSEMBLY_TOOLS,
    GET_USAGE_STATS,
    *USAGE_TOOLS,
)
"""Every tool of this package: context tools, history, assembly, usage statistics and
usage reports."""
