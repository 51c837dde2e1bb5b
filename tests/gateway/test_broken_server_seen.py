"""A downstream server that is not running is named, with why, in every request context's
text and warnings: over stdio, a host whose model reads only text, one server's command
misspelt beside a working one."""

from __future__ import annotations

from pathlib import Path

import anyio
from mcp import Client, StdioServerParameters

from tests.gateway.gateway_env import VENV_BIN, executable
from tests.support.broker_procs import BROKER, server_env
from tests.support.mcp_calls import call


async def test_a_server_that_failed_to_start_is_named_with_its_reason_in_the_text(
    tmp_path: Path,
) -> None:
    config = tmp_path / "broker.toml"
    config.write_text(
        f"""
[search]
semantic = false

[servers.clock]
command = "mcp-server-tme-misspelt"
include = "agent"

[servers.time]
command = "{executable(VENV_BIN / 'mcp-server-time')}"
include = "agent"
""",
        encoding="utf-8",
    )
    params = StdioServerParameters(
        command=BROKER, args=["serve", "--config", str(config)], env=server_env()
    )
    with anyio.fail_after(90):
        async with Client(params) as client:
            built = await call(
                client, "build_request_context", message="what time is it in Tokyo?"
            )
    text = built["text"]
    assert "## Warnings" in text, text
    line = next(line for line in text.splitlines() if "'clock'" in line)
    assert "is not running" in line and "mcp-server-tme-misspelt" in line, line
    assert len(line) < 400, line  # one line with its reason, not the server's whole log
    assert any("'clock'" in w and "not running" in w for w in built["warnings"])
    assert not any("'time'" in w for w in built["warnings"])  # the working one is not named
