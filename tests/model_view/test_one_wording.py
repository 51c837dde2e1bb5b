"""One tool, one wording: the request context's text (``build_request_context``), the
assembled LLM input (``assemble_context``) and the ``context`` prompt describe a selected tool
with the same text; and whichever of them built the request context, a handshake-era host
then finds the selected tool in its own tool list. A broker over stdio in front of the real
``mcp-server-time`` (lexical search: fast and deterministic)."""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

import anyio
from mcp import Client, StdioServerParameters

BIN = Path(sys.executable).parent
BROKER = str(BIN / "context-broker")
MESSAGE = "What time is it in Tokyo?"
OFF_TOPIC = "xyzzy plugh"  # selects no tool by search: only the one added by hand counts


def write_config(tmp: Path) -> Path:
    path = tmp / "broker.toml"
    path.write_text(
        f"""
[server]
relist_selected = true

[search]
semantic = false

[[rules]]
name = "timezones"
description = "Answering questions about time"
text = "Always state the IANA time zone you used."
include = "always"

[servers.time]
command = "{BIN / "mcp-server-time"}"
include = "agent"
""",
        encoding="utf-8",
    )
    return path


def host(config: Path, **kwargs: Any) -> Client:
    params = StdioServerParameters(command=BROKER, args=["serve", "--config", str(config)])
    return Client(params, mode="legacy", **kwargs)


def text_of(result: Any) -> str:
    return "".join(getattr(block, "text", "") for block in result.content)


async def call(client: Client, tool: str, /, **arguments: Any) -> Any:
    result = await client.call_tool(tool, arguments)
    assert not result.is_error, text_of(result)
    return result


async def session_with(client: Client, tool: str) -> str:
    """A new session with ``tool`` of the time server added by hand."""
    created = await call(client, "create_session")
    sid: str = created.structured_content["session_id"]
    await call(client, "add_context_item", session_id=sid, type="tool", name=tool, server="time")
    return sid


def block_of(text: str, name: str) -> str:
    """The whole description of the tool called ``name`` in ``text``: from its heading to
    the blank line that ends it."""
    match = re.search(rf"^### {re.escape(name)} .*?(?=\n\n|\Z)", text, flags=re.M | re.S)
    assert match, f"no block for {name!r} in:\n{text}"
    return match.group(0)


async def test_the_three_paths_describe_a_selected_tool_with_the_same_text(
    tmp_path: Path,
) -> None:
    only_tools = {"components": [{"kind": "tools"}, {"kind": "message"}]}
    with anyio.fail_after(60):
        async with host(write_config(tmp_path)) as client:
            sid = await session_with(client, "convert_time")
            built = await call(client, "build_request_context", session_id=sid, message=MESSAGE)
            assembled = await call(
                client, "assemble_context", session_id=sid, message=MESSAGE, model=only_tools
            )
            prompt = await client.get_prompt("context", {"message": MESSAGE, "session_id": sid})
    block = block_of(text_of(built), "time__convert_time")
    assert block.startswith("### time__convert_time (server time, tool convert_time) — manual\n")
    assert "Input schema: {" in block and '"source_timezone"' in block
    tools_message = assembled.structured_content["messages"][0]["content"]
    assert block_of(tools_message, "time__convert_time") == block
    texts = [m.content.text for m in prompt.messages]  # type: ignore[union-attr]
    tools_text = next(t for t in texts if "## Tools" in t)
    assert block_of(tools_text, "time__convert_time") == block


async def test_a_host_lists_the_tool_whichever_path_built_the_request_context(
    tmp_path: Path,
) -> None:
    heard = [anyio.Event()]

    async def on_message(message: Any) -> None:
        if getattr(message, "method", None) == "notifications/tools/list_changed":
            heard[-1].set()

    async def listed() -> set[str]:
        return {t.name for t in (await client.list_tools()).tools if t.name.startswith("time__")}

    with anyio.fail_after(60):
        async with host(write_config(tmp_path), message_handler=on_message) as client:
            assert await listed() == set()  # agent mode: nothing listed up front
            sid = await session_with(client, "convert_time")
            await call(client, "build_request_context", session_id=sid, message=OFF_TOPIC)
            await heard[-1].wait()
            heard.append(anyio.Event())
            assert await listed() == {"time__convert_time"}

            sid = await session_with(client, "get_current_time")
            await call(client, "assemble_context", session_id=sid, message=OFF_TOPIC)
            await heard[-1].wait()
            heard.append(anyio.Event())
            assert await listed() == {"time__get_current_time"}
            direct = await call(client, "time__get_current_time", timezone="Asia/Tokyo")
            assert "Asia/Tokyo" in text_of(direct)

            sid = await session_with(client, "convert_time")
            await client.get_prompt("context", {"message": OFF_TOPIC, "session_id": sid})
            await heard[-1].wait()
            assert await listed() == {"time__convert_time"}
