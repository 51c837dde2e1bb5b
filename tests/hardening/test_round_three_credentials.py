"""Credentials go only where they belong (issue 34, findings 2, 10 and 11 and what was also
noted about ``repair``, registered client secrets and the default token file), through the
real ``context-broker`` command, with authorization servers over real HTTP:
fixtures/oauth_split.py (authorization servers on ports of their own, one of them a stranger)
and tests/gateway/fixtures/oauth_downstream.py (an MCP server with its own)."""

from __future__ import annotations

import json
import os
import pty
import sqlite3
import stat
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx
from context_broker.server.host.mcp_server import build_server
from context_broker.server.parts import build_parts
from context_broker.server.settings import load_config
from context_broker.server.stores import build_store
from mcp import Client

from contextcore.config import HistoryConfig
from contextcore.services.history import HistoryService
from tests.conformance.client_driver import BROWSER
from tests.gateway.gateway_env import free_port, oauth_downstream_server
from tests.support.broker_procs import BROKER, running_until, server_env, write_config
from tests.support.hash_embedder import HashEmbedder
from tests.support.mcp_calls import call

FIXTURES = Path(__file__).parent / "fixtures"
SECRET = "broker-prod-secret-5f1c"
STORE = 'token_store = "store"'

CONFIG = """
[search]
semantic = false

[persistence]
{persistence}

[gateway]
pin_file = "pins.json"
startup_budget = 0
{gateway}

[servers.remote]
url = {url}
include = "always"
trust = "auto"
timeout = 20

[servers.remote.oauth]
{oauth}
"""


def _config(
    folder: Path,
    url: str,
    oauth: dict[str, Any],
    *,
    persistence: str = 'backend = "memory"',
    gateway: str = 'token_file = "tokens.json"',
) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    table = "".join(f"{key} = {json.dumps(value)}\n" for key, value in oauth.items())
    text = CONFIG.format(persistence=persistence, gateway=gateway, url=json.dumps(url), oauth=table)
    path = folder / "broker.toml"
    path.write_text(text, encoding="utf-8")
    return path


async def _cli(
    *args: str, state: Path, browser: str = "false", stdin: Any = subprocess.DEVNULL
) -> tuple[int, str, str]:
    """Run ``context-broker ARGS`` with its state folder at ``state`` (never the real one)."""
    env = {**server_env(), "BROWSER": browser, "XDG_STATE_HOME": str(state)}
    with anyio.fail_after(90):
        done = await anyio.run_process([BROKER, *args], env=env, stdin=stdin, check=False)
    return done.returncode, done.stdout.decode(), done.stderr.decode()


def _private(path: Path) -> bool:
    return stat.S_IMODE(path.stat().st_mode) & 0o077 == 0


@asynccontextmanager
async def _split(advertise: str, mode: str = "ok") -> AsyncIterator[dict[str, Any]]:
    """fixtures/oauth_split.py running; yields its URLs and a function reading its log."""
    ports = [free_port() for _ in range(3)]
    cmd = [sys.executable, str(FIXTURES / "oauth_split.py"), *map(str, ports), advertise, mode]
    async with running_until(cmd, "oauth-split ready", what="oauth_split.py"):
        mcp = f"http://127.0.0.1:{ports[0]}"

        def log() -> dict[str, list[dict[str, Any]]]:
            found: dict[str, list[dict[str, Any]]] = httpx.get(f"{mcp}/log").json()
            return found

        yield {
            "url": f"{mcp}/mcp",
            "own": f"http://127.0.0.1:{ports[1]}",
            "foreign": f"http://127.0.0.1:{ports[2]}",
            "log": log,
        }


@asynccontextmanager
async def _downstream() -> AsyncIterator[str]:
    async with oauth_downstream_server(60.0) as base:
        yield f"{base}/mcp"


# -- finding 2: a client secret or key needs the issuer it belongs to ---------------------------


