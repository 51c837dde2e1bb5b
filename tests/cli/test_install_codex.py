"""``context-broker install --client codex`` as a person runs it: Codex's ``config.toml`` gets
an ``[mcp_servers.context-broker]`` table (command, args, ``env`` as an inline table), and only
that table changes: the file's comments, other servers and other settings stay as they were;
``--dry-run`` prints the table and writes nothing; a file that is not TOML is refused."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

import anyio

from tests.support.broker_procs import BROKER, server_env

CODEX = """\
# Codex settings
model = "o4-mini"  # the default model
approval_policy = "on-request"

# The clock, from PyPI
[mcp_servers.time]
command = "uvx"  # pinned below
args = ["mcp-server-time==0.6.2"]

[mcp_servers.time.env]
TZ = "Europe/Paris"

# profiles below
[profiles.fast]
model = "gpt-5"
"""


def _config(folder: Path) -> Path:
    path = folder / "broker.toml"
    path.write_text("[search]\nsemantic = false\n", encoding="utf-8")
    return path


async def _install(cwd: Path, *args: str) -> tuple[int, str, str]:
    """``context-broker install --client codex ARGS`` run in ``cwd``, with its own home."""
    env = server_env()
    env["HOME"] = str(cwd / "home")
    env.pop("CODEX_HOME", None)
    with anyio.fail_after(60):
        done = await anyio.run_process(
            [BROKER, "install", "--client", "codex", "--config", "broker.toml", *args],
            cwd=cwd,
            env=env,
            check=False,
        )
    return done.returncode, done.stdout.decode(), done.stderr.decode()


def _read(path: Path) -> dict[str, Any]:
    return tomllib.loads(path.read_text(encoding="utf-8"))


async def test_codexs_user_file_gets_the_brokers_table(tmp_path: Path) -> None:
    _config(tmp_path)
    code, out, err = await _install(tmp_path)
    assert code == 0, err
    target = tmp_path / "home" / ".codex" / "config.toml"
    assert target.read_text(encoding="utf-8") == (
        "[mcp_servers.context-broker]\n"
        f'command = "{BROKER}"\n'
        f'args = ["serve", "--config", "{tmp_path / "broker.toml"}"]\n'
    )
    assert f"added 'context-broker' in {target}" in out and "restart Codex" in out


async def test_comments_other_servers_and_settings_are_kept(tmp_path: Path) -> None:
    _config(tmp_path)
    target = tmp_path / "config.toml"
    target.write_text(CODEX, encoding="utf-8")

    code, out, err = await _install(tmp_path, "--path", "config.toml")

    assert code == 0, err
    after = target.read_text(encoding="utf-8")
    assert after.startswith(CODEX)  # every character of the file, then the broker's table
    assert after[len(CODEX) :].split("\n") == [
        "",
        "[mcp_servers.context-broker]",
        f'command = "{BROKER}"',
        f'args = ["serve", "--config", "{tmp_path / "broker.toml"}"]',
        "",
    ]
    data = _read(target)
    assert data["mcp_servers"]["time"]["env"] == {"TZ": "Europe/Paris"}
    assert data["profiles"] == {"fast": {"model": "gpt-5"}}
    [backup] = tmp_path.glob("config.toml.*.bak")
    assert backup.read_text(encoding="utf-8") == CODEX and str(backup) in out


async def test_env_options_become_an_inline_env_table(tmp_path: Path) -> None:
    _config(tmp_path)
    env = ("--env", "API_KEY=sk-1", "--env", "URL=http://h/?a=b", "--env", "EMPTY=")
    base = ("--path", "config.toml", *env)

    code, out, err = await _install(tmp_path, *base, "--dry-run")
    assert code == 0, err
    assert 'env = {API_KEY = "sk-1", URL = "http://h/?a=b", EMPTY = ""}' in out.splitlines()
    printed = tomllib.loads(out)["mcp_servers"]["context-broker"]
    assert "nothing was written" in err and not (tmp_path / "config.toml").exists()

    code, _, err = await _install(tmp_path, *base)
    assert code == 0, err
    entry = _read(tmp_path / "config.toml")["mcp_servers"]["context-broker"]
    assert entry == printed
    assert entry == {
        "command": BROKER,
        "args": ["serve", "--config", str(tmp_path / "broker.toml")],
        "env": {"API_KEY": "sk-1", "URL": "http://h/?a=b", "EMPTY": ""},
    }


async def test_a_changed_entry_is_replaced_in_place_keeping_the_rest(tmp_path: Path) -> None:
    _config(tmp_path)
    target = tmp_path / "config.toml"
    stale = CODEX.replace(
        "# profiles below",
        '# the broker\n[mcp_servers.context-broker]\ncommand = "/old/context-broker"\n\n'
        '[mcp_servers.context-broker.env]\nOLD = "1"\n\n# profiles below',
    )
    target.write_text(stale, encoding="utf-8")

    code, out, err = await _install(tmp_path, "--path", "config.toml", "--env", "NEW=2")

    assert code == 0, err
    assert out.startswith("replaced 'context-broker'")
    after = target.read_text(encoding="utf-8")
    assert after == CODEX.replace(
        "# profiles below",
        f'# the broker\n[mcp_servers.context-broker]\ncommand = "{BROKER}"\n'
        f'args = ["serve", "--config", "{tmp_path / "broker.toml"}"]\nenv = {{NEW = "2"}}\n\n'
        "# profiles below",
    )
    code, out, _ = await _install(tmp_path, "--path", "config.toml", "--env", "NEW=2")
    assert code == 0 and "already up to date; nothing was written" in out


async def test_dry_run_prints_the_table_and_writes_nothing(tmp_path: Path) -> None:
    _config(tmp_path)
    target = tmp_path / "config.toml"
    target.write_text(CODEX, encoding="utf-8")

    code, out, err = await _install(tmp_path, "--path", "config.toml", "--dry-run")

    assert code == 0, err
    assert out.splitlines()[0] == "[mcp_servers.context-broker]"
    assert tomllib.loads(out)["mcp_servers"]["context-broker"]["command"] == BROKER
    assert "would write 'context-broker'" in err and "nothing was written" in err
    assert target.read_text(encoding="utf-8") == CODEX
    assert sorted(p.name for p in tmp_path.iterdir()) == ["broker.toml", "config.toml"]


async def test_a_file_that_is_not_toml_is_refused_and_left_untouched(tmp_path: Path) -> None:
    _config(tmp_path)
    target = tmp_path / "config.toml"
    target.write_text('model = "o4-mini\n', encoding="utf-8")

    code, out, err = await _install(tmp_path, "--path", "config.toml")

    assert code == 2 and out == ""
    assert "is not valid TOML" in err and "nothing was written" in err
    assert target.read_text(encoding="utf-8") == 'model = "o4-mini\n'
    assert sorted(p.name for p in tmp_path.iterdir()) == ["broker.toml", "config.toml"]


async def test_servers_written_as_inline_tables_are_edited_too(tmp_path: Path) -> None:
    _config(tmp_path)
    target = tmp_path / "config.toml"
    inline = '# mine\n[mcp_servers]\ntime = { command = "uvx", args = ["mcp-server-time"] }\n'
    target.write_text(inline, encoding="utf-8")

    code, _, err = await _install(tmp_path, "--path", "config.toml")

    assert code == 0, err
    data = _read(target)
    assert data["mcp_servers"]["time"] == {"command": "uvx", "args": ["mcp-server-time"]}
    assert data["mcp_servers"]["context-broker"]["command"] == BROKER
    assert target.read_text(encoding="utf-8").startswith("# mine\n")
