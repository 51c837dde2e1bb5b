"""``context-broker install``: writes the broker's entry into an MCP host's config file, and
with ``--import`` moves the host's other servers behind the broker.

The entry starts this installation's ``context-broker serve --config FILE`` with absolute
paths, and the environment variables given with ``--env``. An existing file is merged (other
servers and keys are kept), backed up before it is changed, and never overwritten when it
cannot be read. The file of a host that reads JSONC (VS Code, Gemini CLI) may have comments
and trailing commas: it is edited in place, keeping them; when that cannot be done, it is
rewritten as plain JSON and the output says its comments were not kept (the backup has them).
Codex keeps its servers in TOML (``[mcp_servers.NAME]`` tables): only the broker's table is
written, so the file's comments and other settings stay as they were. A file that is a
symbolic link or not a regular file is refused.

``import_servers`` copies the host's other servers into ``mcp-servers.json`` beside the
broker config, points the config's ``mcp_servers_file`` at that copy (the broker then starts
them, each chosen per request), and leaves only the broker in the host's file.

    InstallError    the host file is malformed, the broker config is missing, an --env value
                    is not NAME=VALUE, or an import would replace servers the config reads
    (a broker config that does not load raises contextcore's ConfigError)
"""

from __future__ import annotations

import difflib
import json
import os
import re
import shlex
import shutil
import stat
import sys
import tempfile
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

import tomlkit
from context_broker.server.gateway.errors import GatewayError
from context_broker.server.gateway.servers_file import is_broker_command, parse_servers
from context_broker.server.settings import AppConfig, load_config
from context_broker.server.version import broker_command

from . import _jsonc, _toml
from ._import_review import git_tree_of, is_project_file, review_lines

__all__ = [
    "CLIENTS",
    "SCOPES",
    "SERVERS_FILE",
    "FileChange",
    "ImportResult",
    "InstallError",
    "InstallResult",
    "broker_command",
    "default_path",
    "import_servers",
    "install",
    "parse_env",
    "server_entry",
    "servers_place",
]

Client = Literal[
    "claude-desktop",
    "cursor",
    "vscode",
    "claude-code",
    "gemini-cli",
    "windsurf",
    "codex",
    "generic",
]
Scope = Literal["project", "user", "local"]
Format = Literal["json", "jsonc", "toml"]
Action = Literal["added", "replaced", "unchanged"]

SERVERS_FILE = "mcp-servers.json"
"""The file, beside the broker config, that ``--import`` moves a host's servers into."""


@dataclass(frozen=True)
class _Host:
    """How a host keeps its MCP servers."""

    label: str
    servers_key: str
    typed: bool  # its entries name their transport ("type": "stdio")
    format: Format  # jsonc: it reads comments and trailing commas in its JSON file
    scope: Scope | None  # the default scope; None: no file of its own, only --path

    @property
    def syntax(self) -> str:
        return "TOML" if self.format == "toml" else "JSON"


