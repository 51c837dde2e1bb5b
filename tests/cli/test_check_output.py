"""``context-broker check`` says each problem once, with its fix: a server that cannot start is
one line with its error and one with how to leave it out, and the log repeats none of it."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from tests.support.broker_procs import BROKER, ROOT, server_env

MISSING = "mcp-server-nowhere-to-be-found"


def _check(config: Path, *more: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [BROKER, "check", "--config", str(config), *more],
        capture_output=True,
        text=True,
        timeout=120,
        env=server_env(),
        cwd=cwd or config.parent,
    )


def test_a_missing_command_is_said_once_in_nine_lines(tmp_path: Path) -> None:
    config = tmp_path / "broker.toml"
    config.write_text(
        f'[search]\nsemantic = false\n\n[servers.ghost]\ncommand = "{MISSING}"\n',
        encoding="utf-8",
    )
    done = _check(config)
    assert done.returncode == 2
    said = done.stdout + done.stderr
    assert done.stderr == "", done.stderr
    assert len(said.splitlines()) <= 9, said
    assert said.count(MISSING) == 1, said
    assert said.count("give its absolute path") == 1, said
    assert said.count("is not on the PATH it runs with") == 1, said
    assert "reconnecting" not in said and "GatewayError" not in said, said
    line = next(x for x in said.splitlines() if x.startswith("server ghost"))
    assert line.startswith("server ghost [stdio]: failed, 0 tools (command "), line
    assert "  or leave it out: set enabled = false in its [servers.ghost] table" in said


def test_an_imported_server_is_left_out_with_a_table_of_its_name(tmp_path: Path) -> None:
    servers = tmp_path / "mcp-servers.json"
    servers.write_text(json.dumps({"mcpServers": {"ghost": {"command": MISSING}}}), "utf-8")
    config = tmp_path / "broker.toml"
    config.write_text(
        'mcp_servers_file = "mcp-servers.json"\n[search]\nsemantic = false\n', encoding="utf-8"
    )
    done = _check(config)
    assert done.returncode == 2, done.stderr
    assert done.stderr == f"check: starting ghost: {MISSING} (imported from mcp-servers.json)\n"
    assert (
        f"  or leave it out: add a [servers.ghost] table with enabled = false to {config}"
        in done.stdout
    ), done.stdout
    config.write_text(config.read_text("utf-8") + "\n[servers.ghost]\nenabled = false\n", "utf-8")
    assert _check(config).returncode == 0


def test_a_healthy_check_ends_with_its_report_and_logs_nothing() -> None:
    done = _check(ROOT / "examples" / "two-servers.toml", cwd=ROOT)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stderr == ""
    assert done.stdout.splitlines()[-1].startswith("persistence: ")


def test_the_log_is_there_when_asked_for(tmp_path: Path) -> None:
    config = tmp_path / "broker.toml"
    config.write_text(f'[servers.ghost]\ncommand = "{MISSING}"\n', encoding="utf-8")
    done = _check(config, "--log-level", "INFO")
    assert "downstream 'ghost'" in done.stderr


def test_where_things_are_is_shown_and_secrets_are_masked(tmp_path: Path) -> None:
    """``${env:HOME}`` says where things are: the error shows it; a token stays ``***``."""
    home = tmp_path / "someone"
    config = tmp_path / "broker.toml"
    config.write_text(
        "[search]\nsemantic = false\n\n[servers.notes]\n"
        'command = "${env:HOME}/bin/notes-server"\n'
        'env = { NOTES_FILE = "${env:HOME}/notes.json" }\n\n'
        '[servers.paid]\ncommand = "${env:SERVICE_TOKEN}"\n',
        encoding="utf-8",
    )
    env = server_env() | {"HOME": str(home), "SERVICE_TOKEN": "tok-very-secret-1"}
    done = subprocess.run(
        [BROKER, "check", "--config", str(config)],
        capture_output=True, text=True, timeout=120, env=env, cwd=tmp_path,
    )  # fmt: skip
    said = done.stdout + done.stderr
    assert f"command '{home}/bin/notes-server' does not exist" in said, said
    assert "tok-very-secret" not in said and "command '***' is not on the PATH" in said, said


def test_the_approve_commands_check_and_tools_print_run_as_printed(tmp_path: Path) -> None:
    """A held tool: the approve line of ``check`` and of ``tools status``, run by a shell
    without the venv on PATH, approves it."""
    from tests.docs.test_commands import bare_path
    from tests.hardening.test_poisoned_downstream import ADD, cli, write_config, write_tools

    notes = {"name": "notes", "description": "Keep a note."}
    config = write_config(tmp_path, "pin", write_tools(tmp_path, ADD, notes))
    assert cli("check", "--config", str(config)).returncode == 0  # first listing: pinned
    write_tools(tmp_path, ADD, {**notes, "description": "Keep a note. v2"})
    checked = cli("check", "--config", str(config))
    assert checked.returncode == 3, checked.stdout
    status = cli("tools", "status", "--config", str(config)).stdout
    [from_check] = [x for x in checked.stdout.splitlines() if x.startswith("    approve: ")]
    [from_status] = [x for x in status.splitlines() if x.startswith("    approve: ")]
    assert from_check == from_status and from_check.startswith(f"    approve: {BROKER} tools ")

    env = {"PATH": bare_path(), "HOME": str(tmp_path), "LANG": "C.UTF-8"}
    line = from_check.removeprefix("    approve: ")
    approved = subprocess.run(
        ["/bin/sh", "-c", line], capture_output=True, text=True, timeout=60, env=env
    )
    assert approved.returncode == 0, approved.stderr
    assert cli("check", "--config", str(config)).returncode == 0
