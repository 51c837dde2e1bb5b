"""Who may use an HTTP broker, and what it tells those who may not: a real
``context-broker serve --transport http`` over a real socket.

A public bind needs a bearer token whatever ``allowed_hosts`` says; ``/readyz`` tells a
caller without the token only whether the broker is ready."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import anyio
import httpx2
from anyio.streams.text import TextReceiveStream
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from tests.support.broker_procs import BROKER, running_broker, server_env, write_config
from tests.support.handshake import INITIALIZE
from tests.support.polling import eventually

TIME = str(Path(sys.executable).parent / "mcp-server-time")
TOKEN = "tok-access-9c1f2e"
TOKEN_ENV = "BROKER_ACCESS_TOKEN"
HEADERS = {"content-type": "application/json", "accept": "application/json, text/event-stream"}
PUBLIC = '\n[server.http]\nhost = "0.0.0.0"\nallowed_hosts = ["broker.example"]\n'


async def _serve_until_listening_or_exit(config: Path, env: dict[str, str]) -> tuple[str, int]:
    """Run ``serve --transport http``; what it logged and its exit code (-1: it listened)."""
    cmd = [BROKER, "serve", "--config", str(config), "--transport", "http", "--port", "0"]
    proc = await anyio.open_process(cmd, env=env)
    log = ""
    try:
        assert proc.stderr is not None
        with anyio.fail_after(60):
            async for chunk in TextReceiveStream(proc.stderr):
                log += chunk
                if re.search(r"listening on http://\S+/mcp", log):
                    return log, -1
            return log, await proc.wait()
    finally:
        if proc.returncode is None:
            proc.terminate()
            with anyio.move_on_after(10):
                await proc.wait()
            if proc.returncode is None:
                proc.kill()
        await proc.aclose()


def _local(url: str) -> str:
    """The broker's URL reached over loopback (it logs the address it is bound to)."""
    return re.sub(r"//[^/:]+|//\[[^\]]+\]", "//127.0.0.1", url, count=1)


async def test_a_public_bind_with_allowed_hosts_but_no_token_is_refused(tmp_path: Path) -> None:
    log, code = await _serve_until_listening_or_exit(
        write_config(tmp_path, extra=PUBLIC), server_env()
    )
    assert code > 0, log  # refused: it never listened
    error = [line for line in log.splitlines() if "error" in line]
    assert len(error) == 1, log
    assert "server.http.auth_token_env" in error[0] and "--insecure" in error[0]


async def test_a_public_bind_with_a_token_refuses_an_allowed_host_without_the_token(
    tmp_path: Path,
) -> None:
    config = write_config(tmp_path, extra=PUBLIC + f'auth_token_env = "{TOKEN_ENV}"\n')
    env = {**server_env(), TOKEN_ENV: TOKEN}
    async with (
        running_broker(config, env=env) as (url, _),
        httpx2.AsyncClient(timeout=10) as http,
    ):
        base = _local(url)
        host = {**HEADERS, "host": "broker.example"}
        refused = await http.post(f"{base}/mcp", json=INITIALIZE, headers=host)
        allowed = await http.post(
            f"{base}/mcp", json=INITIALIZE, headers={**host, "authorization": f"Bearer {TOKEN}"}
        )
    assert refused.status_code == 401, refused.text
    assert allowed.status_code == 200, allowed.text


async def _ready_body(http: httpx2.AsyncClient, url: str, auth: bool) -> dict[str, object]:
    """``/readyz`` once the downstream servers were gathered (bounded), with or without the
    token."""
    headers = {"authorization": f"Bearer {TOKEN}"} if auth else {}

    async def gathered() -> dict[str, object] | None:
        answer = await http.get(f"{url}/readyz", headers=headers)
        assert answer.status_code in (200, 503), answer.text
        body: dict[str, object] = answer.json()
        return None if "still connecting" in str(body.get("reasons")) else body

    return await eventually(gathered, within=30, every=0.1, what="/readyz past connecting")


async def test_readyz_without_the_token_says_only_whether_the_broker_is_ready(
    tmp_path: Path,
) -> None:
    missing = tmp_path / "models-not-here"
    config = write_config(
        tmp_path,
        extra=f'\n[server.http]\nauth_token_env = "{TOKEN_ENV}"\n\n'
        f'[servers.inventory-db]\ncommand = "{TIME}"\n',
    )
    text = config.read_text().replace(
        "[search]\nsemantic = false", f'[search]\nsemantic = true\nmodel_dir = "{missing}"'
    )
    config.write_text(text, encoding="utf-8")
    env = {**server_env(), TOKEN_ENV: TOKEN}
    async with (
        running_broker(config, env=env) as (url, _),
        httpx2.AsyncClient(timeout=10) as http,
    ):
        detailed = await _ready_body(http, url, auth=True)
        bare = await _ready_body(http, url, auth=False)
    assert detailed["ready"] is False and "inventory-db" in str(detailed["checks"])
    assert bare == {"ready": False}