_HOSTS: dict[Client, _Host] = {
    "claude-desktop": _Host("Claude Desktop", "mcpServers", False, "json", "user"),
    "cursor": _Host("Cursor", "mcpServers", False, "json", "user"),
    "vscode": _Host("VS Code", "servers", True, "jsonc", "project"),
    "claude-code": _Host("Claude Code", "mcpServers", True, "json", "local"),
    "gemini-cli": _Host("Gemini CLI", "mcpServers", False, "jsonc", "user"),
    "windsurf": _Host("Windsurf", "mcpServers", False, "json", "user"),
    "codex": _Host("Codex", "mcp_servers", False, "toml", "user"),
    "generic": _Host("the host that reads it", "mcpServers", False, "json", None),
}
CLIENTS: tuple[Client, ...] = tuple(_HOSTS)
SCOPES: dict[Client, tuple[Scope, ...]] = {
    "claude-desktop": ("user",),
    "cursor": ("user", "project"),
    "vscode": ("project", "user"),
    "claude-code": ("local", "project", "user"),
    "gemini-cli": ("user", "project"),
    "windsurf": ("user",),
    "codex": ("user", "project"),
    "generic": (),
}
"""Every scope each host keeps servers in, its default first."""


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
    action: Action
    backup: Path | None
    dry_run: bool
    comments_kept: bool = True  # False: the file's comments are not all in what is written
    place: tuple[str, ...] = ()  # the keys down to the servers object, when it is nested

    @property
    def where(self) -> str:
        """The host file, and the object in it when that is not at its top."""
        if len(self.place) < 2:
            return str(self.path)
        return f"{self.path} ({_label(self.place)})"

    def describe(self) -> str:
        """One paragraph for a person: what changed where, and what to do next."""
        if self.dry_run:
            lost = "" if self.comments_kept else "; some of its comments would not be kept"
            return (
                f"would write {self.name!r} to {self.where} ({self.action}){lost}; "
                "nothing was written"
            )
        if self.action == "unchanged":
            return f"{self.name!r} in {self.where} is already up to date; nothing was written"
        backup = f"; the previous file is kept as {self.backup}" if self.backup else ""
        if not self.comments_kept:
            backup = (
                "; some of its comments are not in the new file: the previous file, with "
                f"them, is kept as {self.backup}"
            )
        host = _HOSTS[self.client].label
        return f"{self.action} {self.name!r} in {self.where}{backup}; restart {host} to load it"

    def snippet(self) -> str:
        """The entry as it stands in the host's file (what ``--dry-run`` prints)."""
        if _HOSTS[self.client].format == "toml":
            return _toml.toml_table(self.servers_key, self.name, self.entry).rstrip("\n")
        return json.dumps({self.servers_key: {self.name: self.entry}}, indent=2)


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
    """The host's config file for ``scope`` (default: user for Claude Desktop, Cursor, Gemini
    CLI, Windsurf and Codex, project for VS Code, local for Claude Code; project files are
    under ``cwd``). Claude Code's local scope is ``~/.claude.json`` (the servers of ``cwd``
    in it, see :func:`servers_place`). Codex's user file is under ``$CODEX_HOME`` when that
    is set. The generic target has none: it writes only the file given with ``--path``."""
    home = home or Path.home()
    cwd = cwd or Path.cwd()
    env = os.environ if env is None else env
    scope = scope or _HOSTS[client].scope
    if client == "generic" or scope is None:
        raise InstallError(
            "--client generic writes a standard mcp.json file of your choice; pass --path FILE "
            "(an existing file is merged)"
        )
    if scope not in SCOPES[client]:
        label = _HOSTS[client].label
        kept = " or ".join(f"--scope {s}" for s in SCOPES[client])
        raise InstallError(
            f"{label} has no {scope} scope; use {kept} (or leave --scope out for "
            f"{SCOPES[client][0]})"
        )
    if client == "claude-desktop":
        return _user_config_dir(platform, home, env) / "Claude" / "claude_desktop_config.json"
    if client == "windsurf":
        return home / ".codeium" / "windsurf" / "mcp_config.json"
    if client == "codex":
        codex_home = env.get("CODEX_HOME")
        user = Path(codex_home) if codex_home else home / ".codex"
        return (user if scope == "user" else cwd / ".codex") / "config.toml"
    if client == "cursor":
        return (home if scope == "user" else cwd) / ".cursor" / "mcp.json"
    if client == "vscode":
        if scope == "project":
            return cwd / ".vscode" / "mcp.json"
        return _user_config_dir(platform, home, env) / "Code" / "User" / "mcp.json"
    if client == "gemini-cli":
        return (home if scope == "user" else cwd) / ".gemini" / "settings.json"
    return cwd / ".mcp.json" if scope == "project" else home / ".claude.json"


def servers_place(client: Client, scope: Scope | None, cwd: Path | None = None) -> tuple[str, ...]:
    """The keys, from the top of the host's file, down to its servers object: Claude Code's
    local scope keeps them under ``projects["<folder>"]`` of ``~/.claude.json``, where
    ``claude mcp add`` writes them by default."""
    host = _HOSTS[client]
    if client == "claude-code" and (scope or host.scope) == "local":
        return ("projects", os.fspath(cwd or Path.cwd()), host.servers_key)
    return (host.servers_key,)


def _label(place: tuple[str, ...]) -> str:
    """``projects["/folder"].mcpServers``: where the servers are, as a person reads it."""
    return "".join(
        (f"[{json.dumps(key)}]" if i and i < len(place) - 1 else ("." if i else "") + key)
        for i, key in enumerate(place)
    )


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
    return _entry(client, config, command, env)


