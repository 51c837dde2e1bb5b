"""Reads the servers files hosts already use, so a setup moves behind the broker unchanged.

Shapes understood:

- Claude Desktop / Cursor: ``{"mcpServers": {"name": {"command", "args", "env", "cwd"}}}``;
  remote entries ``{"url", "type": "http" | "sse" | "streamable-http", "headers"}``
  (no ``type``: ``sse`` when the URL path ends in ``/sse``, else Streamable HTTP);
  ``"disabled": true`` turns an entry off.
- VS Code: ``{"servers": {"name": {"type": "stdio" | "http" | "sse", ...}}, "inputs": [...]}``;
  ``//`` and ``/* */`` comments and trailing commas are allowed, as VS Code allows them.

Keys a host uses for its own purposes (``alwaysAllow``, ``envFile``, ...) are ignored. Values keep
their ``${env:NAME}`` references; the gateway expands them when it connects.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from contextcore.config import BrokerConfig, DownstreamConfig

from .errors import ServersFileError

__all__ = ["load_servers_file", "parse_servers", "resolve_servers"]

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
    for key in ("command", "args", "env", "cwd", "headers"):
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


def resolve_servers(config: BrokerConfig) -> dict[str, DownstreamConfig]:
    """Every downstream server of a config: the servers file first, ``[servers.*]`` winning on
    a name clash; relative ``cwd`` values of config tables resolve against the config folder."""
    merged: dict[str, DownstreamConfig] = {}
    if config.mcp_servers_file is not None:
        merged.update(load_servers_file(config.resolve(config.mcp_servers_file)))
    for name, cfg in config.servers.items():
        if cfg.cwd is not None and not cfg.cwd.is_absolute():
            cfg = cfg.model_copy(update={"cwd": config.resolve(cfg.cwd)})
        merged[name] = cfg
    return merged
