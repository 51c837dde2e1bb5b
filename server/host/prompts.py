"""The broker's own MCP prompt, ``context``: the LLM input built from a request context,
delivered by the protocol's own mechanism (a person picks the prompt in the host and the host
inserts its messages into the conversation).

MCP prompt messages are ``user`` or ``assistant`` only, so the system messages of the LLM
input (references, rules, selected tools) arrive as user messages that open with ``System:``;
the original roles are in the result's ``_meta`` under ``context-broker/roles``. Items are
worded as in ``build_request_context``'s text (:mod:`contextcore.context_text`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import anyio.to_thread
from mcp import MCPError, types
from mcp.server.session import ServerSession

from contextcore.context_text import ToolDirectory, describe, listed_entry, section, tools_intro
from contextcore.errors import ContextCoreError
from contextcore.presets import PRESET_NAMES
from contextcore.render import sort_items
from contextcore.services.broker import ContextBroker
from contextcore.sessions import RequestContext

from .tool_calls import ContextListener

__all__ = ["CONTEXT_PROMPT", "ContextPrompt"]

CONTEXT_PROMPT = types.Prompt(
    name="context",
    title="Context for a message",
    description=(
        "The rules, references and tools the broker selects for a message, as messages to "
        "put before it (a fresh session unless session_id is given)."
    ),
    arguments=[
        types.PromptArgument(name="message", description="The user's message.", required=True),
        types.PromptArgument(
            name="session_id",
            description="A session id from create_session (default: a new session).",
            required=False,
        ),
        types.PromptArgument(
            name="preset",
            description="Search preset: " + ", ".join(PRESET_NAMES) + ".",
            required=False,
        ),
        types.PromptArgument(
            name="intents",
            description="Optional plan, one step per line: for a task of several actions, one "
            "short step per action in plain generic words, without guessing tool names.",
            required=False,
        ),
    ],
)

PLAN_HINT = (
    "For a task of several actions, more tools can be found with `search_context_items` "
    "(query, intents: one short step per action in plain words, no tool names; session_id "
    "and request_id {request_id} add what it finds to this request's record)."
)


def _text(row: Mapping[str, str]) -> str:
    return f"System:\n{row['content']}" if row["role"] == "system" else row["content"]


class ContextPrompt:
    """Builds the ``context`` prompt's result from a fresh request context."""

    def __init__(
        self,
        broker: ContextBroker,
        directory: ToolDirectory,
        on_context: ContextListener | None = None,
        profile: str | None = None,
    ) -> None:
        self._broker = broker
        self._profile = profile  # sessions are created under it; others' are refused
        self._directory = directory
        self._on_context = on_context

    async def get(
        self, arguments: Mapping[str, str] | None, session: ServerSession | None = None
    ) -> types.GetPromptResult:
        """The LLM input for ``arguments["message"]``; bad arguments are protocol errors.
        The request context built goes to ``on_context`` with the asking host's
        ``session``."""
        args = dict(arguments or {})
        message = args.get("message")
        if not isinstance(message, str) or not message.strip():
            raise MCPError(types.INVALID_PARAMS, "prompt 'context' needs the argument 'message'")
        unknown = sorted(set(args) - {"message", "session_id", "preset", "intents"})
        if unknown:
            raise MCPError(
                types.INVALID_PARAMS,
                f"prompt 'context' has no argument(s) {', '.join(map(repr, unknown))}; "
                "it takes message, session_id, preset and intents",
            )
        intents = [line for line in (args.get("intents") or "").splitlines() if line.strip()]

        def build() -> RequestContext:
            session_id = args.get("session_id")
            if not session_id:
                session_id = self._broker.create_session(profile=self._profile).session_id
            elif self._profile is not None:
                self._broker.require_profile(session_id, self._profile)
            return self._broker.build_request_context(
                session_id, message, preset=args.get("preset") or None, intents=intents
            )

        try:
            context = await anyio.to_thread.run_sync(build)
        except ContextCoreError as exc:
            raise MCPError(types.INVALID_PARAMS, f"prompt 'context': {exc.message}") from None
        if self._on_context is not None:
            await self._on_context(session, context)
        return self._result(context)

    def _result(self, context: RequestContext) -> types.GetPromptResult:
        rows = self._broker.messages_for(context)
        rows.insert(len(rows) - 1, {"role": "system", "content": self._tools_text(context)})
        messages = [
            types.PromptMessage(
                role="user", content=types.TextContent(type="text", text=_text(row))
            )
            for row in rows
        ]
        meta: dict[str, Any] = {
            "context-broker/roles": [row["role"] for row in rows],
            "context-broker/session_id": context.session_id,
            "context-broker/request_id": context.request_id,
        }
        return types.GetPromptResult(
            description=f"Context for the message (session {context.session_id}, request "
            f"{context.request_id})",
            messages=messages,
            _meta=meta,
        )

    def _tools_text(self, context: RequestContext) -> str:
        """The selected tools as ``build_request_context``'s text has them: the ones the
        host already lists named, the others described in full."""
        listed: list[str] = []
        blocks: list[str] = []
        lookup, directory, intents = self._broker.lookup, self._directory, context.intents
        for row in sort_items(context.items, lookup):
            if row.ref.type != "tool":
                continue
            if directory.listed(row.ref):
                listed.append(listed_entry(row, directory, intents))
            else:
                blocks.append(describe(row, lookup, directory, intents))
        hint = PLAN_HINT.format(request_id=f"`{context.request_id}`")
        if not blocks and not listed:
            return section("tool", [], [f"No tools were selected for this message. {hint}"])
        return section("tool", blocks, [*tools_intro(listed), hint])
