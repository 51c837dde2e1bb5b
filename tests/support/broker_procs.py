"""Helpers for the server tests: small configs on disk and broker subprocesses."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import anyio.abc
from anyio.streams.text import TextReceiveStream

ROOT = Path(__file__).resolve().parents[2]
BROKER = str(Path(sys.executable).parent / "context-broker")

CONFIG = """
[search]
semantic = {semantic}

[server]
max_message_chars = {max_chars}

[persistence]
backend = "{backend}"
{path_line}

[[rules]]
name = "python-style"
description = "How to write Python in this project"
text = "Use type hints, dataclasses inside and pydantic at the edges. Format with ruff."
include = "always"

[[rules]]
name = "sql-safety"
description = "Database queries"
text = "Always use parameterized SQL queries; never build SQL with string formatting."
include = "agent"

[[rules]]
name = "commit-messages"
description = "Git commit messages"
text = "Write commit messages in the imperative mood, under 72 characters."
include = "manual"

[[references]]
name = "deploy-guide"
description = "How to deploy the service"
text = "Deploy with the release script: build the image, push it, then roll out with kubectl."
include = "agent"

[[references]]
name = "api overview"
description = "The public HTTP API"
text = "The API exposes /sessions and /requests endpoints with bearer token authentication."
include = "agent"
"""


def write_config(
    folder: Path,
    *,
    semantic: bool = False,
    backend: str = "memory",
    max_chars: int = 1_000_000,
    extra: str = "",
) -> Path:
    """A small broker config with inline rules and references; returns its path."""
    path_line = 'path = "sessions.sqlite3"' if backend == "sqlite" else ""
    text = CONFIG.format(
        semantic=str(semantic).lower(), max_chars=max_chars, backend=backend, path_line=path_line
    )
    path = folder / "broker.toml"
    path.write_text(text + extra, encoding="utf-8")
    return path


def fixture_table(fixture: Path, name: str, *args: str, prefix: str | None = None) -> str:
    """A ``[servers.NAME]`` table running the Python script ``fixture`` with ``name`` and
    ``args`` as its arguments, its tools listed to hosts and accepted as they change."""
    line = "" if prefix is None else f"prefix = {prefix!r}\n"
    argv = ", ".join(repr(a) for a in (str(fixture), name, *args))
    return (
        f"\n[servers.{name}]\ncommand = {sys.executable!r}\nargs = [{argv}]\n"
        f'include = "always"\ntrust = "auto"\ntimeout = 20\n{line}'
    )


def gateway_config(folder: Path, *tables: str) -> Path:
    """:func:`write_config` with downstream server ``tables`` and a startup budget that
    waits for them."""
    return write_config(folder, extra="\n[gateway]\nstartup_budget = 20\n" + "".join(tables))


def server_env() -> dict[str, str]:
    """Environment for broker subprocesses: no config overrides leaking in from outside."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("CONTEXT_BROKER_")}
    env["PYTHONUNBUFFERED"] = "1"
    return env


@asynccontextmanager
async def running_until(
    cmd: list[str], pattern: str, *, env: dict[str, str] | None = None, what: str = "process"
) -> AsyncIterator[tuple[re.Match[str], anyio.abc.Process]]:
    """``cmd`` as a subprocess, yielded with the match of ``pattern`` once its stderr shows
    it (within 30 s, else the test fails quoting that stderr). Its stderr is read on while the
    block runs, so the pipe never fills (its stdout is dropped); on leaving it is stopped with
    SIGTERM, then SIGKILL."""
    proc = await anyio.open_process(
        cmd, env=env or server_env(), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL
    )
    ready = anyio.Event()
    found: list[re.Match[str]] = []
    log: list[str] = []

    async def drain() -> None:
        assert proc.stderr is not None
        async for chunk in TextReceiveStream(proc.stderr):
            log.append(chunk)
            match = re.search(pattern, "".join(log[-3:]))
            if match and not found:
                found.append(match)
                ready.set()

    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(drain)
            try:
                with anyio.fail_after(30):
                    await ready.wait()
            except TimeoutError:
                raise AssertionError(f"{what} did not start:\n" + "".join(log)) from None
            yield found[0], proc
            tg.cancel_scope.cancel()
    finally:
        if proc.returncode is None:
            proc.terminate()
            with anyio.move_on_after(10):
                await proc.wait()
            if proc.returncode is None:
                proc.kill()
                await proc.wait()
        await proc.aclose()


@asynccontextmanager
async def running_broker(
    config_path: Path, transport: str = "http", env: dict[str, str] | None = None
) -> AsyncIterator[tuple[str, anyio.abc.Process]]:
    """A ``context-broker serve`` subprocess on a free port; yields (base URL, process).
    Waits (bounded) for the URL the server logs; stops it with SIGTERM, then SIGKILL."""
    cmd = [BROKER, "serve", "--config", str(config_path), "--transport", transport, "--port", "0"]
    listening = r"listening on (http://\S+?)/(mcp|sse)\b"
    async with running_until(cmd, listening, env=env, what="broker") as (found, proc):
        yield found.group(1), proc
