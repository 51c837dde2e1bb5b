"""The command line as a person and a CI job use it: unknown keys say where they belong,
``check`` exit codes gate CI, ``--log-level`` after the subcommand, ``CONTEXT_BROKER_CONFIG``
as the default ``--config``. Each runs ``context-broker`` as a real subprocess."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import anyio
import pytest

from tests.support.broker_procs import BROKER, server_env

TIME = str(Path(sys.executable).parent / "mcp-server-time")


def _config(folder: Path, body: str = "", *, top: str = "") -> Path:
    path = folder / "broker.toml"
    path.write_text(f"{top}\n[search]\nsemantic = false\n{body}\n", encoding="utf-8")
    return path


async def _run(*args: str, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    """``context-broker ARGS``: (exit code, stdout, stderr)."""
    with anyio.fail_after(90):
        done = await anyio.run_process([BROKER, *args], env=env or server_env(), check=False)
    return done.returncode, done.stdout.decode(), done.stderr.decode()


# -- unknown keys ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            '[gateway]\nmcp_servers_file = "claude.json"\n',
            "unknown key 'gateway.mcp_servers_file'; did you mean mcp_servers_file at the top "
            "level (before any [table])?",
        ),
        (
            '[servers.remote]\nurl = "http://127.0.0.1:1/mcp"\nmcp_servers_file = "x.json"\n',
            "unknown key 'servers.remote.mcp_servers_file'; did you mean mcp_servers_file at "
            "the top level",
        ),
        (
            '[servers.time]\ncommand = "x"\n[servers.time.tools.now]\ninclude = "always"\n'
            'mcp_servers_file = "x.json"\n',
            "unknown key 'servers.time.tools.now.mcp_servers_file'; did you mean "
            "mcp_servers_file at the top level",
        ),
        (
            '[server]\nauth_token_env = "TOKEN"\n',
            "unknown key 'server.auth_token_env'; did you mean [server.http] auth_token_env?",
        ),
    ],
)
async def test_an_unknown_key_names_the_table_it_belongs_in(
    tmp_path: Path, text: str, message: str
) -> None:
    config = tmp_path / "broker.toml"
    config.write_text(text, encoding="utf-8")
    code, out, _ = await _run("check", "--config", str(config))
    assert code == 1
    assert message in out


async def test_the_hinted_place_for_a_servers_file_works(tmp_path: Path) -> None:
    (tmp_path / "mcp.json").write_text(
        json.dumps({"mcpServers": {"time": {"command": TIME}}}), encoding="utf-8"
    )
    wrong = _config(tmp_path, '[gateway]\nmcp_servers_file = "mcp.json"\n')
    code, out, _ = await _run("check", "--config", str(wrong))
    assert code == 1 and "did you mean mcp_servers_file at the top level" in out
    right = _config(tmp_path, top='mcp_servers_file = "mcp.json"')
    code, out, err = await _run("check", "--json", "--config", str(right))
    assert code == 0, (out, err)
    assert json.loads(out)["servers"][0]["state"] == "connected"


# -- check exit codes --------------------------------------------------------------------------


async def test_check_exit_codes_gate_ci(tmp_path: Path) -> None:
    time = f'[servers.time]\ncommand = "{TIME}"\n'
    off = '[servers.off]\ncommand = "does-not-exist"\nenabled = false\n'
    broken = (
        f'[servers.broken]\ncommand = "{sys.executable}"\n'
        'args = ["-c", "import sys; sys.exit(3)"]\ntimeout = 10\n'
    )
    all_well, _, _ = await _run("check", "--config", str(_config(tmp_path, time + off)))
    invalid, _, _ = await _run("check", "--config", str(_config(tmp_path, "top_n = 0\n")))
    down, out, _ = await _run("check", "--config", str(_config(tmp_path, time + broken)))
    assert (all_well, invalid, down) == (0, 1, 2)
    assert "server broken [stdio]" in out and "exit code 2" in out


# -- options -----------------------------------------------------------------------------------


async def test_log_level_works_after_the_subcommand(tmp_path: Path) -> None:
    # A broker started by a broker logs a warning when it skips a nested one.
    body = f'[servers.inner]\ncommand = "{BROKER}"\nargs = ["serve"]\n'
    config = str(_config(tmp_path, body))
    env = {**server_env(), "CONTEXT_BROKER_DEPTH": "1"}
    _, _, loud = await _run("--log-level", "WARNING", "check", "--config", config, env=env)
    code, _, quiet = await _run("check", "--config", config, "--log-level", "ERROR", env=env)
    assert "WARNING" in loud
    assert code == 0 and "WARNING" not in quiet
    code, _, debug = await _run("check", "--log-level", "DEBUG", "--config", config, env=env)
    assert code == 0 and " DEBUG " in debug


async def test_context_broker_config_is_the_default_config(tmp_path: Path) -> None:
    config = _config(tmp_path)
    env = {**server_env(), "CONTEXT_BROKER_CONFIG": str(config)}
    code, out, err = await _run("check", "--json", env=env)
    assert code == 0, err
    assert json.loads(out)["config"] == str(config)
    code, help_text, _ = await _run("check", "--help", env=env)
    assert code == 0 and "CONTEXT_BROKER_CONFIG" in help_text


async def test_without_config_or_variable_the_error_names_both(tmp_path: Path) -> None:
    code, _, err = await _run("check")
    assert code == 2 and "--config" in err
    _, help_text, _ = await _run("serve", "--help")
    assert "CONTEXT_BROKER_CONFIG" in help_text and "--insecure" in help_text
