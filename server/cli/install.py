"""``context-broker install``: writes the broker's entry into an MCP host's config file.

The entry starts this installation's ``context-broker serve --config FILE`` with absolute
paths, and the environment variables given with ``--env``. An existing file is merged (other
servers and keys are kept), backed up before it is changed, and never overwritten when it
cannot be read as a JSON object. The file of a host that reads JSONC (VS Code, Gemini CLI)
may have comments and trailing commas: it is edited in place, keeping them; when that cannot
be done, it is rewritten as plain JSON and the output says its comments were not kept (the
backup has them). A host file that is a symbolic link or not a regular file is refused.

    InstallError    the host file is malformed, the broker config is missing, or an --env
                    value is not NAME=VALUE
    (a broker config that does not load raises contextcore's ConfigError)
"""

from __future__ import annotations

import json
import os
import re
import shutil
import stat
import sys
import tempfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

from context_broker.server.settings import load_config

from . import _jsonc

__all__ = [
    "CLIENTS",
    "InstallError",
    "InstallResult",
    "broker_command",
    "default_path",
    "install",
    "parse_env",
    "server_entry",
]

Client = Literal["claude-desktop", "cursor", "vscode", "claude-code", "gemini-cli", "generic"]
Scope = Literal["project", "user"]


@dataclass(frozen=True)
class _Host:
    """How a host keeps its MCP servers."""

    label: str
    servers_key: str
    typed: bool  # its entries name their transport ("type": "stdio")
    jsonc: bool  # it reads comments and trailing commas in its file
    scope: Scope | None  # the default scope; None: no file of its own, only --path


_HOSTS: dict[Client, _Host] = {
    "claude-desktop": _Host("Claude Desktop", "mcpServers", typed=False, jsonc=False, scope="user"),
    "cursor": _Host("Cursor", "mcpServers", typed=False, jsonc=False, scope="user"),
    "vscode": _Host("VS Code", "servers", typed=True, jsonc=True, scope="project"),
    "claude-code": _Host("Claude Code", "mcpServers", typed=True, jsonc=False, scope="project"),
    "gemini-cli": _Host("Gemini CLI", "mcpServers", typed=False, jsonc=True, scope="user"),
    "generic": _Host("the host that reads it", "mcpServers", typed=False, jsonc=False, scope=None),
}
CLIENTS: tuple[Client, ...] = tuple(_HOSTS)


class InstallError(Exception):
    """The host config cannot be merged, or the entry cannot be built."""


@dataclass(frozen=True)
class InstallResult:
    """What ``install`` did (or, with ``dry_run``, would do)."""

    client: Client
    path: Path
    servers_key: str
    name: str
    entry: dict[str, Any]
    action: Literal["added", "replaced", "unchanged"]
    backup: Path | None
    dry_run: bool
    comments_kept: bool = True  # False: the file's comments are not all in what is written

    def describe(self) -> str:
        """One paragraph for a person: what changed where, and what to do next."""
        if self.dry_run:
            lost = "" if self.comments_kept else "; some of its comments would not be kept"
            return (
                f"would write {self.name!r} to {self.path} ({self.action}){lost}; "
                "nothing was written"
            )
        if self.action == "unchanged":
            return f"{self.name!r} in {self.path} is already up to date; nothing was written"
        backup = f"; the previous file is kept as {self.backup}" if self.backup else ""
        if not self.comments_kept:
            backup = (
                "; some of its comments are not in the new file: the previous file, with "
                f"them, is kept as {self.backup}"
            )
        host = _HOSTS[self.client].label
        return f"{self.action} {self.name!r} in {self.path}{backup}; restart {host} to load it"


def _user_config_dir(platform: str, home: Path, env: Mapping[str, str]) -> Path:
    """Where desktop applications keep their settings (the folder holding ``Claude/``)."""
    if platform == "darwin":
        return home / "Library" / "Application Support"
    if platform.startswith("win"):
        appdata = env.get("APPDATA")
        return Path(appdata) if appdata else home / "AppData" / "Roaming"
    xdg = env.get("XDG_CONFIG_HOME")
    return Path(xdg) if xdg else home / ".config"


