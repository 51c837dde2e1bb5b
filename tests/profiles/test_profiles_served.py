"""Profiles through real brokers: what a host of ``/mcp/NAME``, of a profile's token or of
``serve --profile NAME`` sees and may call, what its sessions record, and the errors an
unknown profile gets."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import httpx2
from mcp import Client, StdioServerParameters
from mcp.client.sse import sse_client
from mcp.client.streamable_http import streamable_http_client

from tests.support.broker_procs import BROKER, running_broker, server_env, write_config
from tests.support.handshake import INITIALIZE
from tests.support.mcp_calls import call, error
from tests.support.polling import eventually

FIXTURE = Path(__file__).resolve().parents[1] / "gateway" / "fixtures" / "named_tools.py"
HEADERS = {"content-type": "application/json", "accept": "application/json, text/event-stream"}
# alpha: files; beta: deployment. Profile "files" sees alpha and the Python and SQL rules,
# profile "ops" only beta's deploy tool and the deploy guide, with its own preset.
PROFILES = f"""
[servers.alpha]
command = {sys.executable!r}
args = [{str(FIXTURE)!r}, "read-file", "write-file"]

[servers.beta]
command = {sys.executable!r}
args = [{str(FIXTURE)!r}, "deploy", "rollback"]

[profiles.files]
servers = ["alpha"]
rules = ["python-style", "sql-safety"]
references = []