def _entry(
    client: Client, config: Path, command: list[str] | None, env: Mapping[str, str] | None
) -> dict[str, Any]:
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
    """Refuse a file that is a symlink or not a regular file: merging would read the file it
    points at (another program's credentials, say) and write it back here."""
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
            f"{str(path)!r} is not a regular file; pass --path with the host's config file; "
            "nothing was written"
        )


@dataclass(frozen=True)
class _HostFile:
    """A host file as read: its text (None: there is no file) and its value."""

    text: str | None
    data: dict[str, Any]
    jsonc: bool  # the text needed JSONC: it has comments or trailing commas


_FIX = "fix it or move it away, then run install again; nothing was written"


def _parse(path: Path, text: str, host: _Host) -> _HostFile:
    """The file's value: plain JSON, JSONC where the host reads it, or TOML."""
    if host.format == "toml":
        try:
            return _HostFile(text, tomllib.loads(text), False)
        except tomllib.TOMLDecodeError as exc:
            raise InstallError(f"{str(path)!r} is not valid TOML ({exc}); {_FIX}") from None
    try:
        return _HostFile(text, json.loads(text), False)
    except json.JSONDecodeError as exc:
        strict = f"line {exc.lineno}, column {exc.colno}: {exc.msg}"
    try:
        relaxed = _jsonc.loads(text)
    except ValueError as exc:
        if host.format == "jsonc":
            raise InstallError(f"{str(path)!r} is not valid JSONC ({exc}); {_FIX}") from None
        raise InstallError(f"{str(path)!r} is not valid JSON ({strict}); {_FIX}") from None
    if host.format != "jsonc":
        raise InstallError(
            f"{str(path)!r} is not valid JSON ({strict}): it has comments or trailing commas, "
            "which plain JSON does not allow; remove them, then run install again; nothing was "
            "written"
        )
    return _HostFile(text, relaxed, True)


def _read_host_file(path: Path, host: _Host) -> _HostFile:
    """The file's value, an object; a missing or empty file is an empty one."""
    _check_target(path)
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
            f"{str(path)!r} holds a JSON {type(read.data).__name__}, not an object; {_FIX}"
        )
    return read


def _servers_of(
    current: _HostFile, path: Path, place: tuple[str, ...], syntax: str = "JSON"
) -> dict[str, Any]:
    servers: Any = current.data
    for depth, key in enumerate(place, 1):
        servers = servers.get(key, {})
        if not isinstance(servers, dict):
            raise InstallError(
                f"{str(path)!r}: {_label(place[:depth])!r} is a {syntax} "
                f"{type(servers).__name__}, not an object of servers; fix it or move the file "
                "away; nothing was written"
            )
    return servers


def _nested(data: dict[str, Any], place: tuple[str, ...], value: Any) -> dict[str, Any]:
    """``data`` with ``value`` at ``place`` (objects on the way kept, or created)."""
    head, *rest = place
    below = data.get(head)
    inner = _nested(below if isinstance(below, dict) else {}, tuple(rest), value) if rest else value
    return {**data, head: inner}


def _new_text(
    path: Path,
    current: _HostFile,
    host: _Host,
    name: str,
    servers: dict[str, Any],
    place: tuple[str, ...],
) -> tuple[str, bool]:
    """The file with ``servers`` as its servers object (at ``place``), and whether it keeps
    every comment the file had. Only what changes is edited: a JSONC file in place (when that
    fails, it becomes plain JSON), a TOML file table by table."""
    key = host.servers_key
    merged = _nested(current.data, place, servers)
    if host.format == "toml":
        toml = _toml_text(path, current.text or "", key, servers, merged)
        return toml, _comment_lines(toml) >= _comment_lines(current.text or "")
    plain = json.dumps(merged, indent=2, ensure_ascii=False) + "\n"
    if current.text is None or not current.jsonc:
        return plain, True
    before = _jsonc.comments(current.text)
    others = {n: e for n, e in current.data.get(key, {}).items() if n != name}
    if {n: e for n, e in servers.items() if n != name} == others:
        edited = _jsonc.set_entry(current.text, key, name, servers[name], merged)
    else:
        edited = _jsonc.set_member(current.text, key, servers, merged)
    if edited is None:
        return plain, before == 0
    after = _jsonc.comments(edited)
    return edited, before is not None and after is not None and after >= before


