"""Reads the servers files hosts already use, so a setup moves behind the broker unchanged.

Shapes understood:

- Claude Desktop / Cursor: ``{"mcpServers": {"name": {"command", "args", "env", "cwd"}}}``;
  remote entries ``{"url", "type": "http" | "sse" | "streamable-http", "headers"}``
  (no ``type``: ``sse`` when the URL path ends in ``/sse``, else Streamable HTTP);
  ``"disabled": true`` turns an entry off.
- VS Code: ``{"servers": {"name": {"type": "stdio" | "http" | "sse", ...}}, "inputs": [...]}``;
  ``//`` and ``/* */`` comments and trailing commas are allowed, as VS Code allows them.

An imported server's tools are chosen per request: its ``include`` is ``"agent"`` unless
it says otherwise. An entry may carry the broker's own server keys, as ``[servers.NAME]``
does: ``include``, ``prefix`` (``""``: the server's own tool and prompt names and resource
URIs), ``trust``, ``enabled``, ``tools``, ``call_policy``, ... (``timeout`` and a boolean
``trust`` are the host's, in the host's units and meaning, and are not read). Keys a host
uses for its own purposes (``alwaysAllow``, ``envFile``, ...) are ignored; any other key is
reported (a warning, and a line of ``check``), never silently dropped. Values keep their
``${env:NAME}`` references; the gateway expands them when it connects.

A ``[servers.NAME]`` table without ``command`` or ``url`` adds its keys to the imported
server ``NAME`` (tables such as ``env``, ``headers`` and ``tools`` key by key); one with
either replaces the entry.

A host's file usually lists the broker itself. Such an entry (its command is ``context-broker``,
this installation's script, or ``python -m context_broker.server.cli``) is kept but disabled
with a warning, so the broker never starts itself. Every stdio child gets
``CONTEXT_BROKER_DEPTH`` (this broker's depth plus one) in its environment: a broker that finds
the marker disables every downstream that is a broker, and one two levels down (a broker the
name check missed) starts none at all.
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from context_broker.server.settings import AppConfig, DownstreamConfig
from pydantic import ValidationError

from .errors import GatewayError, ServersFileError
from .naming.names import prefix_problem

__all__ = [
    "DEPTH_ENV",
    "PrefixClashError",
    "ServerSurvey",
    "broker_depth",
    "is_broker_command",
    "load_servers_file",
    "parse_servers",
    "resolve_servers",
    "survey_servers",
]

log = logging.getLogger(__name__)

DEPTH_ENV = "CONTEXT_BROKER_DEPTH"
"""Set in every stdio child's environment: how many brokers are above it."""
_BROKER_NAMES = frozenset({"context-broker", "mcp-context-broker"})
# The broker run as a module (``-m server.cli``: an install from before the package was named).
_BROKER_MODULES = frozenset({"context_broker.server.cli", "server.cli"})
# Programs that run another program named in their arguments.
_LAUNCHERS = frozenset({"uv", "uvx", "pipx", "pdm", "poetry", "hatch", "rye", "env"})

_TRANSPORTS = {
    "stdio": "stdio",
    "http": "http",
    "streamable-http": "http",
    "streamablehttp": "http",
    "streamable_http": "http",
    "sse": "sse",
}
# What an entry shares with a [servers.NAME] table: how to start or reach the server, and
# the broker's own settings. Not "timeout": hosts use the key in their own units.
_ENTRY_KEYS = frozenset(DownstreamConfig.model_fields) - {"url", "transport", "timeout"}
# Keys hosts keep in an entry for themselves (Claude Desktop, Cursor, VS Code, Cline, Roo,
# Windsurf, Gemini CLI); read as their host means them ("type", "disabled") or not at all.
_HOST_KEYS = frozenset(
    {
        "type",
        "transport",
        "url",
        "serverUrl",
        "disabled",
        "autoApprove",
        "alwaysAllow",
        "timeout",
        "envFile",
        "description",
        "gallery",
        "version",
        "dev",
    }
)
_KEYS_HINT = "include, prefix, trust, enabled, tools, call_policy, record_calls"
_COMMENTS = re.compile(r'"(?:\\.|[^"\\])*"|//[^\n]*|/\*.*?\*/', re.DOTALL)
_TRAILING_COMMAS = re.compile(r'"(?:\\.|[^"\\])*"|,(?=\s*[}\]])')


def _strip_jsonc(text: str) -> str:
    keep = lambda m: m.group(0) if m.group(0).startswith('"') else ""  # noqa: E731
    return _TRAILING_COMMAS.sub(keep, _COMMENTS.sub(keep, text))