async def test_metrics_count_calls_to_unknown_servers_under_one_label(tmp_path: Path) -> None:
    config = write_config(
        tmp_path,
        extra=f'\n[server.http]\nauth_token_env = "{TOKEN_ENV}"\n\n'
        f'[servers.time]\ncommand = "{TIME}"\n',
    )
    env = {**server_env(), TOKEN_ENV: TOKEN}
    auth = {"authorization": f"Bearer {TOKEN}"}
    async with (
        running_broker(config, env=env) as (url, _),
        httpx2.AsyncClient(timeout=30, headers=auth) as http,
        Client(streamable_http_client(f"{url}/mcp", http_client=http)) as client,
    ):
        for server in ("time", "made-up-1", "made-up-2"):
            with anyio.fail_after(30):
                await client.call_tool(
                    "call_tool",
                    {
                        "server": server,
                        "tool": "get_current_time",
                        "arguments": {"timezone": "UTC"},
                    },
                )
        metrics = (await http.get(f"{url}/metrics")).text
    calls = [line for line in metrics.splitlines() if line.startswith("context_broker_downstream")]
    assert 'context_broker_downstream_calls_total{server="time"} 1.0' in calls, calls
    assert 'context_broker_downstream_calls_total{server="other"} 2.0' in calls, calls
    assert not [line for line in calls if "made-up" in line], calls


async def test_the_sessions_list_comes_a_bounded_page_at_a_time(tmp_path: Path) -> None:
    config = write_config(
        tmp_path, backend="sqlite", extra=f'\n[server.http]\nauth_token_env = "{TOKEN_ENV}"\n'
    )
    env = {**server_env(), TOKEN_ENV: TOKEN}
    auth = {"authorization": f"Bearer {TOKEN}"}
    async with (
        running_broker(config, env=env) as (url, _),
        httpx2.AsyncClient(timeout=30, headers=auth) as http,
        Client(streamable_http_client(f"{url}/mcp", http_client=http)) as client,
    ):
        created = []
        for n in range(5):
            with anyio.fail_after(30):
                result = await client.call_tool("create_session", {"agent": f"agent-{n}"})
            assert isinstance(result.structured_content, dict)
            created.append(result.structured_content["session_id"])

        async def page(query: str) -> httpx2.Response:
            return await http.get(f"{url}/ui/api/sessions{query}")

        first, last, whole = [await page(q) for q in ("?limit=2", "?limit=2&offset=4", "")]
        too_many, negative = await page("?limit=201"), await page("?offset=-1")
    newest_first = created[::-1]
    assert [s["session_id"] for s in first.json()["sessions"]] == newest_first[:2]
    assert first.json()["next_offset"] == 2
    assert [s["session_id"] for s in last.json()["sessions"]] == newest_first[4:]
    assert last.json()["next_offset"] is None
    assert whole.json()["limit"] == 50 and len(whole.json()["sessions"]) == 5
    assert too_many.status_code == 400 and "limit" in too_many.json()["error"]
    assert negative.status_code == 400 and "offset" in negative.json()["error"]


async def _ui_cookie(http: httpx2.AsyncClient, url: str) -> str:
    """Sign a browser in with ``/ui/?token=``: the cookie it is given."""
    signed_in = await http.get(f"{url}/ui/?token={TOKEN}")
    assert signed_in.status_code == 303, signed_in.text
    return signed_in.headers["set-cookie"].split(";", 1)[0]


async def test_replicas_sharing_the_cookie_key_accept_each_others_ui_sign_in(
    tmp_path: Path,
) -> None:
    key_env = "BROKER_UI_COOKIE_KEY"
    config = write_config(
        tmp_path,
        extra=f'\n[server.http]\nauth_token_env = "{TOKEN_ENV}"\nui_cookie_key_env = "{key_env}"\n',
    )
    alone = tmp_path / "alone"
    alone.mkdir()
    unshared = write_config(alone, extra=f'\n[server.http]\nauth_token_env = "{TOKEN_ENV}"\n')
    env = {**server_env(), TOKEN_ENV: TOKEN, key_env: "k" * 16 + "shared-replica-key-0042"}
    async with (
        running_broker(config, env=env) as (first, _),
        running_broker(config, env=env) as (second, _),
        running_broker(unshared, env=env) as (other, _),
        httpx2.AsyncClient(timeout=10) as http,
    ):
        cookie = {"cookie": await _ui_cookie(http, first)}
        on_first = await http.get(f"{first}/ui/api/sessions", headers=cookie)
        on_second = await http.get(f"{second}/ui/api/sessions", headers=cookie)
        on_other = await http.get(f"{other}/ui/api/sessions", headers=cookie)
    assert first != second
    assert on_first.status_code == 200 and on_second.status_code == 200, on_second.text
    assert on_other.status_code == 401  # a random per-process key: its own sign-ins only


async def test_a_short_shared_cookie_key_is_refused_at_startup(tmp_path: Path) -> None:
    config = write_config(
        tmp_path,
        extra=f'\n[server.http]\nauth_token_env = "{TOKEN_ENV}"\nui_cookie_key_env = "SHORT_KEY"\n',
    )
    env = {**server_env(), TOKEN_ENV: TOKEN, "SHORT_KEY": "too-short"}
    log, code = await _serve_until_listening_or_exit(config, env)
    assert code > 0 and "server.http.ui_cookie_key_env" in log and "32" in log, log
