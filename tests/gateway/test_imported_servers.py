"""Servers imported from a host's ``mcpServers`` file are chosen per request: their tools are
``agent`` unless the entry or a ``[servers.NAME]`` table beside the import says otherwise;
``check`` shows each server's mode and where it came from, and reports entry keys the broker
does not read. Real downstream servers (mcp-server-time, mcp-server-git), the real model."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest
from context_broker.server.embedding import resolve_model_dir
from context_broker.server.gateway import ServersFileError, parse_servers, resolve_servers
from context_broker.server.gateway.server_state import ServerChanges, diff_servers
from context_broker.server.runtime import build_runtime
from context_broker.server.settings import AppConfig, load_config, parse_config
from mcp import Client

from contextcore.errors import ConfigError
from tests.gateway.gateway_env import ROOT, VENV_BIN, executable
from tests.support.broker_procs import BROKER, server_env
from tests.support.mcp_calls import call

OFF_TOPIC = "what's a good name for a cat?"


def host_file(folder: Path, **extra: dict[str, Any]) -> Path:
    """A Claude Desktop file with two real servers, time and git; ``extra`` adds keys to an
    entry by server name."""
    entries: dict[str, dict[str, Any]] = {
        "time": {"command": executable(VENV_BIN / "mcp-server-time")},
        "git": {
            "command": executable(VENV_BIN / "mcp-server-git"),
            "args": ["--repository", str(ROOT)],
        },
    }
    for name, keys in extra.items():
        entries[name] = {**entries[name], **keys}
    path = folder / "claude_desktop_config.json"
    path.write_text(json.dumps({"mcpServers": entries}), encoding="utf-8")
    return path


def broker_config(folder: Path, tables: str = "", *, semantic: bool = True) -> Path:
    path = folder / "broker.toml"
    path.write_text(
        'mcp_servers_file = "claude_desktop_config.json"\n'
        f"[search]\nsemantic = {str(semantic).lower()}\n"
        "[gateway]\nstartup_budget = 60\n"  # a loaded machine may take seconds to start them
        f"{tables}",
        encoding="utf-8",
    )
    return path


def parsed(folder: Path, servers: dict[str, Any]) -> AppConfig:
    data = {"mcp_servers_file": "claude_desktop_config.json", "servers": servers}
    return parse_config(data, base_dir=folder, environ={})


def modes(context: dict[str, Any]) -> dict[str, str]:
    """``server/tool`` → include mode of the downstream tools in a request context."""
    return {
        f"{i['server']}/{i['name']}": i["include_mode"] for i in context["items"] if i["server"]
    }


async def check(config: Path) -> tuple[int, str, str]:
    """``context-broker check``: (exit code, stdout, stderr)."""
    with anyio.fail_after(120):
        done = await anyio.run_process(
            [BROKER, "check", "--config", str(config)], env=server_env(), check=False
        )
    return done.returncode, done.stdout.decode(), done.stderr.decode()


# -- through the running broker ----------------------------------------------------------------


async def test_an_imported_setup_selects_its_tools_per_request_and_a_table_beside_it_retunes_one(
    tmp_path: Path,
) -> None:
    host_file(tmp_path)
    path = broker_config(tmp_path)
    config = load_config(path, environ={})
    if resolve_model_dir(config) is None:
        pytest.fail("embedding model not prepared; run scripts/setup.sh")
    built = build_runtime(config, path)
    assert built.gateway is not None
    with anyio.fail_after(180):
        async with built.gateway, Client(built.server) as client:
            await built.gateway.wait_ready()
            sid = (await call(client, "create_session"))["session_id"]
            tokyo = await call(
                client, "build_request_context", session_id=sid, message="What time is it in Tokyo?"
            )
            chosen = modes(tokyo)
            assert "time/get_current_time" in chosen, tokyo["items"]
            assert set(chosen.values()) == {"agent"}
            cat = await call(client, "build_request_context", session_id=sid, message=OFF_TOPIC)
            assert modes(cat) == {}, cat["items"]

            # The user marks one imported server "always"; a reload retunes it in place.
            path.write_text(
                path.read_text(encoding="utf-8") + '\n[servers.time]\ninclude = "always"\n',
                encoding="utf-8",
            )
            report = await built.reloader.reload_async()
            assert report is not None and report.servers.retuned == ("time",)
            sid = (await call(client, "create_session"))["session_id"]
            cat = await call(client, "build_request_context", session_id=sid, message=OFF_TOPIC)
            assert modes(cat) == {
                "time/convert_time": "always",
                "time/get_current_time": "always",
            }, cat["items"]


async def test_check_shows_each_servers_mode_and_where_it_came_from(tmp_path: Path) -> None:
    host_file(tmp_path, git={"autoApprove": [], "alwaysAllow": [], "colour": "blue"})
    config = broker_config(tmp_path, '[servers.time]\ninclude = "always"\n', semantic=False)
    code, out, err = await check(config)
    assert code == 0, (out, err)
    source = "claude_desktop_config.json"
    assert "  tool: " in out and "2 always" in out and " agent" in out, out
    assert f"  include always (imported from {source}, with [servers.time])" in out, out
    assert f"  include agent (imported from {source})" in out, out
    # A key the broker does not read is reported (once: in the report, not again in the
    # log), the host's own keys are not; the broker still starts.
    warning = "server 'git': unknown key 'colour' (ignored)"
    assert warning in out and warning not in err, (out, err)
    assert "autoApprove" not in out and "alwaysAllow" not in out


async def test_an_entry_keeps_the_mode_it_names_and_check_refuses_a_table_naming_no_server(
    tmp_path: Path,
) -> None:
    host_file(tmp_path, time={"include": "always"})
    config = broker_config(tmp_path, '[servers.tiem]\ninclude = "manual"\n', semantic=False)
    code, out, _ = await check(config)
    assert code == 1
    assert "INVALID" in out and "[servers.tiem] has neither 'command' nor 'url'" in out, out
    assert "the servers it lists: git, time" in out
    broker_config(tmp_path, semantic=False)
    code, out, err = await check(config)
    assert code == 0, (out, err)
    assert "  include always (imported from claude_desktop_config.json)" in out, out


# -- the merged settings ---------------------------------------------------------------------


def test_a_table_beside_the_import_adds_its_keys_and_tables_key_by_key(tmp_path: Path) -> None:
    host_file(
        tmp_path,
        git={"env": {"A": "1"}, "tools": {"git_log": {"include": "always"}}, "trust": True},
    )
    config = parsed(
        tmp_path,
        {
            "git": {
                "prefix": "",
                "trust": "strict",
                "env": {"B": "2"},
                "tools": {"git_log": {"enabled": False}, "git_show": {"include": "manual"}},
            },
            "time": {"enabled": False},
        },
    )
    servers = resolve_servers(config, environ={})
    git = servers["git"]
    assert git.command is not None and git.command.endswith("mcp-server-git")
    assert git.args == ("--repository", str(ROOT))
    assert (git.include, git.prefix, git.trust) == ("agent", "", "strict")
    assert git.env == {"A": "1", "B": "2"}
    assert git.tools["git_log"].include == "always" and git.tools["git_log"].enabled is False
    assert git.tools["git_show"].include == "manual"
    assert servers["time"].enabled is False and servers["time"].include == "agent"


def test_a_table_with_a_command_still_replaces_the_entry(tmp_path: Path) -> None:
    host_file(tmp_path)
    config = parsed(tmp_path, {"time": {"command": "other-time", "args": ["-v"]}})
    time = resolve_servers(config, environ={})["time"]
    assert (time.command, time.args, time.include) == ("other-time", ("-v",), None)


def test_a_table_without_command_or_url_needs_a_servers_file_to_add_to(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"servers\.time: set 'command' \(stdio\) or 'url'"):
        parse_config({"servers": {"time": {"include": "agent"}}}, base_dir=tmp_path, environ={})
    host_file(tmp_path)
    config = parsed(tmp_path, {"clock": {"include": "always"}})
    with pytest.raises(ServersFileError, match=r"\[servers\.clock\] has neither") as info:
        resolve_servers(config, environ={})
    assert "\n" not in str(info.value)


def test_an_entry_without_command_or_url_is_refused_naming_it() -> None:
    with pytest.raises(ServersFileError, match=r"server 'bare': set 'command' \(stdio\) or 'url'"):
        parse_servers({"mcpServers": {"bare": {"include": "agent"}}})


def test_settings_that_do_not_fit_the_imported_server_are_refused_naming_it(
    tmp_path: Path,
) -> None:
    host_file(tmp_path)
    config = parsed(tmp_path, {"time": {"oauth": {"client_id": "c"}}})
    with pytest.raises(ServersFileError, match=r"\[servers\.time\] added to server 'time'"):
        resolve_servers(config, environ={})


def test_a_reload_that_marks_an_imported_server_always_retunes_it_without_a_restart(
    tmp_path: Path,
) -> None:
    host_file(tmp_path)
    running = resolve_servers(parsed(tmp_path, {}), environ={})
    wanted = resolve_servers(parsed(tmp_path, {"time": {"include": "always"}}), environ={})
    assert diff_servers(running, wanted) == ServerChanges(retuned=("time",))
