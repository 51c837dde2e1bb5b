"""The MCP conformance suite's client, played by the broker: ``conformance client --command
"python client_driver.py" --scenario NAME`` appends the scenario server's URL.

The driver writes a broker config with that URL as the one downstream server (with an
``oauth`` table for ``auth/*`` scenarios, carrying the client credentials the scenario's
context gives), starts ``context-broker serve`` over stdio with ``BROWSER`` set to
``open_url.py``, waits for the downstream's tools and calls each once through the broker.
``CONFORMANCE_DRIVER_DIR`` keeps the broker's files (config, token file) in a given folder.
``CONFORMANCE_HOST=2026-07-28`` makes the host speak the 2026-07-28 wire (the MCP SDK's own
client, which answers an ``InputRequiredResult`` with its callbacks) instead of the
handshake.
"""

from __future__ import annotations

import json
import os
import shlex
import sys
import tempfile
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import anyio
import mcp_types as types
from mcp import Client, ClientSession, MCPError, StdioServerParameters, stdio_client

HERE = Path(__file__).resolve().parent
BROKER = str(Path(sys.executable).parent / "context-broker")
SERVER = "remote"
CIMD_URL = "https://conformance-test.local/client-metadata.json"
WAIT_FOR_TOOLS = 25.0

CONFIG = """
[search]
semantic = false

[persistence]
backend = "memory"

[gateway]
pin_file = "pins.json"
token_file = "tokens.json"
startup_budget = 0

[servers.{server}]
url = {url}
include = "always"
trust = "auto"
timeout = 20
"""


def oauth_table(
    scenario: str, context: dict[str, Any], issuer: str | None = None
) -> dict[str, Any] | None:
    """The ``[servers.NAME.oauth]`` table for a scenario (None when it needs no OAuth).
    ``issuer`` stands in for what a person would know of their credentials' authorization
    server when the scenario's context does not say (the broker requires it with a secret)."""
    if not scenario.startswith("auth/"):
        return None
    table: dict[str, Any] = {"client_metadata_url": CIMD_URL}
    for key in ("client_id", "client_secret", "private_key_pem", "signing_algorithm", "issuer"):
        if isinstance(context.get(key), str):
            table[key] = context[key]
    if scenario.startswith("auth/client-credentials"):
        table["grant"] = "client_credentials"
        table.pop("client_metadata_url")
    if issuer is not None:
        table.setdefault("issuer", issuer)
    return table


def advertised_issuer(url: str) -> str | None:
    """The first authorization server the protected resource at ``url`` advertises."""
    import httpx

    parts = urlsplit(url)
    where = f"{parts.scheme}://{parts.netloc}/.well-known/oauth-protected-resource{parts.path}"
    response = httpx.get(where, timeout=10, trust_env=False)
    servers = response.json().get("authorization_servers") if response.is_success else None
    return str(servers[0]) if servers else None


def write_config(folder: Path, url: str, oauth: dict[str, Any] | None) -> Path:
    """The broker config with ``url`` as its one downstream server."""
    text = CONFIG.format(server=SERVER, url=json.dumps(url))
    if oauth is not None:
        text += f"\n[servers.{SERVER}.oauth]\n"
        text += "".join(f"{key} = {json.dumps(value)}\n" for key, value in oauth.items())
    path = folder / "broker.toml"
    path.write_text(text, encoding="utf-8")
    return path


def arguments_for(schema: dict[str, Any]) -> dict[str, Any]:
    """Arguments for a tool: each required property's default, or a plain value of its type."""
    plain = {"number": 1, "integer": 1, "boolean": True, "array": [], "object": {}}
    out: dict[str, Any] = {}
    properties = schema.get("properties") or {}
    for name in schema.get("required") or []:
        prop = properties.get(name) or {}
        out[name] = prop["default"] if "default" in prop else plain.get(prop.get("type"), "test")
    return out


async def accept_defaults(
    context: Any, params: types.ElicitRequestParams
) -> types.ElicitResult | types.ErrorData:
    """The host's answer to an elicitation: accept, with each field's default."""
    if not isinstance(params, types.ElicitRequestFormParams):
        return types.ElicitResult(action="decline")
    fields = params.requested_schema.get("properties") or {}
    content = {name: field["default"] for name, field in fields.items() if "default" in field}
    return types.ElicitResult(action="accept", content=content)


def given_arguments(
    tool: types.Tool, listed: list[types.Tool], context: dict[str, Any]
) -> dict[str, Any] | None:
    """The arguments a scenario asks for: its context's ``toolCalls`` (http-custom-headers),
    or for the echo tool of json-schema-2020-12-preservation the other tool's input schema as
    the broker listed it. None when the scenario says nothing about ``tool``."""
    for call in context.get("toolCalls") or []:
        if f"{SERVER}__{call['name']}" == tool.name:
            return dict(call.get("arguments") or {})
    if tool.name != f"{SERVER}__json_schema_echo":
        return None
    focal = next(t for t in listed if t.name == f"{SERVER}__json_schema_2020_12_tool")
    return {"schema": focal.input_schema}


