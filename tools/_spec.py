"""What every tool adapter declares: name, argument and result models, the domain call, and a
short text rendering. The server turns these into MCP tools; nothing here imports ``mcp``."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from pydantic import BaseModel, ConfigDict

from contextcore.broker import ContextBroker

__all__ = ["Args", "Out", "ToolSpec"]


class Args(BaseModel):
    """Base of tool argument models: unknown arguments and loose types are errors."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class Out(BaseModel):
    """Base of tool result models (the tool's ``structuredContent``)."""

    model_config = ConfigDict(frozen=True)


A = TypeVar("A", bound=Args)
R = TypeVar("R", bound=Out)


@dataclass(frozen=True)
class ToolSpec(Generic[A, R]):
    """One MCP tool: ``run`` is a blocking domain call (the server runs it in a worker
    thread); ``uses_search`` marks calls that may embed text and must not overlap."""

    name: str
    description: str
    args: type[A]
    result: type[R]
    run: Callable[[ContextBroker, A], R]
    text: Callable[[R], str]
    uses_search: bool = False
    read_only: bool = False

    def input_schema(self) -> dict[str, Any]:
        return self.args.model_json_schema()

    def output_schema(self) -> dict[str, Any]:
        return self.result.model_json_schema()