def _comment_lines(text: str) -> int:
    return sum(line.lstrip().startswith("#") for line in text.splitlines())


# A table header line: [a.b] or [[a.b]], then perhaps a comment.
def _toml_text(
    path: Path, text: str, key: str, servers: dict[str, Any], expected: dict[str, Any]
) -> str:
    edited = _toml.edited_text(text, key, servers, expected)
    if edited is None:
        raise InstallError(
            f"cannot write the servers of {str(path)!r} without changing its other settings; "
            "add the entry by hand (install --dry-run prints it); nothing was written"
        )
    return edited


@dataclass(frozen=True)
class FileChange:
    """One file to write: its text before (None: a new file) and after."""

    path: Path
    before: str | None
    after: str

    def diff(self) -> str:
        """The change as a unified diff."""
        lines = difflib.unified_diff(
            (self.before or "").splitlines(keepends=True),
            self.after.splitlines(keepends=True),
            "/dev/null" if self.before is None else str(self.path),
            str(self.path),
        )
        return "".join(line if line.endswith("\n") else line + "\n" for line in lines)


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


def _write(changes: Iterable[FileChange], private: Iterable[Path] = ()) -> dict[Path, Path]:
    """Write each change in order, an existing file backed up first; the backups by file.
    The ``private`` files (they hold secrets) and their backups are readable by their owner
    only, whatever mode they had."""
    backups: dict[Path, Path] = {}
    private = set(private)
    for change in changes:
        if change.before is not None:
            backups[change.path] = _backup_path(change.path)
            shutil.copy2(change.path, backups[change.path])
            if change.path in private:
                backups[change.path].chmod(0o600)
        _write_atomically(change.path, change.after)
        if change.path in private:
            change.path.chmod(0o600)
    return backups


def _target(
    client: Client, path: Path | None, scope: Scope | None
) -> tuple[_Host, Path, tuple[str, ...]]:
    if client not in CLIENTS:
        raise InstallError(f"unknown client {client!r}; choose one of {', '.join(CLIENTS)}")
    target = (path or default_path(client, scope)).expanduser().absolute()
    # A file named with --path has its servers at the top, unless --scope local says not.
    place = servers_place(client, scope) if path is None or scope == "local" else None
    return _HOSTS[client], target, place or (_HOSTS[client].servers_key,)


def _plan(
    client: Client,
    target: Path,
    place: tuple[str, ...],
    current: _HostFile,
    name: str,
    entry: dict[str, Any],
    *,
    only: bool,
    dry_run: bool,
) -> tuple[InstallResult, FileChange | None]:
    """The broker's entry merged into the host file (``only``: as its one server)."""
    host = _HOSTS[client]
    servers = _servers_of(current, target, place, host.syntax)
    wanted = {name: entry} if only else {**servers, name: entry}
    action: Action = (
        "added" if name not in servers else "unchanged" if servers[name] == entry else "replaced"
    )
    result = InstallResult(
        client, target, host.servers_key, name, entry, action, None, dry_run, place=place
    )
    if wanted == servers:
        return result, None
    text, comments_kept = _new_text(target, current, host, name, wanted, place)
    return replace(result, comments_kept=comments_kept), FileChange(target, current.text, text)


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
    host, target, place = _target(client, path, scope)
    entry = server_entry(client, config, command, env)
    current = _read_host_file(target, host)
    result, change = _plan(client, target, place, current, name, entry, only=False, dry_run=dry_run)
    if change is None or dry_run:
        return result
    return replace(result, backup=_write([change]).get(target))