def default_path(
    client: Client,
    scope: Scope | None = None,
    *,
    platform: str = sys.platform,
    home: Path | None = None,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
) -> Path:
    """The host's config file for ``scope`` (default: user for Claude Desktop, Cursor and
    Gemini CLI, project for VS Code and Claude Code; project files are under ``cwd``). The
    generic target has none: it writes only the file given with ``--path``."""
    home = home or Path.home()
    cwd = cwd or Path.cwd()
    env = os.environ if env is None else env
    scope = scope or _HOSTS[client].scope
    if client == "generic" or scope is None:
        raise InstallError(
            "--client generic writes a standard mcp.json file of your choice; pass --path FILE "
            "(an existing file is merged)"
        )
    if client == "claude-desktop":
        if scope == "project":
            raise InstallError("Claude Desktop has no project config; leave out --scope project")
        return _user_config_dir(platform, home, env) / "Claude" / "claude_desktop_config.json"
    if client == "cursor":
        return (home if scope == "user" else cwd) / ".cursor" / "mcp.json"
    if client == "vscode":
        if scope == "project":
            return cwd / ".vscode" / "mcp.json"
        return _user_config_dir(platform, home, env) / "Code" / "User" / "mcp.json"
    if client == "gemini-cli":
        return (home if scope == "user" else cwd) / ".gemini" / "settings.json"
    return cwd / ".mcp.json" if scope == "project" else home / ".claude.json"


def broker_command() -> list[str]:
    """The absolute command that starts this installation's broker."""
    scripts = Path(sys.executable).parent
    for name in ("context-broker", "context-broker.exe"):
        script = scripts / name
        if script.is_file():
            return [str(script.absolute())]
    return [str(Path(sys.executable).absolute()), "-m", "context_broker.server.cli"]


_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def parse_env(pairs: Iterable[str]) -> dict[str, str]:
    """The variables of ``--env NAME=VALUE`` options (a later one of the same name wins)."""
    env: dict[str, str] = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or not _ENV_NAME.fullmatch(name):
            raise InstallError(
                f"--env {pair!r} is not NAME=VALUE with a variable name of letters, digits and "
                "underscores, not starting with a digit; write it as --env API_KEY=value"
            )
        env[name] = value
    return env


