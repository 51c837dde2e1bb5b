"""``context-broker install``: writes the broker's entry into an MCP host's config file.

The entry starts this installation's ``context-broker serve --config FILE`` with absolute
paths. An existing file is merged (other servers and keys are kept), backed up before it is
changed, and never overwritten when it cannot be read as a JSON object. A host file that is a
symbolic link or not a regular file is refused.

    InstallError    the host file is malformed, or the broker config is missing
    (a broker config that does not load raises contextcore's ConfigError)
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import sys
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

from server.settings import load_config

__all__ = [
    "CLIENTS",
    "InstallError",
    "InstallResult",
    "broker_command",
    "default_path",
    "install",
    "server_entry",
]

Client = Literal["claude-desktop", "cursor", "vscode", "claude-code"]
Scope = Literal["project", "user"]
CLIENTS: tuple[Client, ...] = ("claude-desktop", "cursor", "vscode", "claude-code")
_LABELS: dict[Client, str] = {
    "claude-desktop": "Claude Desktop",
    "cursor": "Cursor",
    "vscode": "VS Code",
    "claude-code": "Claude Code",
}


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

    def describe(self) -> str:
        """One paragraph for a person: what changed where, and what to do next."""
        if self.dry_run:
            return f"would write {self.name!r} to {self.path} ({self.action}); nothing was written"
        if self.action == "unchanged":
            return f"{self.name!r} in {self.path} is already up to date; nothing was written"
        backup = f"; the previous file is kept as {self.backup}" if self.backup else ""
        host = _LABELS[self.client]
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
    """The host's config file for ``scope`` (default: user for Claude Desktop and Cursor,
    project for VS Code and Claude Code; project files are under ``cwd``)."""
    home = home or Path.home()
    cwd = cwd or Path.cwd()
    env = os.environ if env is None else env
    scope = scope or ("user" if client in ("claude-desktop", "cursor") else "project")
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
    return cwd / ".mcp.json" if scope == "project" else home / ".claude.json"


def broker_command() -> list[str]:
    """The absolute command that starts this installation's broker."""
    scripts = Path(sys.executable).parent
    for name in ("context-broker", "context-broker.exe"):
        script = scripts / name
        if script.is_file():
            return [str(script.absolute())]
    return [str(Path(sys.executable).absolute()), "-m", "server.cli"]


def server_entry(client: Client, config: Path, command: list[str] | None = None) -> dict[str, Any]:
    """The host's entry for the broker serving ``config`` over stdio."""
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
    if client in ("vscode", "claude-code"):
        entry = {"type": "stdio", **entry}
    return entry


def _servers_key(client: Client) -> str:
    return "servers" if client == "vscode" else "mcpServers"


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


def _read_object(path: Path) -> dict[str, Any]:
    """The file's JSON object; a missing or empty file is an empty one."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    except OSError as exc:
        raise InstallError(
            f"cannot read {str(path)!r}: {exc.strerror}; nothing was written"
        ) from exc
    if not text.strip():
        return {}
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InstallError(
            f"{str(path)!r} is not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg}); "
            "fix it or move it away, then run install again; nothing was written"
        ) from exc
    if not isinstance(data, dict):
        raise InstallError(
            f"{str(path)!r} holds a JSON {type(data).__name__}, not an object; fix it or move "
            "it away, then run install again; nothing was written"
        )
    return data


def _backup_path(path: Path) -> Path:
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
    candidate = path.with_name(f"{path.name}.{stamp}.bak")
    number = 1
    while candidate.exists():
        number += 1
        candidate = path.with_name(f"{path.name}.{stamp}-{number}.bak")
    return candidate


def _write_atomically(path: Path, data: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            json.dump(data, out, indent=2, ensure_ascii=False)
            out.write("\n")
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
) -> InstallResult:
    """Merge the broker's entry into the host's config file (``path`` overrides where it is)."""
    if client not in CLIENTS:
        raise InstallError(f"unknown client {client!r}; choose one of {', '.join(CLIENTS)}")
    target = (path or default_path(client, scope)).expanduser().absolute()
    entry = server_entry(client, config, command)
    _check_target(target)
    data = _read_object(target)
    key = _servers_key(client)
    servers = data.get(key, {})
    if not isinstance(servers, dict):
        raise InstallError(
            f"{str(target)!r}: {key!r} is a JSON {type(servers).__name__}, not an object of "
            "servers; fix it or move the file away; nothing was written"
        )
    action: Literal["added", "replaced", "unchanged"] = (
        "added" if name not in servers else "unchanged" if servers[name] == entry else "replaced"
    )
    backup = None
    if not dry_run and action != "unchanged":
        if target.exists():
            backup = _backup_path(target)
            shutil.copy2(target, backup)
        _write_atomically(target, {**data, key: {**servers, name: entry}})
    return InstallResult(client, target, key, name, entry, action, backup, dry_run)
