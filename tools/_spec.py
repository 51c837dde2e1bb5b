"""What every tool adapter declares: name, argument and result models, the domain call, and a
short text rendering. The server turns these into MCP tools; nothing here imports ``mcp``."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Annotated, Any, Generic, TypeVar

from pydantic import AfterValidator, BaseModel, ConfigDict, Field
from pydantic_core import PydanticCustomError

from contextcore.assembly_model import AssemblyModelSpec
from contextcore.context_text import NoTools, ToolDirectory
from contextcore.history import SummarizerChain
from contextcore.services.broker import ContextBroker
from contextcore.services.history import HistoryService
from contextcore.sessions import RequestContext

__all__ = ["INTENTS_HELP", "Args", "Intents", "Out", "ToolContext", "ToolSpec", "UserMessage"]


def _non_blank(text: str) -> str:
    if not text.strip():
        raise PydanticCustomError("blank_text", "must be a non-empty text; send the user's message")
    return text


UserMessage = Annotated[str, AfterValidator(_non_blank)]
"""The user's message as a tool argument: a text with something in it."""

INTENTS_HELP = (
    "Optional: your plan for this request, as short steps in your own words, before you "
    "have seen any tool. For a task of several actions, write one step per action (1-6 "
    "steps), each a plain generic phrase of what to do, without guessing tool names: "
    "e.g. for 'make a PDF report of this week's trends with a word cloud': ['search the "
    "web for this week's trending topics', 'draw a word cloud from text', 'write a "
    "document', 'convert a document to PDF']. Each step is searched on its own, so every "
    "step finds its tools. Leave it out for a single simple action."
)
Intents = Annotated[
    list[Annotated[str, Field(max_length=500)]] | None,
    Field(max_length=12, description=INTENTS_HELP),
]
"""The steps a host's model plans for a request, as a tool argument."""


class Args(BaseModel):
    """Base of tool argument models: unknown arguments and loose types are errors."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class Out(BaseModel):
    """Base of tool result models (the tool's ``structuredContent``): a model whose fields
    match a domain dataclass's is built from it with ``model_validate(obj)``."""

    model_config = ConfigDict(frozen=True, from_attributes=True)


def _unheard(context: RequestContext) -> None:
    """Nobody listens for the request contexts built (a tool run outside a server)."""


A = TypeVar("A", bound=Args)
R = TypeVar("R", bound=Out)


@dataclass(frozen=True)
class ToolContext:
    """What every tool's ``run`` receives: the shared services and, per call, the summarizer
    chain the server built for this request (LLM API, MCP sampling when the calling client
    offers it, extractive), the assembly models the config names (``[models.<name>]``), how
    the host can call downstream tools, and ``built``: every tool that builds a request
    context hands it, typed, to ``built`` (the server lists its tools to the host, counts
    and traces it) so nobody reads it back out of the tool's result. ``profile``: the
    profile the host connected with (None: none)."""

    broker: ContextBroker
    history: HistoryService
    summarizer: SummarizerChain | None = None
    models: Mapping[str, AssemblyModelSpec] = field(default_factory=dict)
    tools: ToolDirectory = field(default_factory=NoTools)
    built: Callable[[RequestContext], None] = _unheard
    profile: str | None = None
    host_session: Callable[[], str] | None = None
    """The session of the host connection making the call (created on first use), for
    tools called without a ``session_id``; None: a new session per call."""
    code_mode: bool = False
    """Whether the host can call tools from ``run_code``: tool entries then give the
    Python signature a program calls each by."""

    def session_for(self, session_id: str | None) -> str:
        """``session_id``, or the calling host connection's own session when it is None."""
        if session_id is not None:
            return session_id
        if self.host_session is not None:
            return self.host_session()
        return self.broker.create_session(profile=self.profile).session_id


@dataclass(frozen=True)
class ToolSpec(Generic[A, R]):
    """One MCP tool: ``run`` is a blocking domain call on a :class:`ToolContext` (the server
    runs it in a worker thread; the search engine keeps its own searches from overlapping)."""

    name: str
    description: str
    args: type[A]
    result: type[R]
    run: Callable[[ToolContext, A], R]
    text: Callable[[R], str]
    read_only: bool = False
    brief: tuple[str, ...] | None = None
    """The arguments a model is shown (None: all): a call may still pass the others."""

    def input_schema(self, brief: bool = False) -> dict[str, Any]:
        """The arguments' JSON schema; ``brief``: only the ones a model is shown."""
        schema = self.args.model_json_schema()
        if not brief or self.brief is None:
            return schema
        properties = schema.get("properties", {})
        kept = {k: v for k, v in properties.items() if k in self.brief}
        out = {**schema, "properties": kept}
        required = [k for k in schema.get("required", ()) if k in kept]
        out.pop("required", None)
        if required:
            out["required"] = required
        refs = json.dumps(kept)
        defs = {k: v for k, v in schema.get("$defs", {}).items() if f"#/$defs/{k}" in refs}
        out.pop("$defs", None)
        if defs:
            out["$defs"] = defs
        return out

    def output_schema(self) -> dict[str, Any]:
        return self.result.model_json_schema()
