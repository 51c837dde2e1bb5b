"""A silent downstream server does not hold the host's first tools/list for its whole timeout:
the broker answers within the startup budget and announces later arrivals."""

from __future__ import annotations

import sys
from pathlib import Path

import anyio
from mcp import Client, StdioServerParameters

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
NEVER = ROOT / "tests" / "gateway" / "fixtures" / "never_answers.py"


async def test_a_silent_server_does_not_hold_tools_list_past_the_startup_budget(
    tmp_path: Path,
) -> None:
    config = tmp_path / "broker.toml"
    config.write_text(
        f"""
[search]
semantic = false

[gateway]
startup_budget = 5

[servers.time]
command = "{BIN / "mcp-server-time"}"

[servers.silent]
command = "{sys.executable}"
args = ["{NEVER}"]
timeout = 60
""",
        encoding="utf-8",
    )
    params = StdioServerParameters(
        command=str(BIN / "context-broker"), args=["serve", "--config", str(config)]
    )
    # The default budget, long enough for mcp-server-time to start on a loaded machine (beside
    # other tests' processes); far short of the silent server's timeout, which is the point.
    with anyio.fail_after(90):
        async with Client(params, mode="legacy") as client:
            start = anyio.current_time()
            names = [t.name for t in (await client.list_tools()).tools]
            elapsed = anyio.current_time() - start
            assert elapsed < 20, (
                f"tools/list took {elapsed:.1f}s; the silent server's timeout is 60s"
            )
            assert "time__get_current_time" in names
            result = await client.call_tool("list_servers", {})
            text = "".join(getattr(b, "text", "") for b in result.content)
            assert "silent" in text and "starting" in text
