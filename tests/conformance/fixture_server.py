"""An MCP server that does what the conformance suite's server scenarios call, in both the
2025-11-25 (handshake) and 2026-07-28 (stateless) eras: content of every type, logging,
progress, sampling, elicitation, errors, resources, templates, subscriptions, prompts,
completion; and (in fixture_questions.py) elicitation and the multi-round-trip
``InputRequiredResult`` tools.

Run it over Streamable HTTP at ``/mcp`` or over stdio::

    python tests/conformance/fixture_server.py --port 8123
    python tests/conformance/fixture_server.py --transport stdio

Everything it sends is deterministic: logs, progress steps and resource updates are fixed
and sent without waiting. Besides the suite's tools it has ``test_jsonrpc_error`` (fails
with a JSON-RPC error of a non-standard code with ``data``) and
``test_update_watched_resource`` (changes ``test://watched-resource`` and sends
``notifications/resources/updated`` to its subscribers).
"""

from __future__ import annotations

import argparse
import base64
import json
import logging
import struct
import sys
import warnings
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mcp.server import ServerRequestContext
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.prompts.base import UserMessage
from mcp.shared.exceptions import MCPDeprecationWarning, MCPError
from mcp.types import (
    MISSING_REQUIRED_CLIENT_CAPABILITY,
    AudioContent,
    Completion,
    CompletionArgument,
    CompletionContext,
    EmbeddedResource,
    EmptyResult,
    ImageContent,
    PromptReference,
    ResourceTemplateReference,
    SamplingMessage,
    SetLevelRequestParams,
    SubscribeRequestParams,
    TextContent,
    TextResourceContents,
    UnsubscribeRequestParams,
)

if __package__ in (None, ""):  # run as a script: import the sibling module by path
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from fixture_questions import add_questions
else:
    from .fixture_questions import add_questions

__all__ = ["JSONRPC_ERROR_CODE", "WATCHED_URI", "build_server", "main"]

logger = logging.getLogger(__name__)

JSONRPC_ERROR_CODE = -32042  # implementation-defined: no SDK or host gives it a meaning
WATCHED_URI = "test://watched-resource"
LOG_LINES = ("Tool execution started", "Tool processing data", "Tool execution completed")
PROGRESS_STEPS = (0, 50, 100)
COMPLETIONS = {"arg1": ["paris", "park", "party"], "arg2": ["red", "green"], "id": ["123", "456"]}


def _png_pixel() -> bytes:
    """A valid 1x1 opaque white PNG, built rather than pasted."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    header = struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0)  # 1x1, 8-bit RGB
    pixels = zlib.compress(b"\x00\xff\xff\xff")
    return (
        b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", pixels) + chunk(b"IEND", b"")
    )


def _wav_silence() -> bytes:
    """A valid WAV file: one 16-bit mono sample of silence at 8 kHz."""
    fmt = struct.pack("<HHIIHH", 1, 1, 8000, 16000, 2, 16)
    data = b"\x00\x00"
    body = b"WAVE" + b"fmt " + struct.pack("<I", len(fmt)) + fmt
    body += b"data" + struct.pack("<I", len(data)) + data
    return b"RIFF" + struct.pack("<I", len(body)) + body


def _b64(data: bytes) -> str:
    """``data`` in base64, as MCP carries binary content."""
    return base64.b64encode(data).decode("ascii")


@dataclass
class FixtureState:
    """What the fixture remembers between requests: the subscribed URIs, the watched
    resource's text and the last log level a client set (shared by all its clients)."""

    subscribed: set[str] = field(default_factory=set)
    watched_text: str = "Watched resource content"
    log_level: str | None = None


# --- content tools -------------------------------------------------------------------


def simple_text() -> str:
    """Returns one text block."""
    return "This is a simple text response for testing."


def image_content() -> list[ImageContent]:
    """Returns one PNG image."""
    return [ImageContent(type="image", data=_b64(_png_pixel()), mime_type="image/png")]


def audio_content() -> list[AudioContent]:
    """Returns one WAV clip."""
    return [AudioContent(type="audio", data=_b64(_wav_silence()), mime_type="audio/wav")]


def _embedded(uri: str, text: str, mime_type: str = "text/plain") -> EmbeddedResource:
    """A text resource embedded in a result."""
    contents = TextResourceContents(uri=uri, mime_type=mime_type, text=text)
    return EmbeddedResource(type="resource", resource=contents)


def embedded_resource() -> list[EmbeddedResource]:
    """Returns one embedded text resource."""
    return [_embedded("test://embedded-resource", "This is an embedded resource content.")]


