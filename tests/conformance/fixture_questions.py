"""The fixture server's questions to its client. In the 2025-11-25 era it asks during the
call, with requests of its own (elicitation forms; sampling is in fixture_server.py); in the
2026-07-28 era tools and a prompt answer with an ``InputRequiredResult`` (elicitation,
sampling, roots, request state) until the client's retry carries the answers they asked for.
Also the hooks the stateless scenario uses (list changes announced to
``subscriptions/listen``).

Registered on a server by :func:`add_questions`; see fixture_server.py.
"""

from __future__ import annotations

import json
from typing import Any

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.prompts.base import Prompt, UserMessage
from mcp.types import (
    CreateMessageRequest,
    CreateMessageRequestParams,
    CreateMessageResult,
    ElicitRequest,
    ElicitRequestFormParams,
    ElicitResult,
    InputRequest,
    InputRequiredResult,
    ListRootsRequest,
    ListRootsResult,
    SamplingMessage,
    TextContent,
)

__all__ = ["add_questions"]

STATE_NONCE = "request-state-nonce"


# --- handshake era: requests to the client during the call ------------------------

DEFAULTS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "description": "User name", "default": "John Doe"},
        "age": {"type": "integer", "description": "User age", "default": 30},
        "score": {"type": "number", "description": "User score", "default": 95.5},
        "status": {
            "type": "string",
            "description": "User status",
            "enum": ["active", "inactive", "pending"],
            "default": "active",
        },
        "verified": {"type": "boolean", "description": "Verification status", "default": True},
    },
}


def _one_field(field: str, kind: str = "string") -> dict[str, Any]:
    """A form schema with one required field."""
    return {"type": "object", "properties": {field: {"type": kind}}, "required": [field]}


def _titled(*pairs: tuple[str, str]) -> list[dict[str, str]]:
    """Enum options with titles: ``{"const": value, "title": title}``."""
    return [{"const": value, "title": title} for value, title in pairs]


ENUMS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "untitledSingle": {"type": "string", "enum": ["active", "inactive", "pending"]},
        "titledSingle": {
            "type": "string",
            "oneOf": _titled(
                ("low", "Low Priority"), ("medium", "Medium Priority"), ("high", "High Priority")
            ),
        },
        "untitledMulti": {
            "type": "array",
            "items": {"type": "string", "enum": ["read", "write", "execute"]},
        },
        "titledMulti": {
            "type": "array",
            "items": {
                "anyOf": _titled(
                    ("feature", "New Feature"), ("bug", "Bug Fix"), ("docs", "Documentation")
                )
            },
        },
        "legacyEnum": {
            "type": "string",
            "enum": ["small", "medium", "large"],
            "enumNames": ["Small Size", "Medium Size", "Large Size"],
        },
    },
    "required": ["untitledSingle", "titledSingle", "untitledMulti", "titledMulti", "legacyEnum"],
}


async def _elicit(ctx: Context, message: str, schema: dict[str, Any], label: str) -> str:
    """Asks the client to fill ``schema``; says what it answered."""
    result = await ctx.session.elicit_form(message, schema, related_request_id=ctx.request_id)
    content = json.dumps(result.content or {}) if result.action == "accept" else "{}"
    return f"{label}: action={result.action}, content={content}"


async def elicitation(message: str, ctx: Context) -> str:
    """Asks the user ``message`` for one text answer."""
    return await _elicit(ctx, message, _one_field("response"), "User response")


async def elicitation_defaults(ctx: Context) -> str:
    """Asks for fields of every primitive type, each with a default."""
    return await _elicit(
        ctx, "Please provide user information", DEFAULTS_SCHEMA, "Elicitation result"
    )


async def elicitation_enums(ctx: Context) -> str:
    """Asks for values from enums of every form (titled, untitled, multi, legacy)."""
    message = "Please select values using different enum schema types"
    return await _elicit(ctx, message, ENUMS_SCHEMA, "Elicitation completed")


# --- stateless era: InputRequiredResult ---------------------------------------------


