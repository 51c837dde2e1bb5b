"""The broker as a real subprocess: stdio, Streamable HTTP and SSE over a real socket, the
HTTP guard (Host/Origin, bearer token, body size), and persistence across a SIGKILL."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from mcp import Client, StdioServerParameters, stdio_client
from mcp.client.sse import sse_client

from tests.support.broker_procs import BROKER, running_broker, server_env, write_config
from tests.support.handshake import INITIALIZE
from tests.support.polling import eventually

HEADERS = {"content-type": "application/json", "accept": "application/json, text/event-stream"}


async def _round_trip(client: Client) -> dict[str, Any]:
    created = await client.call_tool("create_session", {"agent": "t"})
    sid = created.structured_content["session_id"]  # type: ignore[index]
    built = await client.call_tool(
        "build_request_context", {"session_id": sid, "message": "parameterized SQL queries"}
    )
    assert not built.is_error, built.content
    return built.structured_content  # type: ignore[return-value]


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_stdio_serves_both_protocol_eras(tmp_path: Path, mode: str) -> None:
    params = StdioServerParameters(
        command=BROKER,
        args=["serve", "--config", str(write_config(tmp_path))],
        env=server_env(),
    )
    with anyio.fail_after(60):
        async with Client(params, mode=mode) as client:  # type: ignore[arg-type]
            built = await _round_trip(client)
    assert any(i["name"] == "sql-safety" for i in built["items"])


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_streamable_http_serves_both_protocol_eras(tmp_path: Path, mode: str) -> None:
    async with running_broker(write_config(tmp_path)) as (url, _):
        with anyio.fail_after(60):
            async with Client(f"{url}/mcp", mode=mode) as client:  # type: ignore[arg-type]
                built = await _round_trip(client)
    assert built["request_id"].startswith("r_")


async def test_legacy_sse_serves_tools(tmp_path: Path) -> None:
    async with running_broker(write_config(tmp_path), "sse") as (url, _):
        with anyio.fail_after(60):
            async with Client(sse_client(f"{url}/sse"), mode="legacy") as client:
                built = await _round_trip(client)
    assert built["summary"]


async def test_foreign_host_and_origin_are_rejected(tmp_path: Path) -> None:
    async with (
        running_broker(write_config(tmp_path)) as (url, _),
        httpx2.AsyncClient(timeout=10) as http,
    ):
        bad_host = await http.post(
            f"{url}/mcp", json=INITIALIZE, headers={**HEADERS, "host": "evil.example"}
        )
        bad_origin = await http.post(
            f"{url}/mcp", json=INITIALIZE, headers={**HEADERS, "origin": "http://evil.example"}
        )
        local_origin = await http.post(
            f"{url}/mcp", json=INITIALIZE, headers={**HEADERS, "origin": "http://localhost:6274"}
        )
        sse_bad_host = await http.get(f"{url}/mcp", headers={"host": "evil.example:80"})
    assert bad_host.status_code == 421 and "evil.example" in bad_host.text
    assert bad_origin.status_code == 403 and "allowed_origins" in bad_origin.text
    assert local_origin.status_code == 200
    assert sse_bad_host.status_code == 421


async def test_a_bearer_token_is_required_when_configured(tmp_path: Path) -> None:
    extra = '\n[server.http]\nauth_token_env = "BROKER_TEST_TOKEN"\nmax_body_bytes = 4096\n'
    config = write_config(tmp_path, extra=extra)
    env = {**server_env(), "BROKER_TEST_TOKEN": "s3cret-token"}
    async with (
        running_broker(config, env=env) as (url, _),
        httpx2.AsyncClient(timeout=10) as http,
    ):
        missing = await http.post(f"{url}/mcp", json=INITIALIZE, headers=HEADERS)
        wrong = await http.post(
            f"{url}/mcp", json=INITIALIZE, headers={**HEADERS, "authorization": "Bearer nope"}
        )
        auth = {**HEADERS, "authorization": "Bearer s3cret-token"}
        right = await http.post(f"{url}/mcp", json=INITIALIZE, headers=auth)
        too_big = await http.post(f"{url}/mcp", content=b"x" * 5000, headers=auth)
    assert missing.status_code == 401 and "bearer token" in missing.text
    assert missing.headers["www-authenticate"].startswith("Bearer")
    assert wrong.status_code == 401
    assert right.status_code == 200
    assert too_big.status_code == 413
    assert "exceeds the limit of 4096 bytes (server.http.max_body_bytes)" in too_big.text


async def test_a_missing_token_variable_stops_the_server_from_starting(tmp_path: Path) -> None:
    config = write_config(tmp_path, extra='\n[server.http]\nauth_token_env = "NOT_SET_HERE"\n')
    with anyio.fail_after(30):
        done = await anyio.run_process(
            [BROKER, "serve", "--config", str(config), "--transport", "http", "--port", "0"],
            env=server_env(),
            check=False,
        )
    assert done.returncode == 1 and b"NOT_SET_HERE" in done.stderr


async def test_a_one_megabyte_message_over_http_is_refused_clearly(tmp_path: Path) -> None:
    async with running_broker(write_config(tmp_path, max_chars=500_000)) as (url, _):
        with anyio.fail_after(60):
            async with Client(f"{url}/mcp") as client:
                sid = (await client.call_tool("create_session", {})).structured_content[
                    "session_id"  # type: ignore[index]
                ]
                result = await client.call_tool(
                    "build_request_context", {"session_id": sid, "message": "m" * 1_000_000}
                )
    assert result.is_error
    assert "exceeds the limit of 500000" in result.content[0].text  # type: ignore[union-attr]


async def test_a_session_survives_sigkill_right_after_a_tool_call(tmp_path: Path) -> None:
    config = write_config(tmp_path, backend="sqlite")
    async with running_broker(config) as (url, proc):
        with anyio.fail_after(60):
            async with Client(f"{url}/mcp") as client:
                sid = (await client.call_tool("create_session", {})).structured_content[
                    "session_id"  # type: ignore[index]
                ]
                await client.call_tool(
                    "add_context_item",
                    {"session_id": sid, "type": "rule", "name": "commit-messages"},
                )
                built = await client.call_tool(
                    "build_request_context", {"session_id": sid, "message": "deploy it"}
                )
                before = await client.call_tool("list_turns", {"session_id": sid})
                proc.kill()  # SIGKILL, the moment the last call has returned
        await proc.wait()
    async with running_broker(config) as (url, _):
        with anyio.fail_after(60):
            async with Client(f"{url}/mcp") as client:
                items = await client.call_tool("list_session_context", {"session_id": sid})
                after = await client.call_tool("list_turns", {"session_id": sid})
                rid = built.structured_content["request_id"]  # type: ignore[index]
                got = await client.call_tool(
                    "get_request_context", {"session_id": sid, "request_id": rid}
                )
    names = [i["name"] for i in items.structured_content["items"]]  # type: ignore[index]
    assert names == ["python-style", "commit-messages"]
    assert after.structured_content == before.structured_content
    assert got.structured_content["items"] == built.structured_content["items"]  # type: ignore[index]


async def test_a_missing_model_is_reported_loudly_at_startup(tmp_path: Path) -> None:
    config = write_config(tmp_path, extra="")
    text = config.read_text().replace("[search]\n", '[search]\nmodel_dir = "missing-model"\n', 1)
    config.write_text(text.replace("semantic = false", "semantic = true"))
    log_path = tmp_path / "stderr.log"
    params = StdioServerParameters(
        command=BROKER, args=["serve", "--config", str(config)], env=server_env()
    )
    with anyio.fail_after(60), log_path.open("w") as errlog:
        async with Client(stdio_client(params, errlog=errlog), mode="legacy") as client:
            built = await _round_trip(client)
            assert built["search_mode"] == "lexical" and built["warnings"]
            await eventually(
                lambda: "SEMANTIC SEARCH UNAVAILABLE" in log_path.read_text(),
                within=60,
                what=lambda: f"the loud warning in the log:\n{log_path.read_text()}",
            )
    assert "setup-model" in log_path.read_text()
