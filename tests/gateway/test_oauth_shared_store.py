"""OAuth tokens in the shared session store: brokers on one store sign in, refresh and sign out
together, through ``context-broker serve`` and the ``auth`` command.

The downstream is tests/gateway/fixtures/oauth_downstream.py; the stores are the embedded
PostgreSQL and Redis servers of tests/store/servers.py, and a SQLite file.
"""

from __future__ import annotations

import itertools
import json
import os
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx
import psycopg
import pytest
import redis
from gateway_env import oauth_downstream_server
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

from tests.conformance.client_driver import BROKER, BROWSER, downstream_tools, drive, write_config
from tests.store.servers import PostgresServer, RedisServer, running_postgres, running_redis

LIFETIME = 10.0  # seconds an access token lives: two calls in a row fit, even on a busy machine
NO_BROWSER = "false"  # a BROWSER that opens nothing: only stored tokens can sign in
_schemas = itertools.count()


@pytest.fixture(scope="module")
def postgres() -> Iterator[PostgresServer]:
    with running_postgres() as server:
        yield server


@pytest.fixture(scope="module")
def redis_server() -> Iterator[RedisServer]:
    with running_redis() as server:
        yield server


@pytest.fixture
async def oauth_downstream() -> AsyncIterator[str]:
    async with oauth_downstream_server(LIFETIME) as base:
        yield base


class SharedStore:
    """One store as the brokers' ``[persistence]`` table sees it, and a direct look into it."""

    def __init__(self, backend: str, location: str, extra: str = "") -> None:
        self.backend, self.location, self.extra = backend, location, extra

    def persistence(self) -> str:
        key = "path" if self.backend == "sqlite" else "url"
        return f'backend = "{self.backend}"\n{key} = {json.dumps(self.location)}\n'

    def entry(self) -> dict[str, Any] | None:
        """The stored entry of server ``remote``, read straight from the store."""
        if self.backend == "redis":
            with redis.Redis.from_url(self.location) as client:
                raw = client.hget("cb:oauth", "remote")
        elif self.backend == "postgres":
            with psycopg.connect(self.location) as conn:
                row = conn.execute("SELECT entry FROM gateway_tokens WHERE server = 'remote'")
                found = row.fetchone()
                raw = None if found is None else found[0]
        else:
            import sqlite3

            with sqlite3.connect(self.location) as conn:
                found = conn.execute("SELECT entry FROM gateway_tokens WHERE server = 'remote'")
                first = found.fetchone()
                raw = None if first is None else first[0]
        return None if raw is None else json.loads(raw)

    def log(self) -> str:
        """The store server's log so far ('' for SQLite, which has none)."""
        if self.backend == "redis":
            with redis.Redis.from_url(self.location) as client:
                folder = client.config_get("dir")["dir"]
                name = client.config_get("logfile")["logfile"]
            return (Path(folder) / name).read_text(errors="replace")
        if self.backend == "postgres":
            with psycopg.connect(self.location) as conn:
                row = conn.execute("SHOW data_directory").fetchone()
            assert row is not None
            return (Path(row[0]).parent / "server.log").read_text(errors="replace")
        return ""


@pytest.fixture(params=["sqlite", "postgres", "redis"])
def shared(request: pytest.FixtureRequest, tmp_path: Path) -> SharedStore:
    if request.param == "postgres":
        server: PostgresServer = request.getfixturevalue("postgres")
        return SharedStore("postgres", server.create_schema(f"tokens_{next(_schemas)}"))
    if request.param == "redis":
        rserver: RedisServer = request.getfixturevalue("redis_server")
        rserver.flush()
        return SharedStore("redis", rserver.url())
    return SharedStore("sqlite", str(tmp_path / "sessions.sqlite3"))


def _replica(folder: Path, url: str, store: SharedStore) -> Path:
    """A broker config in ``folder`` on ``store``; SQLite keeps tokens in its file only when
    told (``token_store = "store"``), PostgreSQL and Redis by default."""
    folder.mkdir()
    config = write_config(folder, url, {})
    text = config.read_text().replace('backend = "memory"\n', store.persistence(), 1)
    if store.backend == "sqlite":
        text = text.replace("[gateway]\n", '[gateway]\ntoken_store = "store"\n', 1)
    config.write_text(text)
    return config


def _grants(base: str) -> dict[str, Any]:
    counts: dict[str, Any] = httpx.get(f"{base}/grants").json()
    return counts