async def downstream_tools(session: ClientSession, changed: list[anyio.Event]) -> list[types.Tool]:
    """The downstream's tools as the broker lists them, once they arrived; gives up (raises)
    when the broker reports that the server's first connection failed."""
    with anyio.fail_after(WAIT_FOR_TOOLS):
        while True:
            listed = (await session.list_tools()).tools
            mine = [t for t in listed if t.name.startswith(f"{SERVER}__")]
            if mine:
                return mine
            with anyio.move_on_after(0.5):
                await changed[0].wait()
            changed[0] = anyio.Event()
            row = await server_row(session)
            if row["state"] == "connected" and row["tool_count"] == 0:
                return []  # a server without tools: the handshake was the whole scenario
            if row["state"] != "connected" and row["last_error"]:
                raise SystemExit(f"the broker could not connect: {row['last_error']}")


async def server_row(session: ClientSession) -> dict[str, Any]:
    """The downstream's row of the broker's ``list_servers``."""
    result = await session.call_tool("list_servers", {})
    rows = (result.structured_content or {}).get("servers", [])
    return next(row for row in rows if row["name"] == SERVER)


BROWSER = f"{shlex.quote(sys.executable)} {shlex.quote(str(HERE / 'open_url.py'))} %s"


MODERN = "2026-07-28"


async def drive(
    config: Path, browser: str = BROWSER, context: dict[str, Any] | None = None
) -> list[str]:
    """Serve ``config`` over stdio with ``BROWSER=browser``; list and call every downstream
    tool once. One line per call: the tool's name and its result's text. The host speaks
    the handshake, or the 2026-07-28 wire when ``CONFORMANCE_HOST`` says so."""
    env = dict(os.environ)
    env["BROWSER"] = browser
    params = StdioServerParameters(command=BROKER, args=["serve", "--config", str(config)], env=env)
    if os.environ.get("CONFORMANCE_HOST") == MODERN:
        return await drive_modern(params, context or {})
    changed = [anyio.Event()]

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            changed[0].set()

    async def progress(value: float, total: float | None, message: str | None) -> None:
        pass  # a host that shows progress; its calls take the full path, which relays

    async with (
        stdio_client(params) as (read, write),
        ClientSession(
            read, write, message_handler=on_message, elicitation_callback=accept_defaults
        ) as session,
    ):
        await session.initialize()
        listed = await downstream_tools(session, changed)
        return await call_each(session, listed, context or {}, progress)


async def call_each(
    host: Any, listed: list[types.Tool], context: dict[str, Any], progress: Any
) -> list[str]:
    """Call each of ``listed`` once as ``host`` (a session or a client)."""
    calls = []
    for tool in listed:
        arguments = given_arguments(tool, listed, context)
        if arguments is None:
            arguments = arguments_for(tool.input_schema)
        try:
            result = await host.call_tool(tool.name, arguments, progress_callback=progress)
        except MCPError as exc:  # the server's JSON-RPC error, as it sent it
            calls.append(f"{tool.name}: error {exc.error.code}: {exc.error.message}")
            continue
        text = " ".join(b.text for b in result.content if isinstance(b, types.TextContent))
        calls.append(f"{tool.name}: {'error: ' if result.is_error else ''}{text}")
    return calls


async def drive_modern(params: StdioServerParameters, context: dict[str, Any]) -> list[str]:
    """:func:`drive` with a host on the 2026-07-28 wire: it waits for the downstream's tools
    by listing them (no notification stream needed) and answers questions the broker puts
    in an ``InputRequiredResult``."""

    async def progress(value: float, total: float | None, message: str | None) -> None:
        pass

    async with Client(params, mode=MODERN, elicitation_callback=accept_defaults) as client:
        with anyio.fail_after(WAIT_FOR_TOOLS):
            while True:
                listed = (await client.list_tools()).tools
                mine = [t for t in listed if t.name.startswith(f"{SERVER}__")]
                if mine:
                    break
                row = await modern_server_row(client)
                if row["state"] == "connected" and row["tool_count"] == 0:
                    return []
                if row["state"] != "connected" and row["last_error"]:
                    raise SystemExit(f"the broker could not connect: {row['last_error']}")
                await anyio.sleep(0.5)
        return await call_each(client, mine, context, progress)


async def modern_server_row(client: Client) -> dict[str, Any]:
    result = await client.call_tool("list_servers", {})
    rows = (result.structured_content or {}).get("servers", [])
    return next(row for row in rows if row["name"] == SERVER)


def main() -> int:
    url = sys.argv[-1]
    scenario = os.environ.get("MCP_CONFORMANCE_SCENARIO", "")
    context = json.loads(os.environ.get("MCP_CONFORMANCE_CONTEXT") or "{}")
    kept = os.environ.get("CONFORMANCE_DRIVER_DIR")
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(kept) if kept else Path(scratch)
        folder.mkdir(parents=True, exist_ok=True)
        needs_issuer = "issuer" not in context and (
            "client_secret" in context or "private_key_pem" in context
        )
        issuer = advertised_issuer(url) if needs_issuer else None
        config = write_config(folder, url, oauth_table(scenario, context, issuer))
        for line in anyio.run(drive, config, BROWSER, context):
            print(line, file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
