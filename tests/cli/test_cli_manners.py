"""Small things a person meets in the first hour with ``context-broker``: the version answers
at once, a typo in a setting shows the value, ``serve`` in a terminal says what it waits for."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.support.broker_procs import BROKER, server_env


def test_the_version_is_answered_without_loading_the_broker() -> None:
    probe = (
        "import sys\n"
        "from context_broker.server.cli import main\n"
        "assert main(['--version']) == 0\n"
        "heavy = ('mcp', 'anyio', 'numpy', 'pydantic', 'context_broker.server.gateway')\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in heavy or m.startswith(heavy)))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True
    )
    version, loaded = done.stdout.splitlines()
    assert version.startswith("context-broker ") and version != "context-broker "
    assert loaded == "[]"


def test_the_version_of_the_installed_command_matches_its_parser() -> None:
    fast = subprocess.run([BROKER, "--version"], capture_output=True, text=True, timeout=60)
    slow = subprocess.run(
        [BROKER, "--log-level", "ERROR", "--version"], capture_output=True, text=True, timeout=60
    )
    assert fast.returncode == slow.returncode == 0
    assert fast.stdout == slow.stdout


def test_a_misspelt_choice_shows_the_value_and_the_closest_one(tmp_path: Path) -> None:
    config = tmp_path / "broker.toml"
    config.write_text(
        '[servers.time]\ncommand = "mcp-server-time"\ninclude = "allways"\n'
        'args = ["--token", 12345678]\n',
        encoding="utf-8",
    )
    done = subprocess.run(
        [BROKER, "check", "--config", str(config)],
        capture_output=True, text=True, timeout=60, env=server_env(),
    )  # fmt: skip
    said = done.stdout + done.stderr
    assert done.returncode == 1
    assert (
        "servers.time.include: Input should be 'always', 'manual' or 'agent' (got 'allways'); "
        "did you mean 'always'?"
    ) in said, said
    assert "12345678" not in said and "value not shown: it may be a secret" in said


def test_serve_in_a_terminal_says_it_waits_for_a_host_and_ends_on_ctrl_d(tmp_path: Path) -> None:
    import os
    import pty
    import select
    import time

    config = tmp_path / "broker.toml"
    config.write_text("[search]\nsemantic = false\n", encoding="utf-8")
    leader, follower = pty.openpty()
    proc = subprocess.Popen(
        [BROKER, "serve", "--config", str(config)],
        stdin=follower, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=server_env(),
    )  # fmt: skip
    os.close(follower)
    try:
        assert proc.stderr is not None
        seen = b""
        deadline = time.monotonic() + 60
        while b"waiting for a host" not in seen and time.monotonic() < deadline:
            ready, _, _ = select.select([proc.stderr], [], [], 1)
            if ready:
                seen += os.read(proc.stderr.fileno(), 4096)
        assert b"waiting for a host to speak" in seen, seen
        assert b"Ctrl-D or Ctrl-C ends it" in seen
        os.write(leader, b"\x04")  # Ctrl-D: the end of the input
        assert proc.wait(timeout=60) == 0
    finally:
        os.close(leader)
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
        for pipe in (proc.stdout, proc.stderr):
            if pipe is not None:
                pipe.close()


def test_serve_with_no_input_exits_cleanly(tmp_path: Path) -> None:
    config = tmp_path / "broker.toml"
    config.write_text("[search]\nsemantic = false\n", encoding="utf-8")
    done = subprocess.run(
        [BROKER, "serve", "--config", str(config)],
        stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60, env=server_env(),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr and "waiting for a host" not in done.stderr
