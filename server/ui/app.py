"""The request-context view as an MCP App: the ``ui://`` resource, and the ``_meta.ui`` the
broker's tools carry so that hosts with Apps render it beside the result."""

from __future__ import annotations

from typing import Any

from mcp import types
from mcp.server.apps import APP_MIME_TYPE

from .assets import app_html
from .view import APP_TOOL

__all__ = ["APP_MIME_TYPE", "APP_URI", "app_resource", "read_app", "tool_meta"]

APP_URI = "ui://context-broker/request-context"
_SHOWN_WITH_VIEW = ("build_request_context", "get_request_context")


def tool_meta(name: str) -> dict[str, Any] | None:
    """The ``_meta`` of a broker tool: the view for the request-context tools, and app-only
    visibility for the tool the view calls; None for every other tool."""
    if name in _SHOWN_WITH_VIEW:
        return {"ui": {"resourceUri": APP_URI}}
    if name == APP_TOOL.name:
        return {"ui": {"resourceUri": APP_URI, "visibility": ["app"]}}
    return None


def app_resource() -> types.Resource:
    """The view's entry in ``resources/list``."""
    return types.Resource(
        uri=APP_URI,
        name="request-context-view",
        title="View Context",
        description="The rules, references and tools used for one request, with how each "
        "was included (an MCP App for build_request_context and get_request_context).",
        mime_type=APP_MIME_TYPE,
    )


def read_app() -> types.ReadResourceResult:
    """The view's HTML document."""
    return types.ReadResourceResult(
        contents=[
            types.TextResourceContents(
                uri=APP_URI,
                mime_type=APP_MIME_TYPE,
                text=app_html(),
                meta={"ui": {"prefersBorder": True}},
            )
        ]
    )
