"""Credentials written into an address never reach a person's screen or a log: a store's
``[persistence] url`` (URL or libpq key=value) and a downstream server's URL
(``user:pass@``, ``?api_key=``), through the real ``context-broker`` command."""

from __future__ import annotations

import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from tests.support.broker_procs import BROKER, server_env

PASSWORD = "hunter2-pq-5e1d"
API_KEY = "apikey-77aa-31c9"
USER_PASSWORD = "tigerpass-0b8e"

# Answers every request with 401, so the MCP client logs and reports the URL it used.
REFUSING_SERVER = """
import http.server, sys
class Refuse(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        self.send_response(401)
        self.send_header("content-length", "0")
        self.end_headers()
    do_GET = do_DELETE = do_POST
    def log_message(self, *args):
        pass
server = http.server.HTTPServer(("127.0.0.1", 0), Refuse)
print(server.server_port, flush=True)
server.serve_forever()
"""


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def refusing_url() -> Iterator[str]:
    """A downstream URL with credentials in it, on a server that refuses every request."""
    proc = subprocess.Popen(
        [sys.executable, "-c", REFUSING_SERVER], stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None
        port = int(proc.stdout.readline())
        yield f"http://scott:{USER_PASSWORD}@127.0.0.1:{port}/mcp?api_key={API_KEY}&region=eu"
    finally:
        proc.kill()
        proc.wait()
        assert proc.stdout is not None
        proc.stdout.close()


async def _run(*args: str) -> tuple[int, str]:
    """``context-broker ARGS``: exit code and stdout + stderr together."""
    with anyio.fail_after(90):
        done = await anyio.run_process([BROKER, *args], env=server_env(), check=False)
    return done.returncode, done.stdout.decode() + done.stderr.decode()


def _config(folder: Path, body: str) -> Path:
    path = folder / "broker.toml"
    path.write_text(f"[search]\nsemantic = false\n{body}\n", encoding="utf-8")
    return path


KEY_VALUE = (
    "host=127.0.0.1 port={port} user=broker password={password} dbname=broker connect_timeout=2"
)
QUOTED = "host=127.0.0.1 port={port} user=broker password='{password} x' connect_timeout=2"
URL = "postgresql://broker:{password}@127.0.0.1:{port}/broker?connect_timeout=2"


@pytest.mark.parametrize(
    ("address", "command"),
    [
        (KEY_VALUE, "check"),
        (KEY_VALUE, "check-json"),
        (KEY_VALUE, "serve"),
        (QUOTED, "check"),
        (URL, "check"),
    ],
    ids=["key-value-check", "key-value-check-json", "key-value-serve", "quoted-check", "url-check"],
)
async def test_a_store_password_is_never_shown(tmp_path: Path, address: str, command: str) -> None:
    url = address.format(port=_closed_port(), password=PASSWORD)
    config = _config(tmp_path, f'[persistence]\nbackend = "postgres"\nurl = "{url}"\n')
    args = {
        "check": ["check", "--config", str(config)],
        "check-json": ["check", "--json", "--config", str(config)],
        "serve": ["serve", "--config", str(config), "--log-level", "DEBUG"],
    }[command]
    code, output = await _run(*args)
    assert code != 0 and "127.0.0.1" in output, output  # the store's failure is reported
    assert PASSWORD not in output, output


async def test_credentials_in_a_downstream_url_are_masked_in_check_and_the_log(
    tmp_path: Path, refusing_url: str
) -> None:
    config = _config(tmp_path, f'[servers.remote]\nurl = "{refusing_url}"\n')
    code, output = await _run("check", "--log-level", "INFO", "--config", str(config))
    assert code == 2, output  # the server refused: not connected
    assert "POST http://" in output and "region=eu" in output, output  # the URL was logged
    assert API_KEY not in output and USER_PASSWORD not in output, output
