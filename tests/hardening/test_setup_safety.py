"""A setup that cannot run away: the broker never starts itself from a host's servers file,
broker chains stop after one level, downstream process groups die with the broker (even by
SIGKILL), a corrupt embedding cache is rebuilt, idle HTTP sessions expire, a public bind needs
protection, and config errors never echo secrets. Everything runs ``context-broker`` as a real
subprocess and inspects real processes (Linux ``/proc``)."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import anyio.abc
import httpx2
import pytest
from anyio.streams.text import TextReceiveStream
from mcp import ClientSession, StdioServerParameters, stdio_client

from tests.support.broker_procs import BROKER, running_broker, server_env
from tests.support.handshake import INITIALIZE
from tests.support.polling import eventually

TIME = str(Path(sys.executable).parent / "mcp-server-time")
DEPTH = "CONTEXT_BROKER_DEPTH"
PING = {"jsonrpc": "2.0", "id": 2, "method": "ping"}
HEADERS = {"content-type": "application/json", "accept": "application/json, text/event-stream"}

# A downstream that never speaks MCP and never reads stdin: it ignores SIGTERM, starts a
# child that does the same, writes both pids to a file, then sleeps. With "--exit-on-eof" it
# exits when its stdin closes, leaving the child behind.
SLEEPER = """
import os, signal, subprocess, sys, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
child = subprocess.Popen([sys.executable, "-c",
    "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(600)"])
with open(sys.argv[1] + ".tmp", "w") as f:
    f.write(f"{os.getpid()} {child.pid}")
os.replace(sys.argv[1] + ".tmp", sys.argv[1])
if "--exit-on-eof" in sys.argv:
    sys.stdin.buffer.read()
    sys.exit(0)
time.sleep(600)
"""

# A real MCP server whose one tool reports the depth marker it was started with.
PROBE = """
import os
from mcp.server.mcpserver import MCPServer

app = MCPServer("probe")

@app.tool()
def depth() -> str:
    return os.environ.get("CONTEXT_BROKER_DEPTH", "unset")

app.run()
"""


# -- processes -----------------------------------------------------------------------------


def _stat(pid: int) -> tuple[str, int] | None:
    """(state, parent pid) of a process, None once it is gone."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return None
    fields = raw[raw.rindex(")") + 2 :].split()
    return fields[0], int(fields[1])


def _alive(pid: int) -> bool:
    stat = _stat(pid)
    return stat is not None and stat[0] != "Z"


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except (FileNotFoundError, ProcessLookupError):
        return ""


def _processes() -> dict[int, int]:
    """pid → parent pid of every live process."""
    out = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and (stat := _stat(int(entry.name))) and stat[0] != "Z":
            out[int(entry.name)] = stat[1]
    return out


def _descendants(root: int) -> list[int]:
    parents = _processes()
    found, frontier = [], [root]
    while frontier:
        pid = frontier.pop()
        children = [c for c, p in parents.items() if p == pid]
        found += children
        frontier += children
    return found


def _watchers_of(server: int) -> list[int]:
    """Live watcher processes of the process group led by ``server``."""
    return [
        pid
        for pid in _processes()
        if (cmd := _cmdline(pid)).startswith("/bin/sh -c read") and cmd.split()[-1] == str(server)
    ]


def _brokers_serving(config: Path) -> list[int]:
    """Live ``context-broker serve`` processes started with this config file."""
    return [
        pid
        for pid in _processes()
        if str(config) in (cmd := _cmdline(pid)) and "context-broker serve" in cmd
    ]


# -- configs -------------------------------------------------------------------------------


def _config(folder: Path, body: str = "", *, top: str = "") -> Path:
    path = folder / "broker.toml"
    path.write_text(f"{top}\n[search]\nsemantic = false\n{body}\n", encoding="utf-8")
    return path


def _self_listing(folder: Path) -> Path:
    """A broker config importing a Claude Desktop file that lists this very broker (as the
    README says to) and mcp-server-time."""
    config = folder / "broker.toml"
    desktop = {
        "mcpServers": {
            "context-broker": {"command": BROKER, "args": ["serve", "--config", str(config)]},
            "time": {"command": TIME, "args": [], "include": "always"},  # listed directly
        }
    }
    (folder / "claude_desktop_config.json").write_text(json.dumps(desktop), encoding="utf-8")
    return _config(folder, top='mcp_servers_file = "claude_desktop_config.json"')


