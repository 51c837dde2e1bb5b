"""Every scope a host keeps servers in imports: Claude Code's default (local) scope, the
servers ``claude mcp add`` writes under ``projects["<folder>"]`` of ``~/.claude.json``, moves
behind the broker like any other; with nothing to import, the error says which files were
looked at and what each lists. The ``next:`` and undo lines ``install`` prints run as printed
from a shell without the virtual environment on ``PATH``."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.support.broker_procs import BROKER, server_env

TIME = {"type": "stdio", "command": str(Path(sys.executable).parent / "mcp-server-time")}
BARE_PATH = "/usr/bin:/bin"  # a login shell's, without .venv/bin


def _broker(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = server_env() | {"HOME": str(cwd / "home")}
    return subprocess.run(
        [BROKER, *args], cwd=cwd, env=env, stdin=subprocess.DEVNULL,
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip


def _shell(line: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """One printed line, run by ``sh`` as a person would paste it, without the venv."""
    env = {"PATH": BARE_PATH, "HOME": str(cwd / "home"), "LANG": "C.UTF-8"}
    return subprocess.run(
        ["/bin/sh", "-c", line], cwd=cwd, env=env, capture_output=True, text=True, timeout=120
    )


def _claude_json(folder: Path, project: Path) -> tuple[Path, dict[str, Any]]:
    """``~/.claude.json`` as Claude Code keeps it: settings, a user-scope server, and the
    local-scope servers of ``project``."""
    data = {
        "numStartups": 7,
        "mcpServers": {"everywhere": {"type": "stdio", "command": "/bin/true"}},
        "projects": {
            str(project): {"allowedTools": ["Bash"], "mcpServers": {"time": TIME}},
            "/elsewhere": {"mcpServers": {"other": {"type": "stdio", "command": "/bin/true"}}},
        },
    }
    path = folder / "home" / ".claude.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2), encoding="utf-8")
    return path, data


def test_claude_codes_local_scope_is_imported_by_default(tmp_path: Path) -> None:
    host, data = _claude_json(tmp_path, tmp_path)

    done = _broker(tmp_path, "install", "--client", "claude-code", "--config", "b.toml", "--import")

    assert done.returncode == 0, done.stderr
    assert json.loads((tmp_path / "mcp-servers.json").read_text("utf-8")) == {
        "mcpServers": {"time": TIME}
    }
    after = json.loads(host.read_text(encoding="utf-8"))
    mine = after["projects"][str(tmp_path)]
    assert list(mine["mcpServers"]) == ["context-broker"]
    assert mine["allowedTools"] == ["Bash"] and after["numStartups"] == 7
    assert after["mcpServers"] == data["mcpServers"]
    assert after["projects"]["/elsewhere"] == data["projects"]["/elsewhere"]
    assert f'{host} (projects["{tmp_path}"].mcpServers)' in done.stdout


def test_nothing_to_import_names_each_file_looked_at_and_what_it_lists(tmp_path: Path) -> None:
    _claude_json(tmp_path, tmp_path / "another-project")

    done = _broker(tmp_path, "install", "--client", "claude-code", "--config", "b.toml", "--import")

    assert done.returncode == 2
    error = done.stderr
    assert "does not exist; pass --config" not in error  # the config is not what is missing
    home = tmp_path / "home" / ".claude.json"
    assert (
        f'nothing to import: {home} (projects["{tmp_path}"].mcpServers) lists no servers' in error
    )
    assert f"{tmp_path / '.mcp.json'} does not exist (project scope)" in error
    assert f"{home} lists 1 server: everywhere (user scope; pass --scope user" in error
    assert not (tmp_path / "b.toml").exists()


def test_with_a_config_nothing_to_import_still_says_where_servers_are(tmp_path: Path) -> None:
    _claude_json(tmp_path, tmp_path / "another-project")
    (tmp_path / "b.toml").write_text("[search]\nsemantic = false\n", encoding="utf-8")

    done = _broker(tmp_path, "install", "--client", "claude-code", "--config", "b.toml", "--import")

    assert done.returncode == 0, done.stderr
    home = tmp_path / "home" / ".claude.json"
    assert done.stdout.startswith(f'nothing to import: {home} (projects["{tmp_path}"]'), done.stdout
    hint = "lists 1 server: everywhere (user scope; pass --scope user to import them)"
    assert hint in done.stdout
    assert "added 'context-broker' in " in done.stdout


def test_the_next_and_undo_lines_run_as_printed_without_the_venv_on_path(
    tmp_path: Path,
) -> None:
    host, _ = _claude_json(tmp_path, tmp_path)
    before = host.read_bytes()
    done = _broker(tmp_path, "install", "--client", "claude-code", "--config", "b.toml", "--import")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    next_line = next(x for x in lines if x.startswith("next: "))
    command = next_line.removeprefix("next: ").split(" (it starts", 1)[0]

    checked = _shell(command, tmp_path)

    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "server time [stdio]: connected" in checked.stdout
    assert (tmp_path / "context-broker.pins.json").exists()  # checking pinned the tools

    undo = next(x for x in lines if x.startswith("to undo: ")).removeprefix("to undo: ")
    undone = _shell(undo, tmp_path)

    assert undone.returncode == 0, undone.stderr
    assert host.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["home"]
    assert list(host.parent.glob(".claude.json.*")) == []  # the backup went back in place
