"""Reads the servers files hosts already use, so a setup moves behind the broker unchanged.

Shapes understood:

- Claude Desktop / Cursor: ``{"mcpServers": {"name": {"command", "args", "env", "cwd"}}}``;
  remote entries ``{"url", "type": "http" | "sse" | "streamable-http", "headers"}``
  (no ``type``: ``sse`` when the URL path ends in ``/sse``, else Streamable HTTP);
  ``"disabled": true`` turns an entry off.
- VS Code: ``{"servers": {"name": {"type": "stdio" | "http" | "sse", ...}}, "inputs": [...]}``;
  ``//`` and ``/* */`` comments and trailing commas are allowed, as VS Code allows them.

An entry may carry ``"prefix"``, as ``[servers.NAME] prefix`` does (``""``: the server's own
tool and prompt names and resource URIs). Keys a host uses for its own purposes
(``alwaysAllow``, ``envFile``, ...) are ignored. Values keep
their ``${env:NAME}`` references; the gateway expands them when it connects.

A host's file usually lists the broker itself. Such an entry (its command is ``context-broker``,
this installation's script, or ``python -m server.cli``) is kept but disabled with a warning, so
the broker never starts itself. Every stdio child gets ``CONTEXT_BROKER_DEPTH`` (this broker's
depth plus one) in its environment: a broker that finds the marker disables every downstream
that is a broker, and one two levels down (a broker the name check missed) starts none at all.
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from server.settings import AppConfig, DownstreamConfig

from .errors import GatewayError, ServersFileError
from .naming import prefix_problem

__all__ = [
    "DEPTH_ENV",
    "PrefixClashError",
    "broker_depth",
    "is_broker_command",
    "load_servers_file",
    "parse_servers",
    "resolve_servers",
]

log = logging.getLogger(__name__)

DEPTH_ENV = "CONTEXT_BROKER_DEPTH"
"""Set in every stdio child's environment: how many brokers are above it."""
_BROKER_NAMES = frozenset({"context-broker", "mcp-context-broker"})
_BROKER_MODULE = "server.cli"
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
_COMMENTS = re.compile(r'"(?:\\.|[^"\\])*"|//[^\n]*|/\*.*?\*/', re.DOTALL)
_TRAILING_COMMAS = re.compile(r'"(?:\\.|[^"\\])*"|,(?=\s*[}\]])')


def _strip_jsonc(text: str) -> str:
    keep = lambda m: m.group(0) if m.group(0).startswith('"') else ""  # noqa: E731
    return _TRAILING_COMMAS.sub(keep, _COMMENTS.sub(keep, text))


def _entry(name: str, raw: Mapping[str, Any], source: str) -> DownstreamConfig:
    where = f"{source}: server {name!r}"
    kind = raw.get("type") or raw.get("transport")
    url = raw.get("url") or raw.get("serverUrl")
    if kind is not None:
        if not isinstance(kind, str) or kind.lower() not in _TRANSPORTS:
            raise ServersFileError(
                f"{where}: unknown type {kind!r}; use stdio, http or sse", server=name
            )
        kind = _TRANSPORTS[kind.lower()]
    elif isinstance(url, str):
        kind = "sse" if url.rstrip("/").endswith("/sse") else "http"
    data: dict[str, Any] = {"transport": kind, "enabled": not raw.get("disabled", False)}
    for key in ("command", "args", "env", "cwd", "headers", "prefix"):
        if raw.get(key) is not None:
            data[key] = raw[key]
    if url is not None:
        data["url"] = url
    try:
        return DownstreamConfig.model_validate(data)
    except ValidationError as exc:
        # Only field names and messages: values may hold secrets.
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or 'entry'}: {e['msg']}" for e in exc.errors()
        )
        raise ServersFileError(f"{where}: {problems}", server=name) from None


def parse_servers(data: Any, *, source: str = "servers file") -> dict[str, DownstreamConfig]:
    """Downstream configs from a parsed servers file of any supported shape."""
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
    for name, raw in table.items():
        if not isinstance(raw, Mapping):
            raise ServersFileError(f"{source}: server {name!r} must be an object", server=name)
        out[str(name)] = _entry(str(name), raw, source)
    return out


def load_servers_file(path: Path) -> dict[str, DownstreamConfig]:
    """Read a servers file; relative ``cwd`` values resolve against its folder."""
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
    servers = parse_servers(data, source=str(path))
    for name, cfg in servers.items():
        if cfg.cwd is not None and not cfg.cwd.is_absolute():
            servers[name] = cfg.model_copy(update={"cwd": (path.parent / cfg.cwd).resolve()})
    return servers


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
    installation's script under any name, ``python -m server.cli``, or one of those behind a
    launcher such as ``uv run`` or ``uvx``."""
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
        if arg.startswith("-m") and module == [_BROKER_MODULE]:
            return True
        if not arg.startswith("-") and (_program(arg) in _BROKER_NAMES or _is_own_script(arg, own)):
            return True
    return False


class PrefixClashError(GatewayError):
    """Two downstream servers, or a server and the broker, would expose the same names."""


def _disable(name: str, cfg: DownstreamConfig, why: str) -> DownstreamConfig:
    log.warning("downstream %r skipped: %s", name, why)
    return cfg.model_copy(update={"enabled": False})


def resolve_servers(
    config: AppConfig, environ: Mapping[str, str] | None = None
) -> dict[str, DownstreamConfig]:
    """Every downstream server of a config: the servers file first, ``[servers.*]`` winning on
    a name clash; relative ``cwd`` values of config tables resolve against the config folder.

    Entries that would start a broker where that is not allowed come back disabled, each with
    a warning (see the module docstring); ``environ`` (default ``os.environ``) holds the marker.
    Servers whose prefixes would expose the same names are refused (``PrefixClashError``).
    """
    depth = broker_depth(os.environ if environ is None else environ)
    merged: dict[str, DownstreamConfig] = {}
    if config.mcp_servers_file is not None:
        for name, cfg in load_servers_file(config.resolve(config.mcp_servers_file)).items():
            if cfg.enabled and is_broker_command(cfg):
                cfg = _disable(
                    name,
                    cfg,
                    f"it starts the context broker itself (command {cfg.command!r} in "
                    f"{str(config.mcp_servers_file)!r}); a broker never imports itself from a "
                    "servers file, chain another broker with a [servers.NAME] table if you "
                    "really mean to",
                )
            merged[name] = cfg
    for name, cfg in config.servers.items():
        if cfg.cwd is not None and not cfg.cwd.is_absolute():
            cfg = cfg.model_copy(update={"cwd": config.resolve(cfg.cwd)})
        merged[name] = cfg
    problem = prefix_problem({name: cfg.prefix for name, cfg in merged.items()})
    if problem is not None:
        raise PrefixClashError(f"downstream servers: {problem}")
    for name, cfg in merged.items():
        if not cfg.enabled:
            continue
        if depth >= 2:
            merged[name] = _disable(
                name,
                cfg,
                f"this broker was started {depth} brokers deep ({DEPTH_ENV}={depth}), so it "
                "starts no downstream servers; remove the broker from the servers it starts",
            )
        elif depth == 1 and is_broker_command(cfg):
            merged[name] = _disable(
                name,
                cfg,
                f"it starts a context broker (command {cfg.command!r}) and this broker was "
                f"itself started by one ({DEPTH_ENV}=1); brokers are chained one level at most",
            )
    return merged