@dataclass(frozen=True)
class ImportResult:
    """What ``import_servers`` did (or, with ``dry_run``, would do)."""

    host: InstallResult
    moved: tuple[str, ...]  # the servers now in the servers file
    config: Path
    servers_file: Path
    changes: tuple[FileChange, ...]  # in the order written: servers file, config, host file
    backups: Mapping[Path, Path]
    entries: Mapping[str, Any]  # the moved servers' entries, as the servers file holds them
    project: bool = False  # the host file belongs to a project: a person must agree first
    pins: Path | None = None  # the pin file checking them will create (None: it exists)
    git_tree: Path | None = None  # the git working tree the servers file is in, unignored
    looked: str = ""  # with nothing moved: each file of the host looked at, and what it lists

    def review(self) -> str:
        """The servers that would move, each with the full command the broker would run."""
        where = "a project's file" if self.project else "the host's file"
        count = f"{len(self.moved)} server{'' if len(self.moved) == 1 else 's'}"
        return "\n".join(
            [
                f"{self.host.where} ({where}) lists {count} the broker would start:",
                *review_lines(self.entries),
            ]
        )

    def warnings(self) -> list[str]:
        """What a person should know about where the servers' secrets land."""
        if self.git_tree is None or not self.moved:
            return []
        return [
            f"warning: {self.servers_file} holds the moved servers' env and headers and is in "
            f"the git working tree {self.git_tree}, not ignored there: add {SERVERS_FILE} to "
            "its .gitignore, or keep the broker config outside the repository"
        ]

    def diff(self) -> str:
        """Every file's change, as unified diffs (what ``--dry-run`` prints)."""
        return "".join(change.diff() for change in self.changes)

    def describe(self) -> str:
        """Lines for a person: what moved where, what to run next, and how to undo it."""
        if not self.moved:
            return f"{self.looked}; {self.host.describe()}"
        verb = "would move" if self.host.dry_run else "moved"
        count = f"{len(self.moved)} server{'' if len(self.moved) == 1 else 's'}"
        lines = [
            f"{verb} {count} from {self.host.where} to {self.servers_file}; the broker starts "
            'them, each chosen per request (include "agent"); the broker\'s own entry is not '
            "copied:",
            *review_lines(self.entries),
            *(self._line(change) for change in self.changes),
            *self.warnings(),
        ]
        if self.host.dry_run:
            return "\n".join([*lines, "nothing was written; the changes are shown above"])
        host = _HOSTS[self.host.client].label
        undo = [
            f"mv {shlex.quote(str(self.backups[c.path]))} {shlex.quote(str(c.path))}"
            if c.path in self.backups
            else f"rm {shlex.quote(str(c.path))}"
            for c in reversed(self.changes)
        ]
        if self.pins is not None:
            undo.append(f"rm -f {shlex.quote(str(self.pins))}")
        check = shlex.join([*broker_command(), "check", "--config", str(self.config)])
        return "\n".join(
            [
                *lines,
                f"next: {check} (it starts the servers above), then restart {host}",
                f"to undo: {'; '.join(undo)}",
            ]
        )

    def _line(self, change: FileChange) -> str:
        if change.path == self.host.path:
            what = f"lists only {self.host.name!r}"
            if not self.host.comments_kept:
                what += " (comments among the moved entries go with them; the backup keeps them)"
        elif change.path == self.config:
            what = f"reads its servers from {SERVERS_FILE} (mcp_servers_file)"
        else:
            what = "holds them"
        if change.path in self.backups:
            return f"{change.path} {what}; the previous file is kept as {self.backups[change.path]}"
        if change.before is None:
            return f"{change.path} {what} (a new file)"
        return f"{change.path} {what}"


def _from_codex(entry: Mapping[str, Any]) -> dict[str, Any]:
    """A Codex server as the servers file has it: ``http_headers``, ``env_http_headers`` and
    ``bearer_token_env_var`` become ``headers`` (variables as ``${env:NAME}``)."""
    out = dict(entry)
    headers = dict(out.pop("http_headers", None) or {})
    for header, variable in (out.pop("env_http_headers", None) or {}).items():
        headers[header] = f"${{env:{variable}}}"
    token = out.pop("bearer_token_env_var", None)
    if token:
        headers["Authorization"] = f"Bearer ${{env:{token}}}"
    if headers:
        out["headers"] = headers
    return out


