"""``context-broker install --import`` as a person runs it: the host's servers move into
``mcp-servers.json`` beside the broker config, the config reads that file as its
``mcp_servers_file`` (the key is added above its tables, the rest kept, or the config is
created), and the host's file lists only the broker; every changed file is backed up and the
output says how to undo it. ``check`` then starts the moved servers, each chosen per request.
``--dry-run`` shows the three changes and writes nothing."""

from __future__ import annotations

import json
import sys
import tomllib
from pathlib import Path
from typing import Any

import anyio

from tests.support.broker_procs import BROKER, ROOT, server_env

TIME = {"command": str(Path(sys.executable).parent / "mcp-server-time")}
NOTES = {"command": sys.executable, "args": ["examples/servers/notes_server.py"], "cwd": str(ROOT)}
CONFIG = "# my broker\n\n[search]\nsemantic = false\n"


async def _broker(cwd: Path, *args: str) -> tuple[int, str, str]:
    """``context-broker ARGS`` run in ``cwd``, with ``cwd/home`` as the home folder."""
    env = server_env()
    env["HOME"] = str(cwd / "home")
    with anyio.fail_after(120):
        done = await anyio.run_process([BROKER, *args], cwd=cwd, env=env, check=False)
    return done.returncode, done.stdout.decode(), done.stderr.decode()


def _import(cwd: Path, *args: str) -> Any:
    return _broker(cwd, "install", "--config", "broker.toml", "--import", *args)


def _own_entry(folder: Path) -> dict[str, Any]:
    return {"command": BROKER, "args": ["serve", "--config", str(folder / "broker.toml")]}


def _cursor(folder: Path, servers: dict[str, Any]) -> Path:
    """Cursor's user file under ``folder/home``, listing ``servers`` and another setting."""
    host = folder / "home" / ".cursor" / "mcp.json"
    host.parent.mkdir(parents=True)
    host.write_text(json.dumps({"mcpServers": servers, "theme": "dark"}), encoding="utf-8")
    return host