def _ask(message: str, field: str, kind: str = "string") -> ElicitRequest:
    """A form elicitation for one required field."""
    schema = _one_field(field, kind)
    return ElicitRequest(params=ElicitRequestFormParams(message=message, requested_schema=schema))


def _sample(prompt: str, max_tokens: int = 100) -> CreateMessageRequest:
    """A sampling request with one user message."""
    message = SamplingMessage(role="user", content=TextContent(type="text", text=prompt))
    params = CreateMessageRequestParams(messages=[message], max_tokens=max_tokens)
    return CreateMessageRequest(params=params)


def _answer(ctx: Context, key: str) -> object | None:
    """The client's answer to the input request ``key`` on this retry, if it sent one."""
    return (ctx.input_responses or {}).get(key)


def _field(answer: object | None, field: str) -> str | None:
    """One field of an accepted elicitation's content."""
    if isinstance(answer, ElicitResult) and answer.content:
        value = answer.content.get(field)
        return None if value is None else str(value)
    return None


async def elicit_name(ctx: Context) -> str | InputRequiredResult:
    """Asks for the user's name, then greets them."""
    answer = _answer(ctx, "user_name")
    if answer is None:
        return InputRequiredResult(input_requests={"user_name": _ask("What is your name?", "name")})
    return f"Hello, {_field(answer, 'name') or 'stranger'}!"


async def sample_capital(ctx: Context) -> str | InputRequiredResult:
    """Asks the client's model a question, then repeats its answer."""
    answer = _answer(ctx, "capital_question")
    if not isinstance(answer, CreateMessageResult):
        question = _sample("What is the capital of France?")
        return InputRequiredResult(input_requests={"capital_question": question})
    text = answer.content.text if isinstance(answer.content, TextContent) else "?"
    return f"Model said: {text}"


async def count_roots(ctx: Context) -> str | InputRequiredResult:
    """Asks for the client's roots, then counts them."""
    answer = _answer(ctx, "client_roots")
    if not isinstance(answer, ListRootsResult):
        return InputRequiredResult(input_requests={"client_roots": ListRootsRequest()})
    return f"Client exposed {len(answer.roots)} root(s)."


async def confirm_with_state(ctx: Context) -> str | InputRequiredResult:
    """Asks for a confirmation with a request state that the retry must echo."""
    if _answer(ctx, "confirm") is not None and ctx.request_state == STATE_NONCE:
        return "state-ok: confirmation received"
    ask = _ask("Please confirm", "ok", "boolean")
    return InputRequiredResult(input_requests={"confirm": ask}, request_state=STATE_NONCE)


async def ask_three_things(ctx: Context) -> str | InputRequiredResult:
    """Asks for a name, a sampled greeting and the roots in one round."""
    wanted: dict[str, InputRequest] = {
        "user_name": _ask("What is your name?", "name"),
        "greeting": _sample("Generate a greeting", 50),
        "client_roots": ListRootsRequest(),
    }
    if wanted.keys() <= (ctx.input_responses or {}).keys():
        return "All inputs received."
    return InputRequiredResult(input_requests=wanted, request_state="multiple-inputs")


def _first_round() -> InputRequiredResult:
    """Round one of :func:`three_rounds`: the name."""
    ask = _ask("Step 1: What is your name?", "name")
    return InputRequiredResult(
        input_requests={"step1": ask}, request_state=json.dumps({"round": 1})
    )


async def three_rounds(ctx: Context) -> str | InputRequiredResult:
    """Asks for a name, then a colour, carrying what it learnt in the request state."""
    state = json.loads(ctx.request_state) if ctx.request_state else {"round": 0}
    if state.get("round") == 1 and _answer(ctx, "step1") is not None:
        name = _field(_answer(ctx, "step1"), "name")
        ask = _ask("Step 2: What is your favorite color?", "color")
        next_state = json.dumps({"round": 2, "name": name})
        return InputRequiredResult(input_requests={"step2": ask}, request_state=next_state)
    if state.get("round") == 2 and _answer(ctx, "step2") is not None:
        return f"{state.get('name')} likes {_field(_answer(ctx, 'step2'), 'color')}."
    # A first call, or a retry without the expected answer: start again.
    return _first_round()


