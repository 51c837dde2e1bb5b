"""``install --import`` from a project's file (a cloned repository's ``.mcp.json``) moves its
servers behind the broker only once a person agreed, each shown with the full command the
broker would run; ``check`` says which of them it starts before it starts them. The servers
file holding their env and headers is private, and named when it sits in a git working tree."""

from __future__ import annotations

import json
import shlex
import stat
import subprocess
import sys
from pathlib import Path

from tests.support.broker_procs import BROKER, server_env

CONFIG = "[search]\nsemantic = false\n"


def _broker(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``context-broker ARGS`` in ``cwd`` with ``cwd/home`` as the home folder, no terminal."""
    env = server_env() | {"HOME": str(cwd / "home")}
    return subprocess.run(
        [BROKER, *args],
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def _cloned_project(folder: Path) -> tuple[Path, Path, list[str]]:
    """A project whose ``.mcp.json`` starts a server that leaves a marker file; the marker's
    path and the server's full command line."""
    (folder / "home").mkdir()
    marker = folder / "it-ran"
    command = [sys.executable, "-c", f"open({str(marker)!r}, 'w').close()"]
    entry = {"type": "stdio", "command": command[0], "args": command[1:]}
    host = folder / ".mcp.json"
    host.write_text(json.dumps({"mcpServers": {"helper": entry}}), encoding="utf-8")
    (folder / "broker.toml").write_text(CONFIG, encoding="utf-8")
    return host, marker, command


def test_a_projects_servers_are_shown_and_not_moved_without_agreement(tmp_path: Path) -> None:
    host, marker, command = _cloned_project(tmp_path)
    before = host.read_text(encoding="utf-8")

    done = _broker(
        tmp_path, "install", "--client", "claude-code", "--scope", "project",
        "--config", "broker.toml", "--import",
    )  # fmt: skip

    assert done.returncode == 2, done.stdout + done.stderr
    assert f"  helper: {shlex.join(command)}" in done.stderr
    assert "--yes" in done.stderr and "nothing was written" in done.stderr
    assert host.read_text(encoding="utf-8") == before
    assert sorted(p.name for p in tmp_path.iterdir()) == [".mcp.json", "broker.toml", "home"]
    assert not marker.exists()


def test_with_yes_they_move_shown_and_check_says_what_it_starts_first(tmp_path: Path) -> None:
    _host, marker, command = _cloned_project(tmp_path)

    done = _broker(
        tmp_path, "install", "--client", "claude-code", "--scope", "project",
        "--config", "broker.toml", "--import", "--yes",
    )  # fmt: skip

    assert done.returncode == 0, done.stderr
    assert f"  helper: {shlex.join(command)}" in done.stdout
    next_line = next(x for x in done.stdout.splitlines() if x.startswith("next: "))
    assert "(it starts the servers above)" in next_line
    assert not marker.exists()  # installing runs nothing

    checked = _broker(tmp_path, "check", "--config", "broker.toml")
    first = checked.stderr.splitlines()[0]
    assert first.startswith(f"check: starting helper: {shlex.join(command)}"), checked.stderr
    assert "(imported from mcp-servers.json)" in first
    assert marker.exists()


def test_vs_codes_project_file_asks_too(tmp_path: Path) -> None:
    (tmp_path / "home").mkdir()
    (tmp_path / ".vscode").mkdir()
    entry = {"type": "stdio", "command": sys.executable, "args": ["-V"]}
    host = tmp_path / ".vscode" / "mcp.json"
    host.write_text(json.dumps({"servers": {"helper": entry}}), encoding="utf-8")
    done = _broker(tmp_path, "install", "--client", "vscode", "--config", "b.toml", "--import")
    assert done.returncode == 2 and f"helper: {sys.executable} -V" in done.stderr
    assert not (tmp_path / "b.toml").exists()


def test_the_servers_file_is_private_whatever_it_was(tmp_path: Path) -> None:
    (tmp_path / "home" / ".cursor").mkdir(parents=True)
    secret = {"command": sys.executable, "args": ["-V"], "env": {"API_KEY": "sk-live-12345"}}
    (tmp_path / "home" / ".cursor" / "mcp.json").write_text(
        json.dumps({"mcpServers": {"paid": secret}}), encoding="utf-8"
    )
    (tmp_path / "broker.toml").write_text(CONFIG, encoding="utf-8")
    servers = tmp_path / "mcp-servers.json"
    servers.write_text('{"mcpServers": {}}', encoding="utf-8")
    servers.chmod(0o644)

    done = _broker(tmp_path, "install", "--client", "cursor", "--config", "broker.toml", "--import")

    assert done.returncode == 0, done.stderr
    assert "sk-live" in servers.read_text(encoding="utf-8")
    assert stat.S_IMODE(servers.stat().st_mode) == 0o600
    [backup] = tmp_path.glob("mcp-servers.json.*.bak")
    assert stat.S_IMODE(backup.stat().st_mode) == 0o600
    assert "sk-live" not in done.stdout + done.stderr
    assert "  paid: " in done.stdout and "(env API_KEY)" in done.stdout


def _git(cwd: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, timeout=60)


def test_a_servers_file_in_a_git_working_tree_is_named_unless_ignored(tmp_path: Path) -> None:
    (tmp_path / "home" / ".cursor").mkdir(parents=True)
    cursor = tmp_path / "home" / ".cursor" / "mcp.json"
    repo = tmp_path / "repo"
    (repo / "config").mkdir(parents=True)
    _git(repo, "init", "-q")
    entry = {"command": sys.executable, "args": ["-V"], "env": {"TOKEN": "t0ken-value"}}
    cursor.write_text(json.dumps({"mcpServers": {"one": entry}}), encoding="utf-8")
    args = ("install", "--client", "cursor", "--config", "repo/config/broker.toml", "--import")

    dry = _broker(tmp_path, *args, "--dry-run")
    done = _broker(tmp_path, *args)

    warning = (
        f"warning: {repo / 'config' / 'mcp-servers.json'} holds the moved servers' env and "
        f"headers and is in the git working tree {repo}, not ignored there"
    )
    assert warning in dry.stderr and warning in done.stdout, done.stdout

    (repo / ".gitignore").write_text("mcp-servers.json\n", encoding="utf-8")
    entry2 = {"command": sys.executable, "args": ["-VV"]}
    cursor.write_text(json.dumps({"mcpServers": {"two": entry2}}), encoding="utf-8")
    again = _broker(tmp_path, *args)
    assert again.returncode == 0, again.stderr
    assert "warning:" not in again.stdout


def test_in_a_terminal_it_asks_and_moves_them_on_yes(tmp_path: Path) -> None:
    import os
    import pty

    host, marker, command = _cloned_project(tmp_path)
    leader, follower = pty.openpty()
    os.write(leader, b"y\n")  # the answer, waiting in the terminal's input
    try:
        done = subprocess.run(
            [BROKER, "install", "--client", "claude-code", "--scope", "project",
             "--config", "broker.toml", "--import"],
            cwd=tmp_path, env=server_env() | {"HOME": str(tmp_path / "home")}, stdin=follower,
            capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip
    finally:
        os.close(follower)
        os.close(leader)
    assert done.returncode == 0, done.stderr
    assert f"  helper: {shlex.join(command)}" in done.stderr  # shown before the question
    assert "move them behind the broker, which will start them? [y/N]" in done.stdout
    assert list(json.loads(host.read_text(encoding="utf-8"))["mcpServers"]) == ["context-broker"]
    assert not marker.exists()


def test_a_path_inside_the_project_asks_too(tmp_path: Path) -> None:
    _host, marker, command = _cloned_project(tmp_path)
    args = ("install", "--client", "generic", "--path", ".mcp.json", "--config", "broker.toml")
    refused = _broker(tmp_path, *args, "--import")
    assert refused.returncode == 2 and f"helper: {shlex.join(command)}" in refused.stderr
    assert not (tmp_path / "mcp-servers.json").exists()
    assert _broker(tmp_path, *args, "--import", "--yes").returncode == 0
    assert not marker.exists()