def _movable(client: Client, path: Path, servers: Mapping[str, Any], name: str) -> dict[str, Any]:
    """The host's servers as the servers file will hold them, each checked as the broker
    reads it; the broker's own entries (``name``, or any that starts a broker) left out."""
    found = {
        n: (_from_codex(e) if client == "codex" else dict(e)) if isinstance(e, dict) else e
        for n, e in servers.items()
        if n != name  # replaced by the entry install writes
    }
    for entry in found.values():
        cwd = entry.get("cwd") if isinstance(entry, dict) else None
        if isinstance(cwd, str) and not cwd.startswith(("~", "$")) and not Path(cwd).is_absolute():
            entry["cwd"] = str(path.parent / cwd)  # the broker read it relative to the host file
    try:
        checked = parse_servers({"mcpServers": found}, source=str(path))
    except GatewayError as exc:
        raise InstallError(
            f"{exc}; fix the entry or move it away, then run install --import again; nothing "
            "was written"
        ) from None
    return {n: found[n] for n, cfg in checked.items() if not is_broker_command(cfg)}


def _servers_change(
    config: Path, host: _Host, host_file: Path, moved: dict[str, Any]
) -> FileChange | None:
    """The servers file beside ``config`` with ``moved`` added; refused when the config
    already reads servers from another file than that one or the host's."""
    copy = config.parent / SERVERS_FILE
    if copy.resolve() == host_file.resolve():
        raise InstallError(
            f"{str(host_file)!r} is the servers file --import would move its servers into; "
            "pass a --config in another folder; nothing was written"
        )
    if config.is_file():
        loaded = load_config(config)
        if loaded.mcp_servers_file is not None:
            reads = loaded.resolve(loaded.mcp_servers_file)
            if reads.resolve() not in (copy.resolve(), host_file.resolve()):
                raise InstallError(
                    f"{str(config)!r} already reads servers from {str(reads)!r} "
                    "(mcp_servers_file), which --import would replace; move its servers into "
                    f"the host's file, or take mcp_servers_file out of {config.name}, then run "
                    "install --import again; nothing was written"
                )
    current = _read_host_file(copy, _HOSTS["generic"])
    own = "mcpServers" if host.format == "toml" else host.servers_key  # JSON, as the broker reads
    key = next((k for k in ("mcpServers", "servers") if k in current.data), own)
    servers = {**_servers_of(current, copy, (key,)), **moved}
    after = json.dumps({**current.data, key: servers}, indent=2, ensure_ascii=False) + "\n"
    return None if after == current.text else FileChange(copy, current.text, after)


def _config_change(config: Path, host_file: Path) -> FileChange | None:
    """The broker config with ``mcp_servers_file`` naming the servers file beside it: a
    top-level key, so it goes before the first table; the rest of the file is kept."""
    _check_target(config)
    before = config.read_text(encoding="utf-8") if config.is_file() else None
    if before is None:
        after = (
            f"# The servers `context-broker install --import` moved from {host_file}:\n"
            "# the broker starts them, each chosen per request.\n"
            f"mcp_servers_file = {json.dumps(SERVERS_FILE)}\n"
        )
        return FileChange(config, None, after)
    document = tomlkit.parse(before)
    if document.get("mcp_servers_file") == SERVERS_FILE:
        return None
    if "mcp_servers_file" in document:
        document["mcp_servers_file"] = SERVERS_FILE
    else:
        value = tomlkit.item(SERVERS_FILE)
        value.comment(f"the servers install --import moved from {host_file}")
        document["mcp_servers_file"] = value
    after = document.as_string()
    if tomllib.loads(after) != {**tomllib.loads(before), "mcp_servers_file": SERVERS_FILE}:
        raise InstallError(
            f"cannot add mcp_servers_file to {str(config)!r} without changing its other "
            f'settings; add mcp_servers_file = "{SERVERS_FILE}" above its first table by hand; '
            "nothing was written"
        )
    return FileChange(config, before, after)


