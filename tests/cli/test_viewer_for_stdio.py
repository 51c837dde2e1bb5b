"""What a host over stdio got is in the viewer too: the stdio broker records its turns in the
SQLite store, and a second broker serving HTTP on the same config shows them under ``/ui/``,
as docs/teams.md says."""

from __future__ import annotations

from pathlib import Path

import anyio
import httpx
from mcp import Client, StdioServerParameters

from tests.support.broker_procs import BROKER, running_broker, server_env, write_config
from tests.support.mcp_calls import call


async def test_a_stdio_hosts_turns_show_in_the_viewer_of_a_broker_on_the_same_store(
    tmp_path: Path,
) -> None:
    config = write_config(tmp_path, backend="sqlite")
    params = StdioServerParameters(
        command=BROKER, args=["serve", "--config", str(config)], env=server_env()
    )
    with anyio.fail_after(60):
        async with Client(params) as client:
            sid = (await call(client, "create_session"))["session_id"]
            await call(client, "build_request_context", session_id=sid, message="deploy it")

    async with (
        running_broker(config, "http") as (url, _),
        httpx.AsyncClient(trust_env=False) as http,
    ):
        with anyio.fail_after(30):
            listed = (await http.get(f"{url}/ui/api/sessions")).json()
    assert sid in {s["session_id"] for s in listed["sessions"]}, listed