def _sleeper(folder: Path, *flags: str) -> tuple[Path, Path]:
    """A config with the sleeper as its one stdio server; returns (config, pid file)."""
    script = folder / "sleeper.py"
    script.write_text(SLEEPER, encoding="utf-8")
    pids = folder / "pids"
    args = json.dumps([str(script), str(pids), *flags])
    body = f'[servers.sleepy]\ncommand = "{sys.executable}"\nargs = {args}\ntimeout = 120\n'
    return _config(folder, body), pids


async def _check(config: Path, env: dict[str, str] | None = None) -> tuple[int, dict, str]:
    """``context-broker check --json``: (exit code, report, stderr)."""
    with anyio.fail_after(90):
        done = await anyio.run_process(
            [BROKER, "check", "--json", "--config", str(config)],
            env=env or server_env(),
            check=False,
        )
    return done.returncode, json.loads(done.stdout), done.stderr.decode()


def _servers(report: dict) -> dict[str, dict]:
    return {s["name"]: s for s in report["servers"]}


@asynccontextmanager
async def _stdio_broker(config: Path, errlog: Path) -> AsyncIterator[ClientSession]:
    """A host's session with ``context-broker serve`` over stdio; its stderr goes to ``errlog``."""
    params = StdioServerParameters(
        command=BROKER, args=["serve", "--config", str(config)], env=server_env()
    )
    with errlog.open("w") as err:
        async with (
            stdio_client(params, errlog=err) as (read, write),
            ClientSession(read, write) as session,
        ):
            with anyio.fail_after(30):
                await session.initialize()
            yield session