def import_servers(
    client: Client,
    config: Path,
    *,
    path: Path | None = None,
    scope: Scope | None = None,
    name: str = "context-broker",
    dry_run: bool = False,
    command: list[str] | None = None,
    env: Mapping[str, str] | None = None,
    approved: Mapping[str, Any] | None = None,
) -> ImportResult:
    """Move the host's servers behind the broker: into the servers file beside ``config``
    (created, or merged), which ``config`` (created when missing) reads as its
    ``mcp_servers_file``; the host's file then lists only the broker. Every file is backed
    up before it changes; the host's file is written last; the servers file is private to
    its owner (it holds the servers' env and headers).

    ``approved``: the entries a person agreed to (from a dry run's ``entries``); when the
    host's file lists others by now, nothing is written. With nothing to move and no broker
    config, the error says which files of the host were looked at and what each lists."""
    host, target, place = _target(client, path, scope)
    config = config.expanduser().absolute()
    current = _read_host_file(target, host)
    moved = _movable(client, target, _servers_of(current, target, place, host.syntax), name)
    _same_as_shown(target, moved, approved)
    if not moved and not config.is_file():
        raise InstallError(
            f"{_nothing_found(client, target, place, scope, name)}; nothing was written (the "
            f"broker config {str(config)!r} is created only when servers move into it)"
        )
    if config.is_file() or not moved:
        entry = server_entry(client, config, command, env)
    else:  # the config is written below, with only the servers file in it
        entry = _entry(client, config, command, env)
    changes: list[FileChange] = []
    copy = config.parent / SERVERS_FILE
    if moved:
        copied = _servers_change(config, host, target, moved)
        changes = [c for c in (copied, _config_change(config, target)) if c is not None]
    result, host_change = _plan(
        client, target, place, current, name, entry, only=True, dry_run=dry_run
    )
    if host_change is not None:
        changes.append(host_change)
    pins = _new_pin_file(config)
    backups = {} if dry_run else _write(changes, private=[copy])
    return ImportResult(
        replace(result, backup=backups.get(target)),
        tuple(moved),
        config,
        copy,
        tuple(changes),
        backups,
        entries=moved,
        project=_of_a_project(host, scope, path, target),
        pins=pins,
        git_tree=git_tree_of(copy) if moved else None,
        looked="" if moved else _nothing_found(client, target, place, scope, name),
    )


def _same_as_shown(target: Path, moved: Mapping[str, Any], shown: Mapping[str, Any] | None) -> None:
    """Refuse to move other servers than the ones a person agreed to."""
    if shown is not None and moved != shown:
        raise InstallError(
            f"{str(target)!r} changed since its servers were shown; run install --import "
            "again to see them; nothing was written"
        )


def _of_a_project(host: _Host, scope: Scope | None, path: Path | None, target: Path) -> bool:
    """Whether the host file belongs to the project in the current folder (a cloned
    repository's, say), whose servers the host would ask about before starting them."""
    if path is not None:
        return is_project_file(target, Path.cwd(), Path.home())
    return (scope or host.scope) == "project"


def _new_pin_file(config: Path) -> Path | None:
    """The pin file the broker of ``config`` will create on its first start (None: there is
    one already, which may hold other servers' pins)."""
    loaded = load_config(config) if config.is_file() else AppConfig(base_dir=config.parent)
    pins = loaded.resolve(loaded.gateway.pin_file)
    return None if pins.exists() else pins


def _found(client: Client, path: Path, place: tuple[str, ...], name: str) -> str:
    """What one host file holds, for a person: missing, unreadable, or its servers."""
    if not path.exists():
        return f"{path} does not exist"
    try:
        servers = _servers_of(_read_host_file(path, _HOSTS[client]), path, place)
    except InstallError as exc:
        return f"{path} cannot be read ({exc})"
    where = f"{path} ({_label(place)})" if len(place) > 1 else str(path)
    others = [n for n in servers if n != name]
    if not others:
        return f"{where} lists no servers" + (" besides the broker" if name in servers else "")
    count = f"{len(others)} server{'' if len(others) == 1 else 's'}"
    return f"{where} lists {count}: {', '.join(others)}"


def _nothing_found(
    client: Client,
    target: Path,
    place: tuple[str, ...],
    scope: Scope | None,
    name: str,
) -> str:
    """Why ``--import`` has nothing to move: each file of the host looked at, and what each
    lists; with the option that reads another one that lists servers."""
    used = scope or _HOSTS[client].scope
    looked = [f"{_found(client, target, place, name)} (the file read)"]
    for other in SCOPES[client]:
        if other == used:
            continue
        path, where = default_path(client, other), servers_place(client, other)
        found = _found(client, path, where, name)
        listed = " lists " in found and "lists no servers" not in found
        hint = f"; pass --scope {other} to import them" if listed else ""
        looked.append(f"{found} ({other} scope{hint})")
    return f"nothing to import: {'; '.join(looked)}"