def _transport(name: str, raw: Mapping[str, Any], where: str) -> str | None:
    kind = raw.get("type") or raw.get("transport")
    url = raw.get("url") or raw.get("serverUrl")
    if kind is not None:
        if not isinstance(kind, str) or kind.lower() not in _TRANSPORTS:
            raise ServersFileError(
                f"{where}: unknown type {kind!r}; use stdio, http or sse", server=name
            )
        return _TRANSPORTS[kind.lower()]
    if isinstance(url, str):
        return "sse" if url.rstrip("/").endswith("/sse") else "http"
    return None


def _validated(data: Mapping[str, Any], where: str, name: str) -> DownstreamConfig:
    try:
        return DownstreamConfig.model_validate(data)
    except ValidationError as exc:
        # Only field names and messages: values may hold secrets.
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or 'entry'}: {e['msg']}" for e in exc.errors()
        )
        raise ServersFileError(f"{where}: {problems}", server=name) from None


def _entry(name: str, raw: Mapping[str, Any], source: str) -> tuple[DownstreamConfig, list[str]]:
    """One entry's config (``include`` "agent" unless it says otherwise) and a warning for
    each key that is neither the broker's nor a known host's."""
    where = f"{source}: server {name!r}"
    data: dict[str, Any] = {"transport": _transport(name, raw, where), "include": "agent"}
    if raw.get("disabled", False):
        data["enabled"] = False
    url = raw.get("url") or raw.get("serverUrl")
    if url is not None:
        data["url"] = url
    warnings = []
    for key, value in raw.items():
        if key == "trust" and isinstance(value, bool):
            continue  # Gemini CLI's "trust this server" switch, not the broker's trust mode
        if key in _ENTRY_KEYS:
            if value is not None and not (key == "enabled" and data.get("enabled") is False):
                data[key] = value
        elif key not in _HOST_KEYS:
            warnings.append(
                f"{where}: unknown key {key!r} (ignored); the broker reads {_KEYS_HINT}, and "
                f"any server setting in a [servers.{name}] table"
            )
    config = _validated(data, where, name)
    if not config.has_target:
        raise ServersFileError(f"{where}: set 'command' (stdio) or 'url' (http/sse)", server=name)
    return config, warnings


def parse_servers(data: Any, *, source: str = "servers file") -> dict[str, DownstreamConfig]:
    """Downstream configs from a parsed servers file of any supported shape."""
    return _parse(data, source)[0]


def _parse(data: Any, source: str) -> tuple[dict[str, DownstreamConfig], list[str]]:
    """``parse_servers`` and a warning for each key the broker does not read."""
    if not isinstance(data, Mapping):
        raise ServersFileError(f"{source}: expected a JSON object at the top level")
    table = data.get("mcpServers", data.get("servers"))
    if table is None:
        raise ServersFileError(
            f"{source}: no 'mcpServers' (Claude Desktop, Cursor) or 'servers' (VS Code) object"
        )
    if not isinstance(table, Mapping):
        raise ServersFileError(f"{source}: 'mcpServers'/'servers' must be an object of servers")
    out: dict[str, DownstreamConfig] = {}
    warnings: list[str] = []
    for name, raw in table.items():
        if not isinstance(raw, Mapping):
            raise ServersFileError(f"{source}: server {name!r} must be an object", server=name)
        out[str(name)], found = _entry(str(name), raw, source)
        warnings += found
    return out, warnings


def load_servers_file(path: Path) -> dict[str, DownstreamConfig]:
    """Read a servers file; relative ``cwd`` values resolve against its folder, and so do
    relative command paths of entries without ``cwd``."""
    return _load(path)[0]


def _relative_path(command: str | None) -> bool:
    """Whether a command is a relative path (``bin/server``; a bare name is looked up on
    ``PATH``, and ``~`` or ``${env:...}`` are expanded later)."""
    if not command or command.startswith(("~", "$")) or Path(command).is_absolute():
        return False
    return os.sep in command or bool(os.altsep and os.altsep in command)


def _command_from(cfg: DownstreamConfig, folder: Path) -> DownstreamConfig:
    """``cfg`` with a relative command path read from ``folder``, the folder of the file that
    lists it, when it has no ``cwd`` (which a relative command is read from): a host starts
    the broker in a folder of its own choosing. Symbolic links are kept (a virtual
    environment's ``python`` must stay the link)."""
    if cfg.cwd is not None or not _relative_path(cfg.command):
        return cfg
    return cfg.model_copy(update={"command": os.path.normpath(folder / str(cfg.command))})