@asynccontextmanager
async def _broker_process(config: Path) -> AsyncIterator[anyio.abc.Process]:
    """``context-broker serve`` over stdio, its stdin held open, stderr kept for failures."""
    proc = await anyio.open_process(
        [BROKER, "serve", "--config", str(config)],
        env=server_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        yield proc
    finally:
        if proc.returncode is None:
            proc.kill()
        with anyio.move_on_after(10):
            await proc.wait()
        await proc.aclose()


def _pids(path: Path) -> list[int]:
    return [int(p) for p in path.read_text().split()]


# -- the broker never starts itself ----------------------------------------------------------


async def test_check_skips_the_broker_listed_in_a_claude_desktop_file_and_starts_the_rest(
    tmp_path: Path,
) -> None:
    config = _self_listing(tmp_path)
    code, report, stderr = await _check(config)
    servers = _servers(report)
    assert code == 0, (report, stderr)
    assert servers["context-broker"]["state"] == "disabled"
    assert servers["time"]["state"] == "connected" and servers["time"]["toolCount"] == 2
    said = " ".join(report["warnings"])  # check reports it; its log repeats nothing
    assert "downstream 'context-broker' skipped: it starts the context broker itself" in said


async def test_serve_with_a_self_listing_file_starts_no_nested_broker(tmp_path: Path) -> None:
    config = _self_listing(tmp_path)
    errlog = tmp_path / "stderr.log"
    async with _stdio_broker(config, errlog) as client:
        with anyio.fail_after(60):
            tools = {t.name for t in (await client.list_tools()).tools}
        assert "time__get_current_time" in tools
        brokers = _brokers_serving(config)
        assert len(brokers) == 1, [_cmdline(pid) for pid in brokers]  # no nested serve
        broker = brokers[0]
        below = [_cmdline(pid) for pid in _descendants(broker)]
        assert any("mcp-server-time" in cmd for cmd in below), below
        assert not any("context-broker" in cmd for cmd in below), below
    assert "downstream 'context-broker' skipped" in errlog.read_text()


async def test_every_stdio_child_gets_the_depth_marker(tmp_path: Path) -> None:
    (tmp_path / "probe.py").write_text(PROBE, encoding="utf-8")
    body = f'[servers.probe]\ncommand = "{sys.executable}"\nargs = ["{tmp_path / "probe.py"}"]\n'
    async with _stdio_broker(_config(tmp_path, body), tmp_path / "stderr.log") as client:
        with anyio.fail_after(60):
            assert "probe__depth" in {t.name for t in (await client.list_tools()).tools}
            result = await client.call_tool("probe__depth", {})
    assert not result.is_error, result.content
    assert result.content[0].text == "1"  # type: ignore[union-attr]


async def test_a_broker_started_by_a_broker_starts_no_downstream_broker(tmp_path: Path) -> None:
    (tmp_path / "inner").mkdir()
    inner = _config(tmp_path / "inner")
    body = (
        f'[servers.inner]\ncommand = "{BROKER}"\nargs = ["serve", "--config", "{inner}"]\n'
        f'[servers.time]\ncommand = "{TIME}"\n'
    )
    outer = _config(tmp_path, body)
    # Chained on purpose by a [servers.*] table: allowed at the top level...
    code, report, _ = await _check(outer)
    assert code == 0 and _servers(report)["inner"]["state"] == "connected", report
    # ...but not by a broker that was itself started by one.
    code, report, stderr = await _check(outer, {**server_env(), DEPTH: "1"})
    servers = _servers(report)
    assert code == 0, report
    assert servers["inner"]["state"] == "disabled"
    assert servers["time"]["state"] == "connected"
    assert "brokers are chained one level at most" in " ".join(report["warnings"]), stderr


async def test_a_broker_two_levels_down_starts_no_downstream_at_all(tmp_path: Path) -> None:
    config = _config(tmp_path, f'[servers.time]\ncommand = "{TIME}"\n')
    code, report, stderr = await _check(config, {**server_env(), DEPTH: "2"})
    assert code == 0 and _servers(report)["time"]["state"] == "disabled", report
    assert f"{DEPTH}=2" in " ".join(report["warnings"]), stderr


# -- downstream processes die with the broker ------------------------------------------------


async def test_sigkill_of_the_broker_kills_a_downstream_that_ignores_stdin(tmp_path: Path) -> None:
    config, pid_file = _sleeper(tmp_path)
    async with _broker_process(config) as broker:
        await eventually(pid_file.exists, within=30, what="the downstream started")
        pids = _pids(pid_file)
        assert all(_alive(pid) for pid in pids)
        broker.send_signal(signal.SIGKILL)
        await eventually(
            lambda: not any(_alive(pid) for pid in pids), within=10, what=f"{pids} gone"
        )
        await eventually(
            lambda: not _watchers_of(pids[0]), within=10, what="the watcher exited too"
        )


async def test_a_normal_stop_leaves_no_watcher_behind(tmp_path: Path) -> None:
    config, pid_file = _sleeper(tmp_path)
    async with _broker_process(config) as broker:
        await eventually(pid_file.exists, within=30, what="the downstream started")
        server = _pids(pid_file)[0]
        assert _watchers_of(server), "each stdio server has a watcher"
        assert broker.stdin is not None
        await broker.stdin.aclose()  # the host goes away: the broker shuts down normally
        with anyio.fail_after(30):
            await broker.wait()
        await eventually(
            lambda: not _alive(server) and not _watchers_of(server), within=10, what="all gone"
        )


async def test_a_normal_stop_kills_what_a_downstream_left_behind(tmp_path: Path) -> None:
    config, pid_file = _sleeper(tmp_path, "--exit-on-eof")
    async with _broker_process(config) as broker:
        await eventually(pid_file.exists, within=30, what="the downstream started")
        pids = _pids(pid_file)
        assert broker.stdin is not None
        await broker.stdin.aclose()  # the host goes away: the broker shuts down normally
        with anyio.fail_after(30):
            await broker.wait()
        await eventually(
            lambda: not any(_alive(pid) for pid in pids), within=10, what=f"{pids} gone"
        )


# -- a corrupt embedding cache ----------------------------------------------------------------


async def test_a_corrupt_embedding_cache_is_rebuilt_with_a_warning(tmp_path: Path) -> None:
    cache = tmp_path / "embeddings.sqlite3"
    cache.write_bytes(b"definitely not a SQLite database\n" * 200)
    config = _config(tmp_path, 'embedding_cache = "embeddings.sqlite3"\n')
    errlog = tmp_path / "stderr.log"
    async with _stdio_broker(config, errlog) as client:
        with anyio.fail_after(30):
            created = await client.call_tool("create_session", {"agent": "t"})
    assert not created.is_error, created.content
    log = errlog.read_text()
    assert f"embedding cache {cache} is unusable" in log and "Traceback" not in log
    assert cache.read_bytes().startswith(b"SQLite format 3")


# -- HTTP ------------------------------------------------------------------------------------


async def test_idle_streamable_http_sessions_expire(tmp_path: Path) -> None:
    config = _config(tmp_path, "[server.http]\nsession_idle_timeout = 0.5\n")
    async with running_broker(config) as (url, _), httpx2.AsyncClient(timeout=10) as http:
        opened = await http.post(f"{url}/mcp", json=INITIALIZE, headers=HEADERS)
        session = {**HEADERS, "mcp-session-id": opened.headers["mcp-session-id"]}
        fresh = await http.post(f"{url}/mcp", json=PING, headers=session)
        await anyio.sleep(2.0)  # the behaviour under test: 4x the idle timeout passes
        stale = await http.post(f"{url}/mcp", json=PING, headers=session)
    assert opened.status_code == 200 and fresh.status_code == 200
    assert stale.status_code == 404


async def _serve_http(config: Path, *flags: str, env: dict[str, str] | None = None) -> str:
    """Start ``serve --transport http`` and return what it logged until it listened or quit."""
    cmd = [BROKER, "serve", "--config", str(config), "--transport", "http", "--port", "0"]
    proc = await anyio.open_process([*cmd, *flags], env=env or server_env())
    log = ""
    try:
        assert proc.stderr is not None
        with anyio.fail_after(60):
            async for chunk in TextReceiveStream(proc.stderr):
                log += chunk
                if re.search(r"listening on http://\S+/mcp", log):
                    return log
        return log + f"\n[exit {await proc.wait()}]"
    finally:
        if proc.returncode is None:
            proc.terminate()
            with anyio.move_on_after(10):
                await proc.wait()
            if proc.returncode is None:
                proc.kill()
        await proc.aclose()


async def test_an_unprotected_public_bind_is_refused_naming_the_ways_out(
    tmp_path: Path,
) -> None:
    log = await _serve_http(_config(tmp_path, '[server.http]\nhost = "0.0.0.0"\n'))
    assert "listening on" not in log and "[exit 1]" in log  # a config error
    assert "refusing to listen on '0.0.0.0'" in log
    for way_out in ("auth_token_env", "--insecure"):
        assert way_out in log


async def test_a_public_bind_starts_with_a_token_or_with_insecure(tmp_path: Path) -> None:
    token = '[server.http]\nhost = "0.0.0.0"\nauth_token_env = "BROKER_TEST_TOKEN"\n'
    env = {**server_env(), "BROKER_TEST_TOKEN": "s3cret-token"}
    assert "listening on" in await _serve_http(_config(tmp_path, token), env=env)
    bare = _config(tmp_path, '[server.http]\nhost = "0.0.0.0"\n')
    assert "listening on" in await _serve_http(bare, "--insecure")


# -- secrets in config errors -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "secret", "shown"),
    [
        ("[server.http]\nauth_token = 987654321\n", "987654321", "value not shown"),
        ('[server.http]\nauth_token = ["hunter2-pw"]\n', "hunter2", "value not shown"),
        (
            '[history.summarizer]\nbase_url = ["https://me:pa55w0rd@llm.example"]\n',
            "pa55w0rd",
            "https://me:***@llm.example",
        ),
    ],
)
async def test_config_errors_never_echo_secret_values(
    tmp_path: Path, body: str, secret: str, shown: str
) -> None:
    code, report, _ = await _check(_config(tmp_path, body))
    assert code == 1 and not report["ok"]
    assert secret not in report["error"] and shown in report["error"], report["error"]
