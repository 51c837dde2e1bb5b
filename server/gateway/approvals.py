"""``context-broker tools status|approve``: review and approve held-back downstream tools.

Both work on the pin file alone (no downstream server is started): a running broker or
``context-broker check`` records what it holds back there, and a running broker picks up an
approval within ``pin_poll`` seconds.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from server.settings import load_config

from .errors import PinFileError
from .pins import PinStore
from .trust import approve_hint

__all__ = ["approve_tools", "pin_file_of", "tools_status"]

_PREVIEW = 300


def pin_file_of(config: Path | None, pin_file: Path | None) -> Path:
    """The pin file named by ``--pin-file``, or the one ``--config`` configures."""
    if pin_file is not None:
        return pin_file
    if config is None:
        raise PinFileError(
            "no pin file given: pass --config FILE (the broker config whose [gateway] pin_file "
            "to use) or --pin-file PATH"
        )
    loaded = load_config(config)
    return loaded.resolve(loaded.gateway.pin_file)


def tools_status(path: Path, *, as_json: bool = False) -> str:
    """What is waiting for approval in the pin file at ``path``, as text or JSON."""
    store = PinStore(path)
    pending = store.pending()
    if as_json:
        return json.dumps({"pinFile": str(path), "pending": pending}, indent=2)
    if not pending:
        return f"pin file {path}: nothing is waiting for approval"
    lines = [f"pin file {path}: waiting for approval:"]
    for server, tools in pending.items():
        for tool, entry in tools.items():
            lines += _entry_lines(server, tool, entry)
    lines.append(
        "approve one tool with `context-broker tools approve SERVER/TOOL`, or every tool of "
        "a server with `context-broker tools approve SERVER` (same --config or --pin-file)"
    )
    return "\n".join(lines)


def _entry_lines(server: str, tool: str, entry: dict[str, Any]) -> list[str]:
    definition = entry.get("definition", {})
    description = str(definition.get("description") or "")
    if len(description) > _PREVIEW:
        description = description[: _PREVIEW - 1] + "…"
    lines = [f"  {server}/{tool} (sha256 {str(entry.get('sha256', ''))[:12]})"]
    lines += [f"    held: {reason}" for reason in entry.get("reasons", [])]
    lines.append(f"    description: {description!r}")
    params = definition.get("inputSchema", {}).get("properties", {})
    if isinstance(params, dict) and params:
        lines.append(f"    parameters: {', '.join(sorted(params))}")
    lines.append(f"    approve: {approve_hint(server, tool)}")
    return lines


def approve_tools(path: Path, target: str) -> str:
    """Approve the pending definition(s) ``target`` names (``SERVER`` or ``SERVER/TOOL``)."""
    server, _, tool = target.partition("/")
    if not server:
        raise PinFileError(f"cannot approve {target!r}: give SERVER or SERVER/TOOL")
    approved = PinStore(path).approve(server, tool or None)
    lines = [f"approved {server}/{name} (sha256 {digest[:12]})" for name, digest in approved]
    lines.append(f"pins written to {path}; a running broker lists the approved tools shortly")
    return "\n".join(lines)
