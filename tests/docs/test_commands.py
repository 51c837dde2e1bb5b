"""Every command the documentation shows: each ``context-broker`` command line parses with the
command's own argument parser, the ones that change nothing are run as written and exit 0,
every program a line starts is found from a shell where the virtual environment is not
active (its ``bin`` not on ``PATH``), and every repository path a command names exists."""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from context_broker.server.cli.commands import CONFIG_ENV, _parser

from ._blocks import BROKER, ROOT, Command, commands

BROKER_COMMANDS = [c for c in commands() if c.broker_args is not None]
EXECUTABLE = Path(sys.executable).parent / BROKER
_REPO_PATHS = ("scripts/", "benchmarks/", "examples/", "config.example.toml")


def _where(command: Command) -> str:
    return f"{command.block.where}: {command.line.strip()[:60]}"


def test_the_pages_show_broker_commands() -> None:
    assert len(BROKER_COMMANDS) >= 20


def test_every_line_naming_the_broker_can_be_read_as_a_command() -> None:
    unreadable = [_where(c) for c in commands() if c.tokens is None and BROKER in c.line]
    assert unreadable == []


def _parse(command: Command) -> int:
    """Parse without running: 0 when the parser accepts the line (``--help`` and ``--version``
    exit 0 after printing), argparse's exit code otherwise."""
    args = command.broker_args
    assert args is not None
    saved = os.environ.pop(CONFIG_ENV, None)
    if CONFIG_ENV in command.env:
        os.environ[CONFIG_ENV] = command.env[CONFIG_ENV]
    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            _parser().parse_args(args)
    except SystemExit as exc:
        return int(exc.code or 0)
    finally:
        os.environ.pop(CONFIG_ENV, None)
        if saved is not None:
            os.environ[CONFIG_ENV] = saved
    return 0


@pytest.mark.parametrize("command", BROKER_COMMANDS, ids=_where)
def test_a_broker_command_shown_parses(command: Command) -> None:
    assert _parse(command) == 0, command.line


def test_a_command_with_a_wrong_option_is_caught() -> None:
    [command] = [c for c in commands() if c.broker_args == ["--version"]][:1]
    wrong = Command(
        command.block,
        "context-broker check --conifg x",
        ("context-broker", "check", "--conifg", "x"),
    )
    assert _parse(wrong) == 2


def _safe(args: list[str]) -> bool:
    """Whether running it changes nothing: check, help, the version, an install that only
    prints."""
    words = [a for a in args if not a.startswith("-")]
    return (
        "--help" in args
        or "-h" in args
        or args == ["--version"]
        or (words[:1] == ["check"])
        or (words[:1] == ["install"] and "--dry-run" in args)
    )


def _small_config(folder: Path) -> Path:
    """The quickstart's config, its host's servers file holding the broker's own entry (which
    the broker skips)."""
    servers = {
        BROKER: {"command": str(EXECUTABLE), "args": ["serve", "--config", "broker.toml"]},
    }
    host = folder / "mcp.json"
    host.write_text(json.dumps({"mcpServers": servers}), encoding="utf-8")
    config = folder / "broker.toml"
    config.write_text(f"mcp_servers_file = {json.dumps(str(host))}\n", encoding="utf-8")
    return config


def bare_path() -> str:
    """``PATH`` in a shell where the setup's virtual environment is not active."""
    venv = Path(sys.executable).parent.resolve()
    entries = os.environ.get("PATH", os.defpath).split(os.pathsep)
    return os.pathsep.join(p for p in entries if p and Path(p).resolve() != venv)


def _program_problem(program: str, defined: set[str]) -> str | None:
    """Why a line's program would not start from the repository's root without the venv."""
    if program.startswith("$"):
        name = program.strip("${}")
        return None if name in defined else f"${name} is not set by an earlier line"
    if "/" in program:
        path = ROOT / program
        return None if os.access(path, os.X_OK) else f"{program} is not an executable file"
    if shutil.which(program, path=bare_path()) is None:
        return f"{program!r} is not on PATH without the virtual environment"
    return None


def test_every_program_a_line_starts_is_found_without_the_venv_on_path() -> None:
    problems = []
    defined: dict[str, set[str]] = {}
    for command in commands():
        if command.tokens is None:
            continue
        names = defined.setdefault(command.block.where, set())
        if not command.tokens:  # NAME=VALUE alone: a variable for the lines after it
            names.update(command.env)
            continue
        problem = _program_problem(command.tokens[0], names)
        if problem is not None:
            problems.append(f"{_where(command)}: {problem}")
    assert problems == []


def test_a_bare_broker_command_is_caught() -> None:
    assert _program_problem(BROKER, set()) is not None
    assert _program_problem(".venv/bin/context-broker", set()) is None
    assert _program_problem("$NODE", set()) is not None


def _runnable(command: Command, config: Path) -> tuple[list[str], dict[str, str]]:
    """The command line to run from the repository's root, the program as written: a config
    the repository does not have (the reader's ``broker.toml``) is replaced by ``config``."""
    assert command.tokens is not None
    program = command.tokens[0] if Path(command.tokens[0]).name == BROKER else str(EXECUTABLE)
    args = [program, *(command.broker_args or [])]
    if "--config" in args:
        i = args.index("--config") + 1
        if not (ROOT / args[i]).exists():
            args[i] = str(config)
    env = {k: (v if (ROOT / v).exists() else str(config)) for k, v in command.env.items()}
    return args, env


def _run(args: list[str], env: dict[str, str], home: Path) -> subprocess.CompletedProcess[str]:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("CONTEXT_BROKER_")}
    # An install that only prints still reads the host's file: give it an empty home.
    environ |= {"HOME": str(home), "XDG_CONFIG_HOME": str(home / ".config"), **env}
    environ |= {"PATH": bare_path()}  # as a shell without the venv active has it
    environ.pop("VIRTUAL_ENV", None)
    return subprocess.run(
        args,
        cwd=ROOT,
        env=environ,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_the_commands_that_change_nothing_run_and_succeed(tmp_path: Path) -> None:
    config = _small_config(tmp_path)
    runs = sorted(
        {
            (tuple(args), tuple(sorted(env.items())))
            for args, env in (
                _runnable(c, config) for c in BROKER_COMMANDS if _safe(c.broker_args or [])
            )
        }
    )
    assert any(args[1:2] == ("check",) for args, _ in runs)
    with ThreadPoolExecutor(max_workers=4) as pool:
        done = list(pool.map(lambda run: _run(list(run[0]), dict(run[1]), tmp_path), runs))
    failed = [
        f"{' '.join(args)} (env {dict(env)}): exit {result.returncode}\n{result.stderr[-2000:]}"
        for (args, env), result in zip(runs, done, strict=True)
        if result.returncode != 0
    ]
    assert failed == []


def test_every_repository_path_a_command_names_exists() -> None:
    missing = []
    for command in commands():
        words = command.tokens if command.tokens is not None else tuple(command.line.split())
        for word in words:
            path = word.rstrip(";,)")
            if path.startswith(_REPO_PATHS) and not (ROOT / path).exists():
                missing.append(f"{command.block.where}: {path}")
    assert missing == []
