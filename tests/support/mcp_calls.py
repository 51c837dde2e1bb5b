"""Calling the broker's tools from tests: a successful call's structured result, or a tool
error's text, each checked the way every tool must behave."""

from __future__ import annotations

from typing import Any

import anyio
from mcp import Client

__all__ = ["call", "error"]


async def call(client: Client, name: str, /, **arguments: Any) -> dict[str, Any]:
    """The structured result of a call that must succeed with a text rendering too."""
    with anyio.fail_after(10):
        result = await client.call_tool(name, arguments)
    assert not result.is_error, result.content
    assert result.content and result.content[0].type == "text" and result.content[0].text
    assert isinstance(result.structured_content, dict)
    return result.structured_content


async def error(client: Client, name: str, /, **arguments: Any) -> str:
    """The text of a call that must fail as a bounded tool error naming the tool."""
    with anyio.fail_after(10):
        result = await client.call_tool(name, arguments)
    assert result.is_error, result.structured_content
    text = result.content[0].text  # type: ignore[union-attr]
    assert text.startswith(name) and len(text) <= 2000
    return text
