"""server-everything once over Streamable HTTP, started on a free port."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator

import anyio
import pytest
from anyio.abc import Process
from anyio.streams.text import TextReceiveStream
from context_broker.server.settings import DownstreamConfig
from gateway_env import NODE_BIN, executable, free_port, running, status_of


@pytest.fixture
async def everything_http() -> AsyncIterator[str]:
    port = free_port()
    command = [executable(NODE_BIN / "mcp-server-everything"), "streamableHttp"]
    process: Process = await anyio.open_process(
        command, env={**os.environ, "PORT": str(port)}, stdout=None
    )
    try:
        assert process.stderr is not None
        with anyio.fail_after(30):
            async for chunk in TextReceiveStream(process.stderr):
                if "listening on port" in chunk.lower():
                    break
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.terminate()
        with anyio.fail_after(10):
            await process.wait()
        await process.aclose()


async def test_everything_over_streamable_http_lists_calls_reads_and_prompts(
    everything_http: str,
) -> None:
    servers = {"web": DownstreamConfig(url=everything_http, transport="http", timeout=20)}
    async with running(servers) as gw:
        status = status_of(gw, "web")
        assert status.connected and status.transport == "http", status.row()
        assert any(t.name == "web__get-tiny-image" for t in gw.exposed_tools())
        image = await gw.call_tool("web", "get-tiny-image", {})
        assert "image" in {b.type for b in image.content}
        resources = await gw.list_resources()
        assert resources and all(r.uri.startswith("downstream://web/") for r in resources)
        read = await gw.read_resource(resources[0].uri)
        assert read.contents and read.contents[0].uri == resources[0].uri
        prompts = await gw.list_prompts()
        simple = next(p for p in prompts if p.name == "web__simple-prompt")
        rendered = await gw.get_prompt(simple.name)
        assert rendered.messages