async def echo_state(ctx: Context) -> str | InputRequiredResult:
    """Asks once, then echoes the request state the retry carried (the SDK rejects a
    tampered one before this runs)."""
    if ctx.request_state is None:
        ask = _ask("Please confirm", "ok", "boolean")
        return InputRequiredResult(input_requests={"confirm": ask}, request_state="round-1")
    return f"state-ok: {ctx.request_state}"


async def ask_what_client_supports(ctx: Context) -> InputRequiredResult:
    """Asks only for the kinds of input the client declared it can give."""
    caps = ctx.client_capabilities
    requests: dict[str, InputRequest] = {}
    if caps is None or caps.sampling is not None:
        requests["sample"] = _sample("Say hello", 50)
    if caps is None or caps.elicitation is not None:
        requests["ask"] = _ask("What is your name?", "name")
    return InputRequiredResult(input_requests=requests, request_state="capability-gated")


async def streaming_elicitation(ctx: Context) -> str | InputRequiredResult:
    """Asks for a name in the stateless way (never as a request on the response stream)."""
    return await elicit_name(ctx)


async def context_prompt(ctx: Context) -> list[UserMessage] | InputRequiredResult:
    """A prompt that asks which context to use before it is rendered."""
    answer = _answer(ctx, "user_context")
    if answer is None:
        ask = _ask("What context should the prompt use?", "context")
        return InputRequiredResult(input_requests={"user_context": ask})
    text = f"Use the following context: {_field(answer, 'context') or '?'}"
    return [UserMessage(role="user", content=TextContent(type="text", text=text))]


def _dynamic() -> str:
    """Briefly listed by the list-change hooks."""
    return "dynamic"


def _list_change_hooks(server: MCPServer) -> list[tuple[str, Any]]:
    """Tools that add and remove a tool or a prompt and announce the change."""

    async def trigger_tool_change(ctx: Context) -> str:
        """Adds and removes a tool, then announces the tool list changed."""
        server.add_tool(_dynamic, name="test_dynamic_tool")
        server.remove_tool("test_dynamic_tool")
        await ctx.notify_tools_changed()
        return "tool list changed"

    async def trigger_prompt_change(ctx: Context) -> str:
        """Adds and removes a prompt, then announces the prompt list changed."""
        server.add_prompt(Prompt.from_function(_dynamic, name="test_dynamic_prompt"))
        server.remove_prompt("test_dynamic_prompt")
        await ctx.notify_prompts_changed()
        return "prompt list changed"

    return [
        ("test_trigger_tool_change", trigger_tool_change),
        ("test_trigger_prompt_change", trigger_prompt_change),
    ]


TOOLS: list[tuple[str, Any]] = [
    ("test_elicitation", elicitation),
    ("test_elicitation_sep1034_defaults", elicitation_defaults),
    ("test_elicitation_sep1330_enums", elicitation_enums),
    ("test_input_required_result_elicitation", elicit_name),
    ("test_input_required_result_sampling", sample_capital),
    ("test_input_required_result_list_roots", count_roots),
    ("test_input_required_result_request_state", confirm_with_state),
    ("test_input_required_result_multiple_inputs", ask_three_things),
    ("test_input_required_result_multi_round", three_rounds),
    ("test_input_required_result_tampered_state", echo_state),
    ("test_input_required_result_capabilities", ask_what_client_supports),
    ("test_streaming_elicitation", streaming_elicitation),
]


def add_questions(server: MCPServer) -> None:
    """Register the elicitation and multi-round-trip tools, the prompt and the list-change
    hooks on ``server``."""
    for name, fn in TOOLS + _list_change_hooks(server):
        server.add_tool(fn, name=name)
    prompt = Prompt.from_function(context_prompt, name="test_input_required_result_prompt")
    server.add_prompt(prompt)