async def test_check_names_every_server_whose_secret_or_key_has_no_issuer(tmp_path: Path) -> None:
    config = _config(
        tmp_path,
        "http://127.0.0.1:9/mcp",
        {"grant": "client_credentials", "client_id": "broker-prod", "client_secret": SECRET},
    )
    config.write_text(
        config.read_text()
        + '\n[servers.web]\nurl = "http://127.0.0.1:9/web"\n[servers.web.oauth]\n'
        + f'client_id = "web-app"\nclient_secret = "{SECRET}"\n'
        + '\n[servers.signer]\nurl = "http://127.0.0.1:9/signer"\n[servers.signer.oauth]\n'
        + 'grant = "client_credentials"\nclient_id = "svc"\nprivate_key_pem = "---"\n'
        + '\n[servers.named]\nurl = "http://127.0.0.1:9/named"\n[servers.named.oauth]\n'
        + 'grant = "client_credentials"\nclient_id = "svc"\nclient_secret = "x-secret"\n'
        + 'issuer = "https://auth.example.com"\n'
    )
    code, out, err = await _cli("check", "--config", str(config), state=tmp_path / "state")
    assert code == 1, out + err
    assert "INVALID" in out
    assert "servers.remote.oauth: Value error, 'client_secret' needs 'issuer'" in out
    assert "servers.web.oauth: Value error, 'client_secret' needs 'issuer'" in out
    assert "servers.signer.oauth: Value error, 'private_key_pem' needs 'issuer'" in out
    assert "servers.named" not in out
    assert SECRET not in out + err


async def test_credentials_reach_no_authorization_server_but_the_configured_issuer(
    tmp_path: Path,
) -> None:
    # The machine grant: the stranger is advertised first, the secret still goes to its issuer.
    async with _split("foreign,own") as split:
        oauth = {
            "grant": "client_credentials",
            "client_id": "broker-prod",
            "client_secret": SECRET,
            "issuer": split["own"],
        }
        config = _config(tmp_path / "machine", split["url"], oauth)
        code, out, err = await _cli(
            "auth", "login", "remote", "--config", str(config), state=tmp_path / "state"
        )
        assert code == 0 and "signed in" in out, out + err
        log = split["log"]()
        assert log["foreign"] == [], log["foreign"]
        assert any(r["path"] == "/token" for r in log["own"])

    # A person's sign-in with a pre-registered secret: only the stranger is advertised.
    async with _split("foreign") as split:
        oauth = {"client_id": "web-app", "client_secret": SECRET, "issuer": split["own"]}
        config = _config(tmp_path / "person", split["url"], oauth)
        code, out, err = await _cli(
            "auth", "login", "remote", "--config", str(config), state=tmp_path / "state",
            browser=BROWSER,
        )  # fmt: skip
        assert code != 0, out + err
        assert f"not to its configured issuer {split['own']!r}" in err
        log = split["log"]()
        assert log["foreign"] == [], log["foreign"]  # no registration, sign-in or token request
        assert SECRET not in json.dumps(log) + out + err


# -- finding 10 and item 8: token files are private, and not beside the config ----------------


async def test_auth_login_into_a_sqlite_store_leaves_it_and_its_companions_private(
    tmp_path: Path,
) -> None:
    sqlite = 'backend = "sqlite"\npath = "sessions.sqlite3"'
    async with _downstream() as url:
        fresh = _config(tmp_path / "fresh", url, {}, persistence=sqlite, gateway=STORE)
        code, out, err = await _cli(
            "auth", "login", "remote", "--config", str(fresh), state=tmp_path / "state",
            browser=BROWSER,
        )  # fmt: skip
        assert code == 0, out + err
        assert _private(tmp_path / "fresh" / "sessions.sqlite3")

        # A store another program left readable, open in WAL mode while the sign-in writes.
        config = _config(tmp_path / "shared", url, {}, persistence=sqlite, gateway=STORE)
        path = tmp_path / "shared" / "sessions.sqlite3"
        holder = sqlite3.connect(path)
        try:
            holder.execute("PRAGMA journal_mode=WAL")
            holder.execute("CREATE TABLE other (x)")
            holder.execute("INSERT INTO other VALUES (1)")
            holder.commit()
            files = [path, Path(f"{path}-wal"), Path(f"{path}-shm")]
            for file in files:
                os.chmod(file, 0o644)
            code, out, err = await _cli(
                "auth", "login", "remote", "--config", str(config), state=tmp_path / "state",
                browser=BROWSER,
            )  # fmt: skip
            assert code == 0, out + err
            assert [f.name for f in files if not _private(f)] == []
            row = holder.execute("SELECT entry FROM gateway_tokens").fetchone()
            assert "access_token" in row[0]
        finally:
            holder.close()