[profiles.ops]
servers = ["beta"]
tools = ["beta/deploy"]
rules = []
references = ["deploy-guide"]
preset = "conservative"
"""
OPS_TOKEN = "ops-token-for-tests"
WITH_TOKEN = PROFILES + 'token_env = "OPS_TOKEN"\n'  # in [profiles.ops], the last table


def _config(tmp_path: Path, extra: str = PROFILES) -> Path:
    return write_config(tmp_path, extra=extra)


def _downstream(names: list[str]) -> set[str]:
    return {n for n in names if "__" in n}


async def _tool_names(client: Client) -> list[str]:
    with anyio.fail_after(30):
        listed = await client.list_tools()
    return [t.name for t in listed.tools]


async def _connected(client: Client, count: int) -> None:
    """Wait until ``client`` lists ``count`` downstream tools (its servers are connected)."""

    async def listed() -> bool:
        return len(_downstream(await _tool_names(client))) >= count

    await eventually(listed, within=60, every=0.5, what=f"{count} downstream tools listed")


async def _context_items(client: Client, message: str) -> tuple[str, set[str]]:
    created = await call(client, "create_session", agent="test")
    sid = created["session_id"]
    built = await call(client, "build_request_context", session_id=sid, message=message)
    return sid, {i["name"] for i in built["items"]}


async def test_two_hosts_of_one_broker_see_their_profiles_over_http(tmp_path: Path) -> None:
    async with running_broker(_config(tmp_path)) as (
        url,
        _,
    ):
        with anyio.fail_after(90):
            async with (
                Client(f"{url}/mcp/files") as files,
                Client(f"{url}/mcp/ops") as ops,
                Client(f"{url}/mcp") as everything,
            ):
                await _connected(everything, 6)
                files_tools = _downstream(await _tool_names(files))
                ops_tools = _downstream(await _tool_names(ops))
                all_tools = _downstream(await _tool_names(everything))
                _, files_items = await _context_items(files, "parameterized SQL queries")
                _, ops_items = await _context_items(ops, "parameterized SQL queries deploy")
                refused = await error(
                    files, "call_tool", server="beta", tool="deploy", arguments={}
                )
                refused_direct = await files.call_tool("beta__deploy", {})
                allowed = await ops.call_tool("beta__deploy", {"text": "x"})
    assert files_tools == {"alpha__read-file", "alpha__write-file", "alpha__grow"}
    assert ops_tools == {"beta__deploy"}
    assert all_tools == files_tools | ops_tools | {"beta__rollback", "beta__grow"}
    assert {"python-style", "sql-safety", "read-file"} <= files_items
    assert not files_items & {"deploy", "rollback", "deploy-guide", "api overview"}
    assert "deploy" in ops_items
    assert not ops_items & {"python-style", "sql-safety", "read-file", "rollback"}
    assert "not in profile 'files'" in refused
    assert refused_direct.is_error and "profile 'files'" in refused_direct.content[0].text  # type: ignore[union-attr]
    assert not allowed.is_error and allowed.content[0].text == "deploy:x"  # type: ignore[union-attr]


async def test_a_session_records_its_profile_and_stays_in_it(tmp_path: Path) -> None:
    async with running_broker(_config(tmp_path)) as (
        url,
        _,
    ):
        with anyio.fail_after(90):
            async with Client(f"{url}/mcp/ops") as ops, Client(f"{url}/mcp/files") as files:
                await _connected(ops, 1)
                await _connected(files, 3)
                created = await call(ops, "create_session", agent="deployer")
                sid = created["session_id"]
                listed = await call(ops, "list_session_context", session_id=sid)
                built = await call(ops, "build_request_context", session_id=sid, message="deploy")
                turn = await ops.read_resource(
                    f"context://sessions/{sid}/requests/{built['request_id']}"
                )
                foreign = await error(files, "list_session_context", session_id=sid)
                found = await call(files, "search_context_items", query="deploy the service")
                catalog = await call(files, "list_catalog")
            async with httpx2.AsyncClient(timeout=30) as http:
                page = (await http.get(f"{url}/ui/api/sessions")).json()
    assert created["profile"] == "ops" and created["preset"] == "conservative"
    assert listed["profile"] == "ops"
    assert [r["profile"] for r in page["sessions"] if r["session_id"] == sid] == ["ops"]
    assert '"profile": "ops"' in turn.contents[0].text  # type: ignore[union-attr]
    assert "created under profile 'ops'" in foreign and "uses profile 'files'" in foreign
    assert not {i["name"] for i in found["items"]} & {"deploy", "deploy-guide"}
    assert {i["name"] for i in catalog["items"]} >= {"python-style", "read-file"}
    assert not {i["name"] for i in catalog["items"]} & {"deploy", "deploy-guide", "api overview"}


async def test_a_profiles_token_selects_it_and_reaches_only_its_endpoints(tmp_path: Path) -> None:
    env = server_env() | {"OPS_TOKEN": OPS_TOKEN}
    auth = {"authorization": f"Bearer {OPS_TOKEN}"}
    async with running_broker(_config(tmp_path, WITH_TOKEN), env=env) as (url, _):
        async with httpx2.AsyncClient(timeout=30, headers=auth) as http:
            with anyio.fail_after(90):
                async with Client(streamable_http_client(f"{url}/mcp", http_client=http)) as c:
                    await _connected(c, 1)
                    tools = _downstream(await _tool_names(c))
            other = await http.post(f"{url}/mcp/files", json=INITIALIZE, headers=HEADERS)
            ui = await http.get(f"{url}/ui/")
        async with httpx2.AsyncClient(timeout=30) as plain:
            missing = await plain.post(f"{url}/mcp", json=INITIALIZE, headers=HEADERS)
    assert tools == {"beta__deploy"}
    assert other.status_code == 403 and "selects profile 'ops'" in other.text
    assert ui.status_code == 403
    # A profile's token turns authentication on: a host without a token is refused.
    assert missing.status_code == 401


async def test_a_profile_has_its_own_legacy_sse_endpoint(tmp_path: Path) -> None:
    async with running_broker(_config(tmp_path), "sse") as (url, _):
        with anyio.fail_after(90):
            async with (
                Client(sse_client(f"{url}/sse/ops"), mode="legacy") as ops,
                Client(sse_client(f"{url}/sse"), mode="legacy") as everything,
            ):
                await _connected(everything, 6)
                tools = _downstream(await _tool_names(ops))
                created = await call(ops, "create_session")
    assert tools == {"beta__deploy"}
    assert created["profile"] == "ops"


async def test_an_unknown_profile_in_the_url_is_a_404_naming_the_profiles(tmp_path: Path) -> None:
    async with (
        running_broker(_config(tmp_path)) as (url, _),
        httpx2.AsyncClient(timeout=30) as http,
    ):
        answer = await http.post(f"{url}/mcp/nope", json=INITIALIZE, headers=HEADERS)
        sse = await http.get(f"{url}/sse/nope")
    assert answer.status_code == 404 and sse.status_code == 404
    message = answer.json()["error"]["message"]
    assert "unknown profile 'nope'" in message and "files, ops" in message


async def test_serve_profile_over_stdio_shows_only_that_profile(tmp_path: Path) -> None:
    params = StdioServerParameters(
        command=BROKER,
        args=["serve", "--config", str(_config(tmp_path)), "--profile", "ops"],
        env=server_env(),
    )
    with anyio.fail_after(90):
        async with Client(params) as client:
            await _connected(client, 1)
            tools = _downstream(await _tool_names(client))
            sid, items = await _context_items(client, "deploy with python style")
            refused = await error(
                client, "call_tool", server="alpha", tool="read-file", arguments={}
            )
            listed = await call(client, "list_session_context", session_id=sid)
    assert tools == {"beta__deploy"}
    assert "deploy" in items and not items & {"python-style", "read-file", "rollback"}
    assert "not in profile 'ops'" in refused
    assert listed["profile"] == "ops"


def _serve(*args: str, config: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [BROKER, "serve", "--config", str(config), *args],
        env=server_env(),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_an_unknown_serve_profile_is_a_one_line_config_error(tmp_path: Path) -> None:
    done = _serve("--profile", "nope", config=_config(tmp_path))
    assert done.returncode == 1
    lines = [line for line in done.stderr.splitlines() if "error" in line]
    assert len(lines) == 1 and "unknown profile 'nope'" in lines[0] and "files, ops" in lines[0]


def _broken(tmp_path: Path, table: str) -> Path:
    return _config(tmp_path, PROFILES + f"\n[profiles.broken]\n{table}\n")


def test_a_profile_naming_unknown_servers_or_items_is_refused_at_load(tmp_path: Path) -> None:
    servers = _serve(config=_broken(tmp_path, 'servers = ["alpha", "gamma"]'))
    tools = _serve(config=_broken(tmp_path, 'tools = ["delta/x"]'))
    rules = _serve(config=_broken(tmp_path, 'rules = ["python-style", "no-such-rule"]'))
    checked = subprocess.run(
        [BROKER, "check", "--config", str(_broken(tmp_path, 'servers = ["gamma"]'))],
        env=server_env(),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert servers.returncode == 1 and "profiles.broken.servers" in servers.stderr
    assert "'gamma'" in servers.stderr
    assert tools.returncode == 1 and "'delta/x'" in tools.stderr
    assert rules.returncode == 1 and "'no-such-rule'" in rules.stderr
    assert checked.returncode != 0 and "'gamma'" in checked.stdout + checked.stderr


async def _session_under(config: Path, profile: str, message: str) -> dict[str, Any]:
    """One session created through ``serve --profile`` with one request context; the
    profile host's own usage stats."""
    params = StdioServerParameters(
        command=BROKER,
        args=["serve", "--config", str(config), "--profile", profile],
        env=server_env(),
    )
    with anyio.fail_after(90):
        async with Client(params) as client:
            created = await call(client, "create_session")
            await call(
                client, "build_request_context", session_id=created["session_id"], message=message
            )
            return await call(client, "get_usage_stats")


async def test_usage_stats_show_the_sessions_of_one_profile(tmp_path: Path) -> None:
    config = write_config(tmp_path, backend="sqlite", extra=PROFILES)
    await _session_under(config, "files", "parameterized SQL queries")
    own = await _session_under(config, "ops", "deploy the service")
    done = subprocess.run(
        [BROKER, "stats", "--config", str(config), "--profile", "ops", "--json"],
        env=server_env(),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    everything = subprocess.run(
        [BROKER, "stats", "--config", str(config), "--json"],
        env=server_env(),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert own["sessions"] == 1 and own["turns"] == 1
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["sessions"] == 1
    assert json.loads(everything.stdout)["sessions"] == 2


def test_an_unset_token_variable_or_profile_over_http_stops_serve(tmp_path: Path) -> None:
    config = _config(tmp_path, WITH_TOKEN)
    unset = _serve("--transport", "http", "--port", "0", config=config)
    over_http = _serve("--transport", "http", "--port", "0", "--profile", "ops", config=config)
    assert unset.returncode == 1 and "profiles.ops.token_env names 'OPS_TOKEN'" in unset.stderr
    assert over_http.returncode == 1 and "/mcp/NAME" in over_http.stderr
