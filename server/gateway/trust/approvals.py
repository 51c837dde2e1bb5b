"""``context-broker tools status|approve``: review and approve held-back downstream tools.

Both work on the pin file alone (no downstream server is started): a running broker or
``context-broker check`` records what it holds back there, and a running broker picks up an
approval within ``pin_poll`` seconds.

An approval is bound to what the person reviewed: ``status`` shows each pending definition's
hash, ``approve`` takes it (``SERVER/TOOL --hash PREFIX`` or ``SERVER/TOOL@PREFIX``; a whole
server takes one ``--hash`` per tool) and approves nothing if a pending definition no longer
matches. Without a hash it approves nothing and shows the hashes and the command to run.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from context_broker.server.settings import load_config
from context_broker.server.version import broker_program

from ..errors import PinFileError
from .gate import approve_hint
from .pins import PinStore

__all__ = ["approve_tools", "field_changes", "pin_file_of", "tools_status"]

_PREVIEW = 300
_SHOWN_HASH = 12
_MIN_HASH = 8
_MAX_CHANGES = 30
_VALUE_CHARS = 120
_HEX = re.compile(r"[0-9a-f]+")
_PLAIN_KEY = re.compile(r"[A-Za-z0-9_$-]+")


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


# -- status ----------------------------------------------------------------------------------


def tools_status(
    path: Path,
    *,
    as_json: bool = False,
    where: str = "--config FILE",
    program: str = "context-broker",
) -> str:
    """What is waiting for approval in the pin file at ``path``, as text or JSON; each entry
    with what changed since its approved definition, field by field. ``where`` is the
    ``--config``/``--pin-file`` option the printed commands repeat, ``program`` the command
    they start with."""
    store = PinStore(path)
    pending = store.pending()
    if as_json:
        rows = {
            server: {
                tool: {**entry, "changes": _changes_of(store, server, tool, entry)}
                for tool, entry in tools.items()
            }
            for server, tools in pending.items()
        }
        return json.dumps({"pinFile": str(path), "pending": rows}, indent=2)
    if not pending:
        return f"pin file {path}: nothing is waiting for approval"
    lines = [f"pin file {path}: waiting for approval:"]
    for server, tools in pending.items():
        for tool, entry in tools.items():
            lines += _entry_lines(server, tool, entry, _changes_of(store, server, tool, entry))
            hint = approve_hint(server, tool, entry.get("sha256"), where, program)
            lines.append(f"    approve: {hint}")
        if len(tools) > 1:
            hashes = " ".join(f"--hash {_short(e.get('sha256'))}" for e in tools.values())
            lines.append(
                f"  approve all {len(tools)} of {server}: "
                f"{program} tools approve {server} {hashes} {where}"
            )
    lines.append(
        "an approval names the hash shown: if the definition changes before you approve it, "
        "nothing is approved and `tools status` shows the new one"
    )
    return "\n".join(lines)


def _short(sha256: object) -> str:
    return str(sha256 or "")[:_SHOWN_HASH]


def _changes_of(store: PinStore, server: str, tool: str, entry: dict[str, Any]) -> list[str]:
    pin = store.pin(server, tool)
    new = entry.get("definition")
    if not isinstance(new, dict):
        return []
    if pin is None:
        return ["new tool (no approved definition)"]
    if pin.definition is None:
        return [
            "approved definition not on record (a pin from an older broker); every field is "
            "shown as added",
            *field_changes({}, new),
        ]
    changes = field_changes(pin.definition, new)
    return changes or ["changed only in characters that are not shown (hidden or control)"]


def field_changes(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    """What differs from ``old`` to ``new``, one line per field by dotted path
    (``annotations.readOnlyHint: false -> true``, ``_meta: added {...}``); values as
    ASCII-escaped JSON, so nothing from outside reaches a terminal raw."""
    out: list[str] = []
    stack: list[tuple[str, dict[str, Any], dict[str, Any]]] = [("", old, new)]
    while stack:
        prefix, before, after = stack.pop()
        for key in sorted(set(before) | set(after), reverse=True):
            path = prefix + _key(key)
            if key not in before:
                out.append(f"{path}: added {_value(after[key])}")
            elif key not in after:
                out.append(f"{path}: removed (was {_value(before[key])})")
            elif isinstance(before[key], dict) and isinstance(after[key], dict):
                stack.append((path + ".", before[key], after[key]))
            elif before[key] != after[key]:
                out.append(f"{path}: {_value(before[key])} -> {_value(after[key])}")
    out.sort()
    if len(out) > _MAX_CHANGES:
        out = [*out[:_MAX_CHANGES], f"... and {len(out) - _MAX_CHANGES} more changes"]
    return out


def _key(key: str) -> str:
    return key if _PLAIN_KEY.fullmatch(key) else json.dumps(key)


def _value(value: Any) -> str:
    text = json.dumps(value, sort_keys=True, ensure_ascii=True)
    return text if len(text) <= _VALUE_CHARS else text[: _VALUE_CHARS - 1] + "…"


def _entry_lines(server: str, tool: str, entry: dict[str, Any], changes: list[str]) -> list[str]:
    definition = entry.get("definition", {})
    description = str(definition.get("description") or "")
    if len(description) > _PREVIEW:
        description = description[: _PREVIEW - 1] + "…"
    lines = [f"  {server}/{tool} (sha256 {_short(entry.get('sha256'))})"]
    lines += [f"    held: {reason}" for reason in entry.get("reasons", [])]
    lines += [f"    changed: {change}" for change in changes]
    lines.append(f"    description: {description!r}")
    params = definition.get("inputSchema", {}).get("properties", {})
    if isinstance(params, dict) and params:
        lines.append(f"    parameters: {', '.join(sorted(params))}")
    return lines


# -- approve ---------------------------------------------------------------------------------


def approve_tools(
    path: Path,
    target: str,
    hashes: Sequence[str] = (),
    *,
    where: str = "--config FILE",
    program: str = "context-broker",
) -> str:
    """Approve what ``target`` (``SERVER``, ``SERVER/TOOL`` or ``SERVER/TOOL@HASH``) names,
    only if each pending definition's sha256 starts with the ``hashes`` given for it (the
    commands an error names start with ``program``)."""
    name, _, at = target.partition("@")
    server, _, tool = name.partition("/")
    if not server or (at and not tool):
        raise PinFileError(
            f"cannot approve {target!r}: give SERVER, SERVER/TOOL or SERVER/TOOL@HASH"
        )
    prefixes = [_prefix(h) for h in ([at] if at else []) + list(hashes)]
    if tool and len(prefixes) > 1:
        raise PinFileError(f"cannot approve {target!r}: give one hash for one tool")

    def choose(waiting: dict[str, dict[str, Any]]) -> list[str]:
        if not waiting or (tool and tool not in waiting):
            raise _nothing_waiting(path, name, waiting, server)
        if tool:
            return _choose_tool(server, tool, waiting[tool], prefixes, (where, program))
        return _choose_server(server, waiting, prefixes, (where, program))

    approved = PinStore(path).approve(server, choose)
    lines = [f"approved {server}/{t} (sha256 {_short(digest)})" for t, digest in approved]
    left = [t for t in PinStore(path).pending().get(server, {})]
    if left:
        lines.append(f"still waiting for approval: {', '.join(f'{server}/{t}' for t in left)}")
    lines.append(f"pins written to {path}; a running broker lists the approved tools shortly")
    return "\n".join(lines)


def _prefix(raw: str) -> str:
    text = raw.strip().lower()
    if len(text) < _MIN_HASH or not _HEX.fullmatch(text):
        raise PinFileError(
            f"hash {raw!r} is not a sha256 prefix: give at least {_MIN_HASH} hex digits as "
            f"`{broker_program()} tools status` shows them"
        )
    return text


def _choose_tool(
    server: str, tool: str, entry: dict[str, Any], prefixes: list[str], how: tuple[str, str]
) -> list[str]:
    where, program = how
    digest = str(entry.get("sha256", ""))
    if not prefixes:
        raise PinFileError(
            f"nothing approved: approving {server}/{tool} needs the hash of the definition you "
            f"reviewed; it is now sha256 {_short(digest)} (see `{program} tools status "
            f"{where}`); if that is what you reviewed, run "
            f"`{approve_hint(server, tool, digest, where, program)}`"
        )
    if not digest.startswith(prefixes[0]):
        raise PinFileError(
            f"nothing approved: the pending definition of {server}/{tool} is now sha256 "
            f"{_short(digest)}, not the {prefixes[0]} you gave (it changed after that review); "
            f"review it again with `{program} tools status {where}`"
        )
    return [tool]


def _choose_server(
    server: str, waiting: dict[str, dict[str, Any]], prefixes: list[str], how: tuple[str, str]
) -> list[str]:
    where, program = how
    listing = "; ".join(
        f"{server}/{t} sha256 {_short(e.get('sha256'))}" for t, e in waiting.items()
    )
    if not prefixes:
        hashes = " ".join(f"--hash {_short(e.get('sha256'))}" for e in waiting.values())
        raise PinFileError(
            f"nothing approved: approving {server} needs the hash of each definition you "
            f"reviewed; waiting now: {listing}; if those are what you reviewed, run "
            f"`{program} tools approve {server} {hashes} {where}`"
        )
    chosen: list[str] = []
    for prefix in prefixes:
        matches = [t for t, e in waiting.items() if str(e.get("sha256", "")).startswith(prefix)]
        if len(matches) != 1:
            raise PinFileError(
                f"nothing approved: hash {prefix} matches {len(matches)} of the definitions "
                f"waiting for {server} (it may have changed after your review); waiting now: "
                f"{listing}; review them again with `{program} tools status {where}`"
            )
        chosen += [m for m in matches if m not in chosen]
    return chosen


def _nothing_waiting(
    path: Path, name: str, waiting: dict[str, dict[str, Any]], server: str
) -> PinFileError:
    others = [f"{server}/{t}" for t in waiting] or [
        f"{s}/{t}" for s, tools in PinStore(path).pending().items() for t in tools
    ]
    return PinFileError(
        f"nothing is waiting for approval for {name!r} in {str(path)!r}; "
        + (
            f"waiting: {', '.join(others)}"
            if others
            else "no change is waiting (a change is recorded when the broker or "
            f"`{broker_program()} check` sees it)"
        )
    )