async def test_tokens_are_kept_in_the_users_state_folder_by_default(tmp_path: Path) -> None:
    project = tmp_path / "project"
    async with _downstream() as url:
        config = _config(project, url, {}, gateway="")
        code, out, err = await _cli(
            "auth", "login", "remote", "--config", str(config), state=tmp_path / "state",
            browser=BROWSER,
        )  # fmt: skip
        assert code == 0, out + err
    tokens = tmp_path / "state" / "context-broker" / "tokens.json"
    assert "remote" in json.loads(tokens.read_text())["servers"]
    assert _private(tokens) and _private(tokens.parent)
    assert sorted(p.name for p in project.iterdir()) == ["broker.toml"]


async def test_a_client_secret_from_dynamic_registration_is_masked(tmp_path: Path) -> None:
    async with _split("own", mode="quote-secret") as split:
        config = _config(tmp_path, split["url"], {})
        code, out, err = await _cli(
            "auth", "login", "remote", "--config", str(config), state=tmp_path / "state",
            browser=BROWSER,
        )  # fmt: skip
        log = split["log"]()
    (registered,) = [r["form"]["client_secret"] for r in log["own"] if r["path"] == "/token"]
    assert registered.startswith("dcr-secret-")
    assert code != 0, out + err
    assert "client secret *** expired" in err
    assert registered not in out + err


# -- finding 11: only the sign-in's own redirect ends it --------------------------------------


async def test_a_sign_in_outlasts_local_connections_and_callbacks_without_its_state(
    tmp_path: Path,
) -> None:
    meddler = f"{sys.executable} {FIXTURES / 'meddling_browser.py'} %s"
    async with _downstream() as url:
        config = _config(tmp_path, url, {})
        code, out, err = await _cli(
            "auth", "login", "remote", "--config", str(config), state=tmp_path / "state",
            browser=meddler,
        )  # fmt: skip
    assert code == 0, out + err
    assert out.strip() == "remote: signed in; 1 tool(s) listed"


# -- also noted: repair asks before it removes ------------------------------------------------


async def _damaged_store(folder: Path) -> Path:
    config_path = write_config(folder, backend="sqlite")
    config = load_config(config_path)
    store = build_store(config)
    try:
        parts = build_parts(config, embedder=HashEmbedder(), store=store)
        service = HistoryService(parts.broker, HistoryConfig())
        async with Client(build_server(parts.broker, history=service)) as client:
            sid = (await call(client, "create_session"))["session_id"]
            messages = [{"role": "user", "content": f"message {i}"} for i in range(3)]
            await call(client, "append_messages", session_id=sid, messages=messages)
    finally:
        store.close()
    with sqlite3.connect(folder / "sessions.sqlite3") as db:
        db.execute('UPDATE messages SET raw = \'{"role": "us\' WHERE seq = 1')
    return config_path


def _damaged(config_path: Path) -> int:
    store = build_store(load_config(config_path))
    try:
        return len(store.damaged_records())
    finally:
        store.close()


def _at_a_terminal(config: Path, answer: bytes) -> subprocess.CompletedProcess[bytes]:
    """``repair`` with a terminal as stdin, answering ``answer`` to its question."""
    leader, follower = pty.openpty()
    try:
        os.write(leader, answer)
        return subprocess.run(
            [BROKER, "repair", "--config", str(config)],
            stdin=follower,
            capture_output=True,
            env=server_env(),
            timeout=60,
            check=False,
        )
    finally:
        os.close(follower)
        os.close(leader)


async def test_repair_removes_nothing_until_a_person_or_yes_confirms(tmp_path: Path) -> None:
    config = await _damaged_store(tmp_path)
    state = tmp_path / "state"

    code, out, err = await _cli("repair", "--config", str(config), state=state)
    assert code == 1, out + err
    assert "message 1 of session" in out  # shown
    assert "nothing was removed" in out and "--yes" in out
    assert _damaged(config) == 1

    declined = await anyio.to_thread.run_sync(_at_a_terminal, config, b"n\n")
    assert declined.returncode == 0 and b"nothing was removed" in declined.stdout
    assert b"remove these 1 damaged record(s)? [y/N]" in declined.stdout
    assert _damaged(config) == 1

    agreed = await anyio.to_thread.run_sync(_at_a_terminal, config, b"y\n")
    assert agreed.returncode == 0 and b"removed 1 damaged record(s)" in agreed.stdout
    assert _damaged(config) == 0


async def test_repair_with_yes_removes_without_asking(tmp_path: Path) -> None:
    config = await _damaged_store(tmp_path)
    code, out, err = await _cli("repair", "--config", str(config), "--yes", state=tmp_path / "s")
    assert code == 0 and "removed 1 damaged record(s)" in out, out + err
    assert _damaged(config) == 0