def mixed_content() -> list[TextContent | ImageContent | EmbeddedResource]:
    """Returns text, an image and an embedded JSON resource together."""
    data = json.dumps({"test": "data", "value": 123})
    return [
        TextContent(type="text", text="Multiple content types test:"),
        image_content()[0],
        _embedded("test://mixed-content-resource", data, "application/json"),
    ]


def error_handling() -> str:
    """Fails, which the server reports as an ``isError`` result with this message."""
    raise ToolError("This tool intentionally returns an error for testing")


def jsonrpc_error() -> str:
    """Fails with a JSON-RPC error (not an ``isError`` result) carrying ``data``."""
    data: dict[str, object] = {"reason": "fixture", "retryable": False}
    raise MCPError(code=JSONRPC_ERROR_CODE, message="The fixture refused this call", data=data)


# --- tools that talk back ------------------------------------------------------------


async def with_logging(ctx: Context) -> str:
    """Sends three info log messages, then returns."""
    for line in LOG_LINES:
        await ctx.log("info", line)
    return "Tool with logging executed successfully"


async def logging_tool(ctx: Context) -> str:
    """Sends one log message at each of three levels (the SDK drops those the client did
    not ask for)."""
    for level in ("debug", "info", "warning"):
        await ctx.log(level, f"{level} message from test_logging_tool")
    return "logged"


async def with_progress(ctx: Context) -> str:
    """Reports progress 0, 50 and 100 of 100; returns the progress token it was given."""
    for step in PROGRESS_STEPS:
        await ctx.report_progress(step, 100, f"Completed step {step} of 100")
    meta = ctx.request_context.meta or {}
    return str(meta.get("progress_token", 0))


async def sampling(prompt: str, ctx: Context) -> str:
    """Asks the client's model ``prompt`` and returns its answer."""
    message = SamplingMessage(role="user", content=TextContent(type="text", text=prompt))
    result = await ctx.session.create_message(
        messages=[message], max_tokens=100, related_request_id=ctx.request_id
    )
    text = result.content.text if isinstance(result.content, TextContent) else "No response"
    return f"LLM response: {text}"


async def missing_capability(ctx: Context) -> str:
    """Fails with -32021 unless the client declared sampling."""
    caps = ctx.client_capabilities
    if caps is None or caps.sampling is None:
        data: dict[str, object] = {"requiredCapabilities": {"sampling": {}}}
        message = "This tool requires the client 'sampling' capability"
        raise MCPError(code=MISSING_REQUIRED_CLIENT_CAPABILITY, message=message, data=data)
    return "Client declared sampling capability; proceeding."


def _update_watched_tool(state: FixtureState) -> Any:
    """The tool that changes the watched resource and tells its subscribers."""

    async def update_watched_resource(text: str, ctx: Context) -> str:
        """Sets the watched resource's text; notifies subscribers (both eras)."""
        state.watched_text = text
        if WATCHED_URI in state.subscribed:
            await ctx.session.send_resource_updated(WATCHED_URI)
        await ctx.notify_resource_updated(WATCHED_URI)
        return f"updated {WATCHED_URI}"

    return update_watched_resource


TOOLS: list[tuple[str, Any]] = [
    ("test_simple_text", simple_text),
    ("test_image_content", image_content),
    ("test_audio_content", audio_content),
    ("test_embedded_resource", embedded_resource),
    ("test_multiple_content_types", mixed_content),
    ("test_error_handling", error_handling),
    ("test_jsonrpc_error", jsonrpc_error),
    ("test_tool_with_logging", with_logging),
    ("test_logging_tool", logging_tool),
    ("test_tool_with_progress", with_progress),
    ("test_sampling", sampling),
    ("test_missing_capability", missing_capability),
]


# --- resources and prompts -----------------------------------------------------------


def _add_resources(server: MCPServer, state: FixtureState) -> None:
    """Two static resources, one template and the watched resource."""

    def static_text() -> str:
        """A static text resource."""
        return "This is the content of the static text resource."

    def static_binary() -> bytes:
        """A static binary resource (a PNG image)."""
        return _png_pixel()

    def template(id: str) -> str:
        """A JSON document naming the ``id`` it was read with."""
        return json.dumps({"id": id, "templateTest": True, "data": f"Data for ID: {id}"})

    def watched() -> str:
        """A resource that test_update_watched_resource changes."""
        return state.watched_text

    server.resource("test://static-text", mime_type="text/plain")(static_text)
    server.resource("test://static-binary", mime_type="image/png")(static_binary)
    server.resource("test://template/{id}/data", mime_type="application/json")(template)
    server.resource(WATCHED_URI, mime_type="text/plain")(watched)