async def _cli(*args: str) -> tuple[int, str, str]:
    env = {**os.environ, "BROWSER": NO_BROWSER}
    with anyio.fail_after(60):
        done = await anyio.run_process([BROKER, *args], env=env, check=False)
    return done.returncode, done.stdout.decode(), done.stderr.decode()


async def test_a_sign_in_on_one_broker_serves_every_broker_on_the_store_until_logout(
    oauth_downstream: str, shared: SharedStore, tmp_path: Path
) -> None:
    url = f"{oauth_downstream}/mcp"
    first, second = _replica(tmp_path / "a", url, shared), _replica(tmp_path / "b", url, shared)
    with anyio.fail_after(60):
        assert await drive(first) == ["remote__echo: hello"]  # a person signs in here
        assert await drive(second, browser=NO_BROWSER) == ["remote__echo: hello"]
    assert _grants(oauth_downstream).get("authorization_code") == 1
    assert not (tmp_path / "a" / "tokens.json").exists()
    assert not (tmp_path / "b" / "tokens.json").exists()
    entry = shared.entry()
    assert entry is not None and entry["url"] == url
    secrets = [entry["tokens"]["access_token"], entry["tokens"]["refresh_token"]]

    code, out, err = await _cli("auth", "status", "--config", str(second), "--json")
    (row,) = json.loads(out)["servers"]
    assert code == 0 and row["signed_in"] and row["refreshable"], err
    code, check_out, check_err = await _cli("check", "--config", str(second), "--json")
    (server,) = json.loads(check_out)["servers"]
    assert server["state"] == "connected", check_err  # the stored token, no browser
    shown = out + err + check_out + check_err + shared.log()
    assert not [secret for secret in secrets if secret in shown]

    code, out, _ = await _cli("auth", "logout", "remote", "--config", str(first))
    assert code == 0 and out.strip() == "remote: signed out"
    assert shared.entry() is None
    code, out, _ = await _cli("auth", "status", "--config", str(second))
    assert code == 0 and "remote: authorization_code: not signed in" in out


@asynccontextmanager
async def _serving(config: Path, browser: str) -> AsyncIterator[ClientSession]:
    """``context-broker serve`` on ``config``, once the downstream's tools arrived."""
    env = {**os.environ, "BROWSER": browser}
    params = StdioServerParameters(command=BROKER, args=["serve", "--config", str(config)], env=env)
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        await downstream_tools(session, [anyio.Event()])
        yield session


async def _echo(session: ClientSession) -> str:
    result = await session.call_tool("remote__echo", {"text": "hi"})
    assert not result.is_error, result
    text: str = result.content[0].text  # type: ignore[union-attr]
    return text


async def test_a_token_one_broker_refreshed_is_used_by_the_other_without_a_refresh(
    oauth_downstream: str, shared: SharedStore, tmp_path: Path
) -> None:
    url = f"{oauth_downstream}/mcp"
    first, second = _replica(tmp_path / "a", url, shared), _replica(tmp_path / "b", url, shared)
    with anyio.fail_after(90):
        async with _serving(first, BROWSER) as a, _serving(second, NO_BROWSER) as b:
            entry = shared.entry()
            assert entry is not None
            # Both hold the same token; wait out its lifetime (the condition under test is time).
            await anyio.sleep(max(0.0, entry["expires_at"] - time.time()) + 0.3)
            assert await _echo(a) == "hi"  # refreshes, and stores the new token
            refreshed = shared.entry()
            assert await _echo(b) == "hi"  # re-reads the store instead of refreshing again
            assert shared.entry() == refreshed  # b stored nothing of its own
    grants = _grants(oauth_downstream)
    assert grants.get("authorization_code") == 1, grants
    assert grants.get("refresh_token") == 1, grants


@pytest.mark.parametrize(
    ("gateway", "message"),
    [
        ('token_store = "store"', 'gateway.token_store = "store" needs a [persistence] backend'),
        ('token_store = "vault"', "gateway.token_store"),
    ],
)
async def test_a_token_store_that_cannot_work_is_refused_in_one_line(
    tmp_path: Path, gateway: str, message: str
) -> None:
    config = write_config(tmp_path, "http://127.0.0.1:9/mcp", {})
    config.write_text(config.read_text().replace("[gateway]\n", f"[gateway]\n{gateway}\n", 1))
    code, _, err = await _cli("auth", "status", "--config", str(config))
    assert code == 2 and message in err, err
