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