def simple_prompt() -> list[UserMessage]:
    """A prompt without arguments."""
    return [
        UserMessage(
            role="user",
            content=TextContent(type="text", text="This is a simple prompt for testing."),
        )
    ]


def prompt_with_arguments(arg1: str, arg2: str) -> list[UserMessage]:
    """A prompt with two required arguments."""
    text = f"Prompt with arguments: arg1='{arg1}', arg2='{arg2}'"
    return [UserMessage(role="user", content=TextContent(type="text", text=text))]


def prompt_with_embedded_resource(
    resourceUri: str,
) -> list[UserMessage]:  # the argument's wire name
    """A prompt that embeds the resource it is given."""
    resource = _embedded(resourceUri, "Embedded resource content for testing.")
    text = TextContent(type="text", text="Please process the embedded resource above.")
    return [UserMessage(role="user", content=resource), UserMessage(role="user", content=text)]


def prompt_with_image() -> list[UserMessage]:
    """A prompt with an image."""
    text = TextContent(type="text", text="Please analyze the image above.")
    return [
        UserMessage(role="user", content=image_content()[0]),
        UserMessage(role="user", content=text),
    ]


PROMPTS: list[tuple[str, Any]] = [
    ("test_simple_prompt", simple_prompt),
    ("test_prompt_with_arguments", prompt_with_arguments),
    ("test_prompt_with_embedded_resource", prompt_with_embedded_resource),
    ("test_prompt_with_image", prompt_with_image),
]


# --- protocol methods ----------------------------------------------------------------


async def complete(
    ref: PromptReference | ResourceTemplateReference,
    argument: CompletionArgument,
    context: CompletionContext | None,
) -> Completion:
    """The known values of an argument that start with what was typed."""
    values = [v for v in COMPLETIONS.get(argument.name, []) if v.startswith(argument.value)]
    return Completion(values=values, total=len(values), has_more=False)


def _add_protocol_handlers(server: MCPServer, state: FixtureState) -> None:
    """``logging/setLevel``, ``resources/subscribe`` and ``resources/unsubscribe``
    (handshake-era methods), and ``completion/complete``."""

    async def set_level(ctx: ServerRequestContext, params: SetLevelRequestParams) -> EmptyResult:
        state.log_level = params.level
        return EmptyResult()

    async def subscribe(ctx: ServerRequestContext, params: SubscribeRequestParams) -> EmptyResult:
        state.subscribed.add(str(params.uri))
        return EmptyResult()

    async def unsubscribe(
        ctx: ServerRequestContext, params: UnsubscribeRequestParams
    ) -> EmptyResult:
        state.subscribed.discard(str(params.uri))
        return EmptyResult()

    # MCPServer has no public hook for these methods yet; the low-level server does.
    lowlevel = server._lowlevel_server
    lowlevel.add_request_handler("logging/setLevel", SetLevelRequestParams, set_level)
    lowlevel.add_request_handler("resources/subscribe", SubscribeRequestParams, subscribe)
    lowlevel.add_request_handler("resources/unsubscribe", UnsubscribeRequestParams, unsubscribe)
    server.completion()(complete)


def build_server(state: FixtureState | None = None) -> MCPServer:
    """The fixture server, with everything the conformance scenarios call."""
    state = state or FixtureState()
    server = MCPServer(name="context-broker-conformance-fixture", version="1.0.0")
    for name, fn in TOOLS:
        server.add_tool(fn, name=name)
    server.add_tool(_update_watched_tool(state), name="test_update_watched_resource")
    add_questions(server)
    _add_resources(server, state)
    for name, fn in PROMPTS:
        server.prompt(name=name)(fn)
    _add_protocol_handlers(server, state)
    return server


def main(argv: list[str] | None = None) -> None:
    """Serve the fixture over Streamable HTTP (``--port``) or stdio."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--transport", choices=["http", "stdio"], default="http")
    parser.add_argument("--port", type=int, default=3001)
    parser.add_argument("--host", default="127.0.0.1")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    # The fixture exercises sampling and the handshake-era methods on purpose.
    warnings.simplefilter("ignore", MCPDeprecationWarning)
    server = build_server()
    if args.transport == "stdio":
        server.run("stdio")
    else:
        server.run("streamable-http", host=args.host, port=args.port)


if __name__ == "__main__":
    main()
