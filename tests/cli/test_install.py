"""``context-broker install`` as a person runs it: a real subprocess writing a host's config
file with absolute paths and the ``--env`` variables, merged with what is there and backed up,
or only printed with ``--dry-run``; a malformed file or ``--env`` value is refused and nothing
is written. The written entry starts a broker an MCP client can talk to. (JSONC files:
test_install_jsonc.py; Codex's TOML file: test_install_codex.py; --import:
test_install_import.py.)"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import anyio
import pytest
from context_broker.server.cli.install import CLIENTS, InstallError, default_path
from mcp import Client, StdioServerParameters

from tests.support.broker_procs import BROKER, server_env

OTHER = {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-memory"]}
JSON_CLIENTS = [c for c in CLIENTS if c != "codex"]


def _config(folder: Path) -> Path:
    path = folder / "broker.toml"
    path.write_text(
        '[search]\nsemantic = false\n\n[[rules]]\nname = "house-style"\n'
        'description = "How to write answers"\ntext = "Answer briefly."\ninclude = "always"\n',
        encoding="utf-8",
    )
    return path


async def _install(cwd: Path, *args: str) -> tuple[int, str, str]:
    """``context-broker install ARGS`` run in ``cwd``: (exit code, stdout, stderr)."""
    env = server_env()
    env["HOME"] = str(cwd / "home")  # a default user path never reaches the real home
    env["XDG_CONFIG_HOME"] = str(cwd / "home" / ".config")
    with anyio.fail_after(60):
        done = await anyio.run_process([BROKER, "install", *args], cwd=cwd, env=env, check=False)
    return done.returncode, done.stdout.decode(), done.stderr.decode()


def _read(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return data


def _backups(path: Path) -> list[Path]:
    return sorted(path.parent.glob(f"{path.name}.*.bak"))


@pytest.mark.parametrize(
    ("client", "key", "entry_type"),
    [
        ("claude-desktop", "mcpServers", None),
        ("cursor", "mcpServers", None),
        ("vscode", "servers", "stdio"),
        ("claude-code", "mcpServers", "stdio"),
        ("gemini-cli", "mcpServers", None),
        ("windsurf", "mcpServers", None),
        ("generic", "mcpServers", None),
    ],
)
async def test_each_host_gets_its_own_format_with_absolute_paths(
    tmp_path: Path, client: str, key: str, entry_type: str | None
) -> None:
    _config(tmp_path)
    target = tmp_path / "host.json"
    code, out, err = await _install(
        tmp_path, "--client", client, "--config", "broker.toml", "--path", "host.json"
    )
    assert code == 0, err
    entry = _read(target)[key]["context-broker"]
    assert entry["command"] == BROKER and os.path.isabs(entry["command"])
    assert entry["args"] == ["serve", "--config", str(tmp_path / "broker.toml")]
    assert entry.get("type") == entry_type
    assert f"added 'context-broker' in {target}" in out
    assert _backups(target) == []  # there was nothing to back up


@pytest.mark.parametrize(
    ("client", "where"),
    [
        ("vscode", ".vscode/mcp.json"),
        ("claude-code", "home/.claude.json"),
        ("cursor", "home/.cursor/mcp.json"),
        ("gemini-cli", "home/.gemini/settings.json"),
        ("windsurf", "home/.codeium/windsurf/mcp_config.json"),
    ],
)
async def test_without_path_the_hosts_own_file_is_written(
    tmp_path: Path, client: str, where: str
) -> None:
    _config(tmp_path)
    code, _, err = await _install(tmp_path, "--client", client, "--config", "broker.toml")
    assert code == 0, err
    assert "context-broker" in json.dumps(_read(tmp_path / where))


async def test_an_existing_file_is_merged_keeping_other_servers_and_a_backup(
    tmp_path: Path,
) -> None:
    _config(tmp_path)
    target = tmp_path / "claude_desktop_config.json"
    original = json.dumps({"mcpServers": {"memory": OTHER}, "globalShortcut": "Ctrl+Space"})
    target.write_text(original, encoding="utf-8")

    code, out, err = await _install(
        tmp_path, "--client", "claude-desktop", "--config", "broker.toml", "--path", str(target)
    )

    assert code == 0, err
    data = _read(target)
    assert data["mcpServers"]["memory"] == OTHER and data["globalShortcut"] == "Ctrl+Space"
    assert set(data["mcpServers"]) == {"memory", "context-broker"}
    [backup] = _backups(target)
    assert backup.read_text(encoding="utf-8") == original
    assert str(backup) in out


async def test_a_changed_entry_is_replaced_and_an_unchanged_one_left_alone(
    tmp_path: Path,
) -> None:
    _config(tmp_path)
    target = tmp_path / "mcp.json"
    stale = {"servers": {"context-broker": {"type": "stdio", "command": "/old/context-broker"}}}
    target.write_text(json.dumps(stale), encoding="utf-8")
    args = ("--client", "vscode", "--config", "broker.toml", "--path", "mcp.json")

    code, out, _ = await _install(tmp_path, *args)
    assert code == 0 and out.startswith("replaced 'context-broker'")
    assert _read(target)["servers"]["context-broker"]["command"] == BROKER

    code, out, _ = await _install(tmp_path, *args)
    assert code == 0 and "already up to date; nothing was written" in out
    assert len(_backups(target)) == 1  # only the first run changed the file


@pytest.mark.parametrize("client", JSON_CLIENTS)
async def test_dry_run_prints_the_entry_and_writes_nothing(tmp_path: Path, client: str) -> None:
    _config(tmp_path)
    target = tmp_path / "mcp.json"
    original = json.dumps({"mcpServers": {"memory": OTHER}, "servers": {"memory": OTHER}})
    target.write_text(original, encoding="utf-8")

    code, out, err = await _install(
        tmp_path, "--client", client, "--config", "broker.toml", "--path", "mcp.json", "--dry-run"
    )

    assert code == 0, err
    [(key, servers)] = json.loads(out).items()
    assert key == ("servers" if client == "vscode" else "mcpServers")
    assert servers["context-broker"]["command"] == BROKER
    assert "nothing was written" in err
    assert target.read_text(encoding="utf-8") == original
    assert _backups(target) == []
    assert sorted(p.name for p in tmp_path.iterdir()) == ["broker.toml", "mcp.json"]


async def test_the_generic_target_needs_a_path(tmp_path: Path) -> None:
    _config(tmp_path)
    code, out, err = await _install(tmp_path, "--client", "generic", "--config", "broker.toml")
    assert code == 2 and out == ""
    assert "pass --path FILE" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["broker.toml"]


@pytest.mark.parametrize(
    ("client", "key"),
    [
        ("claude-desktop", "mcpServers"),
        ("cursor", "mcpServers"),
        ("vscode", "servers"),
        ("claude-code", "mcpServers"),
        ("gemini-cli", "mcpServers"),
        ("windsurf", "mcpServers"),
        ("generic", "mcpServers"),
    ],
)
async def test_env_options_become_the_entrys_environment(
    tmp_path: Path, client: str, key: str
) -> None:
    _config(tmp_path)
    env = ("--env", "API_KEY=sk-1", "--env", "URL=http://h/?a=b", "--env", "EMPTY=")
    base = ("--client", client, "--config", "broker.toml", "--path", "host.json", *env)

    code, out, err = await _install(tmp_path, *base, "--dry-run")
    assert code == 0, err
    printed = json.loads(out)[key]["context-broker"]
    assert not (tmp_path / "host.json").exists()

    code, _, err = await _install(tmp_path, *base)
    assert code == 0, err
    entry = _read(tmp_path / "host.json")[key]["context-broker"]
    assert entry == printed
    assert entry["env"] == {"API_KEY": "sk-1", "URL": "http://h/?a=b", "EMPTY": ""}
    assert entry["args"] == ["serve", "--config", str(tmp_path / "broker.toml")]


async def test_without_env_options_the_entry_has_no_environment(tmp_path: Path) -> None:
    _config(tmp_path)
    code, out, err = await _install(
        tmp_path, "--client", "gemini-cli", "--config", "broker.toml", "--dry-run"
    )
    assert code == 0, err
    assert set(json.loads(out)["mcpServers"]["context-broker"]) == {"command", "args"}


@pytest.mark.parametrize("value", ["API_KEY", "=sk-1", "1KEY=x", "API KEY=x", "API-KEY=x"])
async def test_a_malformed_env_value_is_an_error_and_nothing_is_written(
    tmp_path: Path, value: str
) -> None:
    _config(tmp_path)
    args = ("--client", "cursor", "--config", "broker.toml", "--path", "mcp.json")
    code, out, err = await _install(tmp_path, *args, "--env", "GOOD=1", "--env", value)
    assert code == 2 and out == ""
    assert f"--env {value!r} is not NAME=VALUE" in err and "--env API_KEY=value" in err
    assert len(err.strip().splitlines()) == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["broker.toml"]


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ('{"mcpServers": {"memory": ', "is not valid JSON (line 1"),
        ('["not", "an", "object"]', "holds a JSON list, not an object"),
        ('{"mcpServers": ["memory"]}', "'mcpServers' is a JSON list, not an object of servers"),
    ],
)
async def test_a_malformed_host_file_is_an_error_naming_it_and_left_untouched(
    tmp_path: Path, text: str, problem: str
) -> None:
    _config(tmp_path)
    target = tmp_path / "claude_desktop_config.json"
    target.write_text(text, encoding="utf-8")

    code, out, err = await _install(
        tmp_path, "--client", "claude-desktop", "--config", "broker.toml", "--path", str(target)
    )

    assert code == 2 and out == ""
    assert repr(str(target)) in err and problem in err and "nothing was written" in err
    assert target.read_text(encoding="utf-8") == text
    assert _backups(target) == []


async def test_a_symlinked_host_file_is_refused_and_nothing_is_written(tmp_path: Path) -> None:
    _config(tmp_path)
    other = tmp_path / "home" / "other-credentials.json"
    other.parent.mkdir()
    secret = '{"mcpServers": {}, "apiKey": "sk-other-program"}'
    other.write_text(secret, encoding="utf-8")
    (tmp_path / ".mcp.json").symlink_to(other)

    code, out, err = await _install(
        tmp_path, "--client", "claude-code", "--config", "broker.toml", "--scope", "project"
    )

    assert code == 2 and out == ""
    assert "is a symbolic link" in err and "nothing was written" in err
    assert (tmp_path / ".mcp.json").is_symlink()
    assert other.read_text(encoding="utf-8") == secret
    assert sorted(p.name for p in tmp_path.iterdir()) == [".mcp.json", "broker.toml", "home"]
    assert sorted(p.name for p in other.parent.iterdir()) == ["other-credentials.json"]


async def test_a_host_path_that_is_a_directory_is_refused(tmp_path: Path) -> None:
    _config(tmp_path)
    (tmp_path / "mcp.json").mkdir()
    code, _, err = await _install(
        tmp_path, "--client", "cursor", "--config", "broker.toml", "--path", "mcp.json"
    )
    assert code == 2 and "is not a regular file" in err and "nothing was written" in err
    assert list((tmp_path / "mcp.json").iterdir()) == []


async def test_a_missing_broker_config_is_an_error_naming_it(tmp_path: Path) -> None:
    code, _, err = await _install(
        tmp_path, "--client", "cursor", "--config", "nowhere.toml", "--path", "mcp.json"
    )
    assert code == 2
    assert repr(str(tmp_path / "nowhere.toml")) in err and "pass --config" in err
    assert not (tmp_path / "mcp.json").exists()


async def test_the_written_entry_starts_a_broker_a_client_can_use(tmp_path: Path) -> None:
    _config(tmp_path)
    code, _, err = await _install(
        tmp_path, "--client", "claude-code", "--config", "broker.toml", "--path", "mcp.json"
    )
    assert code == 0, err
    entry = _read(tmp_path / "mcp.json")["mcpServers"]["context-broker"]
    params = StdioServerParameters(command=entry["command"], args=entry["args"], env=server_env())
    with anyio.fail_after(60):
        async with Client(params) as client:
            created = await client.call_tool("create_session", {})
    assert not created.is_error, created.content
    assert [i["name"] for i in created.structured_content["items"]] == ["house-style"]  # type: ignore[index]


@pytest.mark.parametrize(
    ("platform", "expected"),
    [
        ("darwin", "/h/Library/Application Support/Claude/claude_desktop_config.json"),
        ("win32", "/appdata/Claude/claude_desktop_config.json"),
        ("linux", "/h/.config/Claude/claude_desktop_config.json"),
    ],
)
def test_claude_desktops_file_is_where_each_os_keeps_it(platform: str, expected: str) -> None:
    path = default_path(
        "claude-desktop", platform=platform, home=Path("/h"), env={"APPDATA": "/appdata"}
    )
    assert path == Path(expected)


def test_user_scope_files_of_the_editors() -> None:
    home, cwd = Path("/h"), Path("/work")
    assert default_path("cursor", home=home, cwd=cwd) == home / ".cursor" / "mcp.json"
    assert default_path("cursor", "project", home=home, cwd=cwd) == cwd / ".cursor" / "mcp.json"
    assert default_path("vscode", home=home, cwd=cwd) == cwd / ".vscode" / "mcp.json"
    assert (
        default_path("vscode", "user", platform="linux", home=home, env={}, cwd=cwd)
        == home / ".config" / "Code" / "User" / "mcp.json"
    )
    assert default_path("claude-code", home=home, cwd=cwd) == home / ".claude.json"  # local
    assert default_path("claude-code", "project", home=home, cwd=cwd) == cwd / ".mcp.json"
    assert default_path("claude-code", "user", home=home, cwd=cwd) == home / ".claude.json"
    assert default_path("gemini-cli", home=home, cwd=cwd) == home / ".gemini" / "settings.json"
    assert (
        default_path("gemini-cli", "project", home=home, cwd=cwd)
        == cwd / ".gemini" / "settings.json"
    )
    windsurf = home / ".codeium" / "windsurf" / "mcp_config.json"
    assert default_path("windsurf", home=home, cwd=cwd) == windsurf
    assert default_path("codex", home=home, env={}, cwd=cwd) == home / ".codex" / "config.toml"
    assert default_path("codex", "project", home=home, cwd=cwd) == cwd / ".codex" / "config.toml"


def test_codex_home_moves_codexs_user_file() -> None:
    path = default_path("codex", home=Path("/h"), env={"CODEX_HOME": "/codex"})
    assert path == Path("/codex/config.toml")


def test_windsurf_has_no_project_file() -> None:
    with pytest.raises(InstallError, match="Windsurf has no project scope; use --scope user"):
        default_path("windsurf", "project", home=Path("/h"), cwd=Path("/work"))


@pytest.mark.parametrize("scope", [None, "user", "project"])
def test_the_generic_target_has_no_file_of_its_own(scope: str | None) -> None:
    with pytest.raises(InstallError, match="pass --path FILE"):
        default_path("generic", scope)  # type: ignore[arg-type]