def _load(path: Path) -> tuple[dict[str, DownstreamConfig], list[str]]:
    """``load_servers_file`` and a warning for each key the broker does not read."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ServersFileError(f"cannot read servers file {str(path)!r}: {exc.strerror}") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        try:
            data = json.loads(_strip_jsonc(text))
        except json.JSONDecodeError as exc:
            raise ServersFileError(
                f"{path}: not valid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}"
            ) from None
    servers, warnings = _parse(data, str(path))
    folder = path.absolute().parent
    for name, cfg in servers.items():
        if cfg.cwd is not None and not cfg.cwd.is_absolute():
            cfg = cfg.model_copy(update={"cwd": (path.parent / cfg.cwd).resolve()})
        servers[name] = _command_from(cfg, folder)
    return servers, warnings


def broker_depth(environ: Mapping[str, str]) -> int:
    """How many brokers started this process (0: none); a garbled marker counts as 1."""
    raw = environ.get(DEPTH_ENV)
    if raw is None:
        return 0
    try:
        return max(1, int(raw))
    except ValueError:
        return 1


def _program(token: str) -> str:
    name = token.replace("\\", "/").rsplit("/", 1)[-1].lower()
    for suffix in (".exe", ".cmd", ".bat"):
        name = name.removesuffix(suffix)
    return name


def _own_scripts() -> set[Path]:
    found = {Path(sys.executable).parent / "context-broker"}
    which = shutil.which("context-broker")
    if which:
        found.add(Path(which))
    if _program(sys.argv[0]) in _BROKER_NAMES:
        found.add(Path(sys.argv[0]))
    return {p.resolve() for p in found if p.exists()}


def _is_own_script(token: str, own: set[Path]) -> bool:
    where = shutil.which(token) if "/" not in token else token
    if not where:
        return False
    try:
        return Path(where).expanduser().resolve() in own
    except OSError:
        return False


def is_broker_command(config: DownstreamConfig) -> bool:
    """Whether a stdio entry starts the context broker: ``context-broker`` (any path), this
    installation's script under any name, ``python -m context_broker.server.cli``, or one of
    those behind a launcher such as ``uv run`` or ``uvx``."""
    if config.command is None:
        return False
    own = _own_scripts()
    program = _program(config.command)
    if program in _BROKER_NAMES or _is_own_script(config.command, own):
        return True
    if not (program.startswith("python") or program in _LAUNCHERS):
        return False
    args = list(config.args)
    for i, arg in enumerate(args):
        module = args[i + 1 : i + 2] if arg == "-m" else [arg.removeprefix("-m")]
        if arg.startswith("-m") and module[:1] and module[0] in _BROKER_MODULES:
            return True
        if not arg.startswith("-") and (_program(arg) in _BROKER_NAMES or _is_own_script(arg, own)):
            return True
    return False


class PrefixClashError(GatewayError):
    """Two downstream servers, or a server and the broker, would expose the same names."""


def _disable(name: str, cfg: DownstreamConfig, why: str, warnings: list[str]) -> DownstreamConfig:
    warnings.append(f"downstream {name!r} skipped: {why}")
    return cfg.model_copy(update={"enabled": False})


@dataclass(frozen=True)
class ServerSurvey:
    """Every downstream server of a config (as :func:`resolve_servers` gives them), where each
    was defined (``origins``: ``"config"``, ``"imported from FILE"``, ``"imported from FILE,
    with [servers.NAME]"``), and what a person should hear about them (``warnings``)."""

    servers: dict[str, DownstreamConfig]
    origins: dict[str, str]
    warnings: tuple[str, ...]


def resolve_servers(
    config: AppConfig,
    environ: Mapping[str, str] | None = None,
    *,
    reserved: frozenset[str] = frozenset(),
) -> dict[str, DownstreamConfig]:
    """Every downstream server of a config: the servers file first, then the ``[servers.*]``
    tables (one with ``command`` or ``url`` replaces the entry of its name, one without adds
    its settings to it); relative ``cwd`` values of config tables resolve against the config
    folder, and so do relative command paths of servers without ``cwd``. Imported servers
    are ``include = "agent"`` unless their entry or table says otherwise.

    Entries that would start a broker where that is not allowed come back disabled, each with
    a warning (see the module docstring), as do keys of an entry the broker does not read;
    ``environ`` (default ``os.environ``) holds the marker. Servers whose prefixes would expose
    the same names, or whose prefix begins one of the ``reserved`` names (the broker's own
    tools), are refused (``PrefixClashError``); a table without ``command`` or ``url``
    that names no imported server is refused (``ServersFileError``).
    """
    survey = survey_servers(config, environ, reserved=reserved)
    for warning in survey.warnings:
        log.warning("%s", warning)
    return survey.servers


def survey_servers(
    config: AppConfig,
    environ: Mapping[str, str] | None = None,
    *,
    reserved: frozenset[str] = frozenset(),
) -> ServerSurvey:
    """:func:`resolve_servers` with each server's origin and the warnings, logging nothing."""
    warnings: list[str] = []
    source = str(config.mcp_servers_file) if config.mcp_servers_file is not None else None
    imported: dict[str, DownstreamConfig] = {}
    if config.mcp_servers_file is not None:
        imported, warnings = _load(config.resolve(config.mcp_servers_file))
    merged = dict(imported)
    origins = {name: f"imported from {source}" for name in imported}
    for name, cfg in config.servers.items():
        if cfg.cwd is not None and not cfg.cwd.is_absolute():
            cfg = cfg.model_copy(update={"cwd": config.resolve(cfg.cwd)})
        cfg = _command_from(cfg, config.base_dir)
        if cfg.has_target:
            merged[name] = cfg
            origins[name] = "config" + (
                f" (replaces the entry of {source})" if name in imported else ""
            )
        else:
            merged[name] = _added(name, cfg, imported, source)
            origins[name] += f", with [servers.{name}]"
    for name in imported:
        cfg = merged[name]
        if origins[name].startswith("imported") and cfg.enabled and is_broker_command(cfg):
            why = (
                f"it starts the context broker itself (command {cfg.command!r} in {source!r}); "
                "a broker never imports itself from a servers file, chain another broker with "
                "a [servers.NAME] table if you really mean to"
            )
            merged[name] = _disable(name, cfg, why, warnings)
    problem = prefix_problem({name: cfg.prefix for name, cfg in merged.items()}, reserved)
    if problem is not None:
        raise PrefixClashError(f"downstream servers: {problem}")
    depth = broker_depth(os.environ if environ is None else environ)
    _disable_nested(merged, depth, warnings)
    return ServerSurvey(merged, origins, tuple(warnings))


def _added(
    name: str,
    extra: DownstreamConfig,
    imported: Mapping[str, DownstreamConfig],
    source: str | None,
) -> DownstreamConfig:
    """The imported server ``name`` with a ``[servers.NAME]`` table's keys added."""
    base = imported.get(name)
    if base is None:
        listed = (
            f"the servers it lists: {', '.join(sorted(imported))}" if imported else "it lists none"
        )
        raise ServersFileError(
            f"[servers.{name}] has neither 'command' nor 'url', and {source!r} lists no "
            f"server {name!r} to add its settings to; set 'command' (stdio) or 'url' "
            f"(http/sse), or name one of {listed}",
            server=name,
        )
    data = _merged(base.model_dump(exclude_unset=True), extra.model_dump(exclude_unset=True))
    return _validated(data, f"[servers.{name}] added to server {name!r} of {source}", name)


def _merged(base: Mapping[str, Any], extra: Mapping[str, Any]) -> dict[str, Any]:
    """``base`` with ``extra``'s keys, tables (``env``, ``tools``, ...) merged key by key."""
    out = dict(base)
    for key, value in extra.items():
        below = out.get(key)
        both = isinstance(value, Mapping) and isinstance(below, Mapping)
        out[key] = _merged(below, value) if both else value  # type: ignore[arg-type]
    return out


def _disable_nested(merged: dict[str, DownstreamConfig], depth: int, warnings: list[str]) -> None:
    """Disable, in place, what a broker started by a broker must not start."""
    for name, cfg in merged.items():
        if not cfg.enabled:
            continue
        if depth >= 2:
            merged[name] = _disable(
                name,
                cfg,
                f"this broker was started {depth} brokers deep ({DEPTH_ENV}={depth}), so it "
                "starts no downstream servers; remove the broker from the servers it starts",
                warnings,
            )
        elif depth == 1 and is_broker_command(cfg):
            merged[name] = _disable(
                name,
                cfg,
                f"it starts a context broker (command {cfg.command!r}) and this broker was "
                f"itself started by one ({DEPTH_ENV}=1); brokers are chained one level at most",
                warnings,
            )