def _json(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return data


def _backup(path: Path) -> Path:
    [backup] = path.parent.glob(f"{path.name}.*.bak")
    return backup


async def test_a_hosts_servers_move_behind_the_broker_and_check_starts_them(
    tmp_path: Path,
) -> None:
    (tmp_path / "broker.toml").write_text(CONFIG, encoding="utf-8")
    servers = {"time": TIME, "notes": NOTES, "context-broker": _own_entry(tmp_path)}
    host = _cursor(tmp_path, servers)
    before = host.read_text(encoding="utf-8")

    code, out, err = await _import(tmp_path, "--client", "cursor")

    assert code == 0, err
    copy = tmp_path / "mcp-servers.json"
    assert _json(copy) == {"mcpServers": {"time": TIME, "notes": NOTES}}
    config = (tmp_path / "broker.toml").read_text(encoding="utf-8")
    assert config.startswith("# my broker\nmcp_servers_file = ") and config.endswith(CONFIG[12:])
    assert tomllib.loads(config) == {
        "mcp_servers_file": "mcp-servers.json",
        "search": {"semantic": False},
    }
    assert _json(host) == {"mcpServers": {"context-broker": _own_entry(tmp_path)}, "theme": "dark"}
    assert _backup(host).read_text(encoding="utf-8") == before
    assert _backup(tmp_path / "broker.toml").read_text(encoding="utf-8") == CONFIG
    assert f"moved 2 servers from {host} to {copy}; " in out
    assert f"\n  time: {TIME['command']}\n  notes: {sys.executable} " in out
    assert f"to undo: mv {_backup(host)} {host}; " in out and f"rm {copy}" in out

    code, out, err = await _broker(tmp_path, "check", "--config", "broker.toml")

    assert code == 0, out + err
    for name in ("notes", "time"):
        assert f"server {name} [stdio]: connected" in out, out
    assert out.count("include agent (imported from mcp-servers.json)") == 2, out
    assert "context-broker" not in out.split("search:")[1]


async def test_dry_run_shows_the_three_changes_and_writes_nothing(tmp_path: Path) -> None:
    host = _cursor(tmp_path, {"time": TIME, "context-broker": _own_entry(tmp_path)})
    before = host.read_text(encoding="utf-8")

    code, out, err = await _import(tmp_path, "--client", "cursor", "--dry-run")

    assert code == 0, err
    copy, config = tmp_path / "mcp-servers.json", tmp_path / "broker.toml"
    headers = [line for line in out.splitlines() if line.startswith(("--- ", "+++ "))]
    assert headers == [
        "--- /dev/null",
        f"+++ {copy}",
        "--- /dev/null",
        f"+++ {config}",
        f"--- {host}",
        f"+++ {host}",
    ]
    assert '+mcp_servers_file = "mcp-servers.json"' in out.splitlines()
    assert "would move 1 server from" in err and "nothing was written" in err
    assert host.read_text(encoding="utf-8") == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["home"]
    assert sorted(p.name for p in host.parent.iterdir()) == ["mcp.json"]


async def test_a_missing_broker_config_is_created_reading_the_servers_file(
    tmp_path: Path,
) -> None:
    host = _cursor(tmp_path, {"time": TIME})

    code, out, err = await _import(tmp_path, "--client", "cursor", "--env", "API_KEY=sk-1")

    assert code == 0, err
    config = tmp_path / "broker.toml"
    assert tomllib.loads(config.read_text(encoding="utf-8")) == {
        "mcp_servers_file": "mcp-servers.json"
    }
    entry = {**_own_entry(tmp_path), "env": {"API_KEY": "sk-1"}}
    assert _json(host)["mcpServers"] == {"context-broker": entry}
    assert (
        f"{config} reads its servers from mcp-servers.json (mcp_servers_file) (a new file)" in out
    )
    assert f"rm {config}" in out


async def test_running_it_again_imports_nothing_and_writes_nothing(tmp_path: Path) -> None:
    (tmp_path / "broker.toml").write_text(CONFIG, encoding="utf-8")
    host = _cursor(tmp_path, {"time": TIME, "notes": NOTES})
    code, _, err = await _import(tmp_path, "--client", "cursor")
    assert code == 0, err
    written = {p: p.read_text(encoding="utf-8") for p in tmp_path.rglob("*") if p.is_file()}

    code, out, err = await _import(tmp_path, "--client", "cursor")

    assert code == 0, err
    assert out.startswith(f"nothing to import: {host} lists no servers besides the broker")
    assert {p: p.read_text(encoding="utf-8") for p in tmp_path.rglob("*") if p.is_file()} == written


async def test_servers_added_to_the_host_later_join_the_servers_file(tmp_path: Path) -> None:
    (tmp_path / "broker.toml").write_text(CONFIG, encoding="utf-8")
    host = _cursor(tmp_path, {"time": TIME})
    assert (await _import(tmp_path, "--client", "cursor"))[0] == 0
    data = _json(host)
    host.write_text(
        json.dumps({**data, "mcpServers": {**data["mcpServers"], "notes": NOTES}}), "utf-8"
    )

    code, _, err = await _import(tmp_path, "--client", "cursor")

    assert code == 0, err
    assert _json(tmp_path / "mcp-servers.json")["mcpServers"] == {"time": TIME, "notes": NOTES}
    assert list(_json(host)["mcpServers"]) == ["context-broker"]


async def test_a_config_reading_the_host_file_is_pointed_at_the_copy(tmp_path: Path) -> None:
    host = _cursor(tmp_path, {"time": TIME})
    config = tmp_path / "broker.toml"
    config.write_text(f'mcp_servers_file = "{host}"  # Cursor\'s servers\n\n{CONFIG}', "utf-8")

    code, _, err = await _import(tmp_path, "--client", "cursor")

    assert code == 0, err
    text = config.read_text(encoding="utf-8")
    assert text.startswith('mcp_servers_file = "mcp-servers.json"  # Cursor\'s servers\n')
    assert _json(tmp_path / "mcp-servers.json") == {"mcpServers": {"time": TIME}}


async def test_a_config_reading_another_servers_file_is_refused(tmp_path: Path) -> None:
    host = _cursor(tmp_path, {"time": TIME})
    (tmp_path / "team.json").write_text('{"mcpServers": {}}', encoding="utf-8")
    config = tmp_path / "broker.toml"
    config.write_text('mcp_servers_file = "team.json"\n', encoding="utf-8")
    before = host.read_text(encoding="utf-8")

    code, out, err = await _import(tmp_path, "--client", "cursor")

    assert code == 2 and out == ""
    assert f"already reads servers from {str(tmp_path / 'team.json')!r}" in err
    assert "nothing was written" in err and len(err.strip().splitlines()) == 1
    assert host.read_text(encoding="utf-8") == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["broker.toml", "home", "team.json"]


async def test_no_entry_that_starts_a_broker_is_copied(tmp_path: Path) -> None:
    launched = {"command": "uvx", "args": ["context-broker", "serve", "--config", "x.toml"]}
    host = _cursor(tmp_path, {"time": TIME, "old-broker": launched})

    code, out, err = await _import(tmp_path, "--client", "cursor")

    assert code == 0, err
    assert _json(tmp_path / "mcp-servers.json")["mcpServers"] == {"time": TIME}
    assert _json(host)["mcpServers"] == {"context-broker": _own_entry(tmp_path)}
    assert "moved 1 server from" in out


async def test_an_entry_the_broker_cannot_read_is_refused(tmp_path: Path) -> None:
    host = _cursor(tmp_path, {"time": TIME, "broken": {"args": ["x"]}})
    before = host.read_text(encoding="utf-8")

    code, out, err = await _import(tmp_path, "--client", "cursor")

    assert code == 2 and out == ""
    assert "'broken'" in err and "nothing was written" in err
    assert host.read_text(encoding="utf-8") == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["home"]


CODEX = """\
# Codex settings
model = "o4-mini"

[mcp_servers.time]  # the clock
command = "{time}"
startup_timeout_sec = 20

# notes, from the repository
[mcp_servers.notes]
command = "{python}"
args = ["examples/servers/notes_server.py"]
cwd = "{root}"

[mcp_servers.notes.env]
NOTES_DIR = "/tmp/notes"

[mcp_servers.remote]
url = "https://mcp.example.com/mcp"
bearer_token_env_var = "REMOTE_TOKEN"

# the profiles
[profiles.fast]
model = "gpt-5"
"""


async def test_codex_servers_move_into_a_json_servers_file(tmp_path: Path) -> None:
    (tmp_path / "broker.toml").write_text(CONFIG, encoding="utf-8")
    host = tmp_path / "home" / ".codex" / "config.toml"
    host.parent.mkdir(parents=True)
    text = CODEX.format(time=TIME["command"], python=sys.executable, root=ROOT)
    host.write_text(text, encoding="utf-8")

    code, out, err = await _import(tmp_path, "--client", "codex")

    assert code == 0, err
    assert _json(tmp_path / "mcp-servers.json") == {
        "mcpServers": {
            "time": {**TIME, "startup_timeout_sec": 20},
            "notes": {**NOTES, "env": {"NOTES_DIR": "/tmp/notes"}},
            "remote": {
                "url": "https://mcp.example.com/mcp",
                "headers": {"Authorization": "Bearer ${env:REMOTE_TOKEN}"},
            },
        }
    }
    assert host.read_text(encoding="utf-8") == (
        '# Codex settings\nmodel = "o4-mini"\n\n# the profiles\n[profiles.fast]\n'
        'model = "gpt-5"\n\n[mcp_servers.context-broker]\n'
        f'command = "{BROKER}"\nargs = ["serve", "--config", "{tmp_path / "broker.toml"}"]\n'
    )
    assert _backup(host).read_text(encoding="utf-8") == text
    assert "moved 3 servers" in out and "restart Codex" in out


async def test_a_host_file_that_is_the_servers_file_is_refused(tmp_path: Path) -> None:
    host = tmp_path / "mcp-servers.json"
    host.write_text(json.dumps({"mcpServers": {"time": TIME}}), encoding="utf-8")

    code, _, err = await _import(tmp_path, "--client", "generic", "--path", "mcp-servers.json")

    assert code == 2 and "pass a --config in another folder" in err
    assert _json(host) == {"mcpServers": {"time": TIME}}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mcp-servers.json"]
