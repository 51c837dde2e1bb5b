"""The broker's fixed tool surface, in the order hosts list it."""

from __future__ import annotations

from ._spec import ToolSpec
from .catalog import GET_CONTEXT_ITEMS, LIST_CATALOG, SEARCH_CONTEXT_ITEMS
from .requests import BUILD_REQUEST_CONTEXT, GET_REQUEST_CONTEXT, LIST_TURNS
from .sessions import ADD_CONTEXT_ITEM, CREATE_SESSION, LIST_SESSION_CONTEXT, REMOVE_CONTEXT_ITEM

__all__ = ["CONTEXT_TOOLS", "ToolSpec"]

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