def server_entry(
    client: Client,
    config: Path,
    command: list[str] | None = None,
    env: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """The host's entry for the broker serving ``config`` over stdio, started with ``env``
    added to the host's environment."""
    config = config.expanduser().absolute()
    if not config.is_file():
        raise InstallError(
            f"broker config {str(config)!r} does not exist; pass --config with the TOML file "
            "the host should start the broker with (config.example.toml is a start)"
        )
    load_config(config)  # a host would only show the broker failing to start
    program, *prefix = command or broker_command()
    entry: dict[str, Any] = {
        "command": program,
        "args": [*prefix, "serve", "--config", str(config)],
    }
    if env:
        entry["env"] = dict(env)
    if _HOSTS[client].typed:
        entry = {"type": "stdio", **entry}
    return entry


def _check_target(path: Path) -> None:
    """Refuse a host file that is a symlink or not a regular file: merging would read the
    file it points at (another program's credentials, say) and write it back here."""
    try:
        mode = path.lstat().st_mode
    except FileNotFoundError:
        return
    except OSError as exc:
        raise InstallError(
            f"cannot inspect {str(path)!r}: {exc.strerror}; nothing was written"
        ) from exc
    if stat.S_ISLNK(mode):
        raise InstallError(
            f"{str(path)!r} is a symbolic link (to {str(os.readlink(path))!r}); install edits "
            "only a regular file: pass --path with the real file, or replace the link with a "
            "copy; nothing was written"
        )
    if not stat.S_ISREG(mode):
        raise InstallError(
            f"{str(path)!r} is not a regular file; pass --path with the host's JSON config "
            "file; nothing was written"
        )


@dataclass(frozen=True)
class _HostFile:
    """A host file as read: its text (None: there is no file) and its JSON object."""

    text: str | None
    data: dict[str, Any]
    jsonc: bool  # the text needed JSONC: it has comments or trailing commas


def _parse(path: Path, text: str, host: _Host) -> _HostFile:
    """The file's value: plain JSON, or JSONC where the host reads it."""
    try:
        return _HostFile(text, json.loads(text), False)
    except json.JSONDecodeError as exc:
        strict = f"line {exc.lineno}, column {exc.colno}: {exc.msg}"
    fix = "fix it or move it away, then run install again; nothing was written"
    try:
        relaxed = _jsonc.loads(text)
    except ValueError as exc:
        if host.jsonc:
            raise InstallError(f"{str(path)!r} is not valid JSONC ({exc}); {fix}") from None
        raise InstallError(f"{str(path)!r} is not valid JSON ({strict}); {fix}") from None
    if not host.jsonc:
        raise InstallError(
            f"{str(path)!r} is not valid JSON ({strict}): it has comments or trailing commas, "
            "which plain JSON does not allow; remove them, then run install again; nothing was "
            "written"
        )
    return _HostFile(text, relaxed, True)


def _read_host_file(path: Path, host: _Host) -> _HostFile:
    """The file's JSON object; a missing or empty file is an empty one."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return _HostFile(None, {}, False)
    except OSError as exc:
        raise InstallError(
            f"cannot read {str(path)!r}: {exc.strerror}; nothing was written"
        ) from exc
    if not text.strip():
        return _HostFile(text, {}, False)
    read = _parse(path, text, host)
    if not isinstance(read.data, dict):
        raise InstallError(
            f"{str(path)!r} holds a JSON {type(read.data).__name__}, not an object; fix it or "
            "move it away, then run install again; nothing was written"
        )
    return read


def _new_text(current: _HostFile, key: str, name: str, entry: dict[str, Any]) -> tuple[str, bool]:
    """The file with ``entry`` as ``[key][name]``, and whether it keeps every comment the
    file had (a JSONC file is edited in place; when that fails, it becomes plain JSON)."""
    merged = {**current.data, key: {**current.data.get(key, {}), name: entry}}
    plain = json.dumps(merged, indent=2, ensure_ascii=False) + "\n"
    if current.text is None or not current.jsonc:
        return plain, True
    before = _jsonc.comments(current.text)
    edited = _jsonc.set_entry(current.text, key, name, entry, merged)
    if edited is None:
        return plain, before == 0
    after = _jsonc.comments(edited)
    return edited, before is not None and after is not None and after >= before


def _backup_path(path: Path) -> Path:
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
    candidate = path.with_name(f"{path.name}.{stamp}.bak")
    number = 1
    while candidate.exists():
        number += 1
        candidate = path.with_name(f"{path.name}.{stamp}-{number}.bak")
    return candidate


def _write_atomically(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            out.write(text)
        if path.exists():
            shutil.copymode(path, tmp)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def install(
    client: Client,
    config: Path,
    *,
    path: Path | None = None,
    scope: Scope | None = None,
    name: str = "context-broker",
    dry_run: bool = False,
    command: list[str] | None = None,
    env: Mapping[str, str] | None = None,
) -> InstallResult:
    """Merge the broker's entry into the host's config file (``path`` overrides where it is);
    ``env`` goes into the entry as the variables the host starts the broker with."""
    if client not in CLIENTS:
        raise InstallError(f"unknown client {client!r}; choose one of {', '.join(CLIENTS)}")
    host = _HOSTS[client]
    target = (path or default_path(client, scope)).expanduser().absolute()
    entry = server_entry(client, config, command, env)
    _check_target(target)
    current = _read_host_file(target, host)
    key = host.servers_key
    servers = current.data.get(key, {})
    if not isinstance(servers, dict):
        raise InstallError(
            f"{str(target)!r}: {key!r} is a JSON {type(servers).__name__}, not an object of "
            "servers; fix it or move the file away; nothing was written"
        )
    action: Literal["added", "replaced", "unchanged"] = (
        "added" if name not in servers else "unchanged" if servers[name] == entry else "replaced"
    )
    if action == "unchanged":
        return InstallResult(client, target, key, name, entry, action, None, dry_run)
    text, comments_kept = _new_text(current, key, name, entry)
    backup = None
    if not dry_run:
        if target.exists():
            backup = _backup_path(target)
            shutil.copy2(target, backup)
        _write_atomically(target, text)
    return InstallResult(client, target, key, name, entry, action, backup, dry_run, comments_kept)
