"""OAuth to a downstream server, through ``context-broker serve`` and the ``auth`` command.

The downstream is tests/gateway/fixtures/oauth_downstream.py (an MCP server and its own
authorization server on one port); the browser is tests/conformance/open_url.py.
"""

from __future__ import annotations

import json
import os
import stat
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from context_broker.server.settings import parse_config
from gateway_env import oauth_downstream_server

from contextcore.errors import ConfigError
from tests.conformance.client_driver import BROKER, drive, write_config

LIFETIME = 2.0  # seconds an access token of the fixture lives
NO_BROWSER = "false"  # a BROWSER that opens nothing: only a refresh can sign in


@pytest.fixture
async def oauth_downstream() -> AsyncIterator[str]:
    async with oauth_downstream_server(LIFETIME) as base:
        yield base


def _grants(base: str) -> dict[str, Any]:
    counts: dict[str, Any] = httpx.get(f"{base}/grants").json()
    return counts


def _stored(folder: Path) -> dict[str, Any]:
    entry: dict[str, Any] = json.loads((folder / "tokens.json").read_text())["servers"]["remote"]
    return entry


async def _until_expired(folder: Path) -> None:
    """Wait out the stored access token's lifetime (the condition under test is time)."""
    await anyio.sleep(max(0.0, _stored(folder)["expires_at"] - time.time()) + 0.2)


async def test_tokens_survive_a_restart_and_are_refreshed(
    oauth_downstream: str, tmp_path: Path
) -> None:
    config = write_config(tmp_path, f"{oauth_downstream}/mcp", {})
    with anyio.fail_after(60):
        first = await drive(config)
    assert first == ["remote__echo: hello"]
    assert _grants(oauth_downstream).get("authorization_code") == 1
    token_file = tmp_path / "tokens.json"
    assert stat.S_IMODE(token_file.stat().st_mode) == 0o600
    assert _stored(tmp_path)["tokens"]["refresh_token"].startswith("rt-")

    await _until_expired(tmp_path)
    with anyio.fail_after(60):
        second = await drive(config, browser=NO_BROWSER)
    assert second == ["remote__echo: hello"]
    grants = _grants(oauth_downstream)
    assert grants.get("authorization_code") == 1, grants  # no new sign-in
    assert grants.get("refresh_token", 0) >= 1, grants


async def test_an_sse_server_behind_oauth_is_signed_in_and_called(
    oauth_downstream: str, tmp_path: Path
) -> None:
    config = write_config(tmp_path, f"{oauth_downstream}/sse", {})
    text = config.read_text().replace('url = "', 'transport = "sse"\nurl = "', 1)
    config.write_text(text)
    with anyio.fail_after(60):
        assert await drive(config) == ["remote__echo: hello"]
    assert _grants(oauth_downstream).get("authorization_code") == 1


async def _cli(*args: str, browser: str = NO_BROWSER) -> tuple[int, str, str]:
    env = {**os.environ, "BROWSER": browser}
    with anyio.fail_after(60):
        done = await anyio.run_process([BROKER, *args], env=env, check=False)
    return done.returncode, done.stdout.decode(), done.stderr.decode()


async def test_auth_login_status_and_logout_from_a_terminal(
    oauth_downstream: str, tmp_path: Path
) -> None:
    from tests.conformance.client_driver import BROWSER

    config = str(write_config(tmp_path, f"{oauth_downstream}/mcp", {"scopes": ["notes:read"]}))
    code, out, _ = await _cli("auth", "status", "--config", config)
    assert code == 0 and "remote: authorization_code: not signed in" in out
    assert f"({BROKER} auth login remote --config {config})" in out  # runs as printed
    code, out, _ = await _cli("check", "--config", config, "--json")  # no browser, a hint
    (server,) = json.loads(out)["servers"]
    assert code == 2 and f"run `{BROKER} auth login remote`" in server["lastError"]

    code, out, err = await _cli("auth", "login", "remote", "--config", config, browser=BROWSER)
    assert code == 0, err
    assert out.strip() == "remote: signed in; 1 tool(s) listed"
    assert _grants(oauth_downstream)["scopes"] == ["notes:read"]  # the configured scopes
    token = _stored(tmp_path)["tokens"]["access_token"]
    assert token not in out + err

    code, out, _ = await _cli("auth", "status", "--config", config, "--json")
    (row,) = json.loads(out)["servers"]
    assert row["signed_in"] and row["refreshable"] and row["expires_in"] <= LIFETIME
    assert token not in out

    code, out, _ = await _cli("auth", "logout", "remote", "--config", config)
    assert code == 0 and out.strip() == "remote: signed out"
    assert "remote" not in json.loads((tmp_path / "tokens.json").read_text())["servers"]

    code, _, err = await _cli("auth", "login", "elsewhere", "--config", config)
    assert code == 2 and "no server 'elsewhere'" in err


@pytest.mark.parametrize(
    ("oauth", "message"),
    [
        ({"grant": "client_credentials"}, "grant 'client_credentials' needs 'client_id'"),
        (
            {"grant": "client_credentials", "client_id": "a"},
            "needs 'client_secret' or 'private_key_pem'",
        ),
        ({"private_key_pem": "k"}, "'private_key_pem' works with grant = 'client_credentials'"),
        ({"client_secret": "s3cret!"}, "'client_secret' needs the 'client_id'"),
        ({"grant": "password"}, "servers.s.oauth.grant"),
    ],
)
def test_an_oauth_table_that_cannot_work_is_refused_in_one_line(
    oauth: dict[str, Any], message: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_config({"servers": {"s": {"url": "http://x/mcp", "oauth": oauth}}}, base_dir=Path())
    assert message in str(caught.value)
    assert "s3cret!" not in str(caught.value)


def test_oauth_is_refused_on_a_stdio_server() -> None:
    with pytest.raises(ConfigError, match="'oauth' works with 'url' servers"):
        parse_config({"servers": {"s": {"command": "x", "oauth": {}}}}, base_dir=Path())
