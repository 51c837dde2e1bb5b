"""The pin file: each downstream tool's approved definition and its hash, and the changes
waiting for approval.

A JSON file meant to be readable in a diff and checkable into a repository::

    {"version": 2, "servers": {"NAME": {
        "since": "2026-...",   # the server's first listing: tools new after it may be held
        "tools":   {"TOOL": {"sha256": "...", "covers": "definition",
                             "approved": "first-sight" | "user" | "auto", "at": "2026-...",
                             "definition": {the whole definition as shown, cleaned}}},
        "pending": {"TOOL": {"sha256": "...", "reasons": ["..."], "seen": "2026-...",
                             "definition": {the whole definition as shown, cleaned}}}
    }}}

The hash covers the whole tool definition a host sees (title, description, input and output
schemas, annotations, icons, execution, ``_meta``), the name aside since the pin is keyed by
it. Pins written before version 2 (no ``covers``) covered only name, title, description and
input schema; :func:`legacy_digest` still computes that hash so they can be upgraded (see
:mod:`.trust`).

Every write re-reads the file under an exclusive lock and replaces it atomically, so a
running broker and ``context-broker tools approve`` never lose each other's changes.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

import mcp_types as types

from .._files import replace_private
from ..errors import PinFileError

__all__ = [
    "LEGACY_FIELDS",
    "Pin",
    "PinSource",
    "PinStore",
    "definition_digest",
    "legacy_digest",
    "listing_digest",
]

log = logging.getLogger(__name__)

PinSource = Literal["first-sight", "user", "auto"]
_VERSION = 2
# What a version-1 pin covered (besides the name); anything else was never approved by it.
LEGACY_FIELDS = frozenset({"name", "title", "description", "inputSchema"})

try:  # POSIX: serialize writers; elsewhere the atomic replace alone has to do
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]


def _sha256(payload: Any) -> str:
    canonical = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode("utf-8", "surrogatepass")).hexdigest()


def definition_digest(tool: types.Tool) -> str:
    """sha256 of the canonical (sorted-key) JSON of the whole tool definition a host sees,
    name aside, as the downstream sent it (before any cleaning)."""
    return _sha256(tool.model_dump(by_alias=True, mode="json", exclude_none=True, exclude={"name"}))


def listing_digest(definition: Any) -> str:
    """sha256 of the canonical JSON of a prompt, resource or resource template as the
    downstream sent it (its name or URI included: the pin is keyed by kind and that)."""
    return _sha256(definition.model_dump(by_alias=True, mode="json", exclude_none=True))


def legacy_digest(tool: types.Tool) -> str:
    """The hash a version-1 pin holds: name, title, description and input schema only."""
    return _sha256(
        {
            "name": tool.name,
            "title": tool.title,
            "description": tool.description,
            "inputSchema": tool.input_schema,
        }
    )


@dataclass(frozen=True)
class Pin:
    """The approved definition of one tool."""

    sha256: str
    approved: PinSource
    legacy: bool = False  # a version-1 pin: its hash is a legacy_digest
    definition: dict[str, Any] | None = field(default=None, compare=False)  # as shown


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def _pin_row(sha256: str, approved: PinSource, source: Pin | dict[str, Any]) -> dict[str, Any]:
    """A pin's row in the file, with the definition it approves (from a Pin or a pending
    entry) kept for the next review's field-by-field changes."""
    definition = source.definition if isinstance(source, Pin) else source.get("definition")
    row = {"sha256": sha256, "covers": "definition", "approved": approved, "at": _now()}
    return row if definition is None else {**row, "definition": definition}


def _empty() -> dict[str, Any]:
    return {"version": _VERSION, "servers": {}}


class PinStore:
    """Pins and pending changes, kept in a JSON file (or in memory when ``path`` is None)."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self._data = _empty()
        self._stamp: tuple[int, int] | None = None
        if path is not None:
            self._data = self._read()
            self._stamp = self._stat()

    # -- reading ---------------------------------------------------------------------------

    def pin(self, server: str, tool: str) -> Pin | None:
        """The approved definition of ``server``/``tool``, or None if never pinned."""
        row = self._server(self._data, server).get("tools", {}).get(tool)
        if not isinstance(row, dict) or not isinstance(row.get("sha256"), str):
            return None
        source = row.get("approved")
        definition = row.get("definition")
        return Pin(
            row["sha256"],
            source if source in ("first-sight", "user", "auto") else "user",
            legacy=row.get("covers") != "definition",
            definition=definition if isinstance(definition, dict) else None,
        )

    def known(self, server: str) -> bool:
        """Whether ``server`` was listed before (its first listing is behind it)."""
        row = self._server(self._data, server)
        return any(row.get(key) for key in ("since", "tools", "pending"))

    def pending(self) -> dict[str, dict[str, dict[str, Any]]]:
        """Every change waiting for approval: server → tool → entry (see module docstring)."""
        out: dict[str, dict[str, dict[str, Any]]] = {}
        for name, server in sorted(self._data.get("servers", {}).items()):
            waiting = server.get("pending", {}) if isinstance(server, dict) else {}
            if waiting:
                out[name] = dict(sorted(waiting.items()))
        return out

    def changed_on_disk(self) -> bool:
        """Whether the file changed since it was last read or written here; if so, reload."""
        if self.path is None:
            return False
        stamp = self._stat()
        if stamp == self._stamp:
            return False
        self._data = self._read()
        self._stamp = stamp
        return True

    # -- writing ---------------------------------------------------------------------------

    def record(self, server: str, pins: dict[str, Pin], pending: dict[str, dict[str, Any]]) -> None:
        """Set pins and pending entries of one server's tools (a pending entry of None
        clears it); writes only when something changed."""

        def apply(data: dict[str, Any]) -> bool:
            row = data["servers"].setdefault(server, {})
            changed = "since" not in row
            row.setdefault("since", _now())
            for tool, pin in pins.items():
                current = row.get("tools", {}).get(tool, {})
                if (
                    current.get("sha256") != pin.sha256
                    or current.get("approved") != pin.approved
                    or current.get("covers") != "definition"
                ):
                    row.setdefault("tools", {})[tool] = _pin_row(pin.sha256, pin.approved, pin)
                    changed = True
            for tool, entry in pending.items():
                waiting = row.setdefault("pending", {})
                if entry is None:
                    changed = waiting.pop(tool, None) is not None or changed
                elif (
                    waiting.get(tool, {}).get("sha256") != entry["sha256"]
                    or waiting.get(tool, {}).get("reasons") != entry["reasons"]
                ):
                    waiting[tool] = {**entry, "seen": _now()}
                    changed = True
            if not row.get("pending"):
                row.pop("pending", None)
            return changed

        self._update(apply)

    def approve(
        self, server: str, choose: Callable[[dict[str, dict[str, Any]]], list[str]]
    ) -> list[tuple[str, str]]:
        """Approve the pending entries of ``server`` that ``choose`` picks; return the
        ``(tool, sha256)`` pairs approved.

        ``choose`` sees the entries as they are in the file under its lock, so what it checks
        is exactly what gets approved; it raises ``PinFileError`` to approve nothing."""
        approved: list[tuple[str, str]] = []

        def apply(data: dict[str, Any]) -> bool:
            row = self._server(data, server)
            waiting = row.get("pending", {})
            for name in choose(dict(sorted(waiting.items()))):
                entry = waiting.pop(name)
                row.setdefault("tools", {})[name] = _pin_row(entry["sha256"], "user", entry)
                approved.append((name, entry["sha256"]))
            if not waiting:
                row.pop("pending", None)
            return bool(approved)

        self._update(apply)
        return approved

    # -- file handling ---------------------------------------------------------------------

    @staticmethod
    def _server(data: dict[str, Any], server: str) -> dict[str, Any]:
        row = data.get("servers", {}).get(server, {})
        return row if isinstance(row, dict) else {}

    def _update(self, apply: Callable[[dict[str, Any]], bool]) -> None:
        if self.path is None:
            apply(self._data)
            return
        with self._locked():
            data = self._read()
            if apply(data):
                data["version"] = _VERSION
                self._write(data)
            self._data = data
            self._stamp = self._stat()

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        """Hold an exclusive lock on the pin file's folder (no lock file left behind)."""
        assert self.path is not None
        if fcntl is None:
            yield
            return
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path.parent, os.O_RDONLY)
        except OSError as exc:
            raise self._error("cannot lock", exc) from exc
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)  # releases the lock

    def _stat(self) -> tuple[int, int] | None:
        assert self.path is not None
        try:
            st = self.path.stat()
        except OSError:
            return None
        return (st.st_mtime_ns, st.st_size)

    def _read(self) -> dict[str, Any]:
        assert self.path is not None
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return _empty()
        except OSError as exc:
            raise self._error("cannot read", exc) from exc
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise PinFileError(
                f"pin file {str(self.path)!r} is not valid JSON ({exc}); fix it, or delete it "
                "to pin every tool again on first sight"
            ) from exc
        if not isinstance(data, dict) or not isinstance(data.get("servers"), dict):
            raise PinFileError(
                f"pin file {str(self.path)!r} has no 'servers' object; fix it, or delete it to "
                "pin every tool again on first sight"
            )
        return data

    def _write(self, data: dict[str, Any]) -> None:
        assert self.path is not None
        text = json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False) + "\n"
        try:
            replace_private(self.path, text)
        except OSError as exc:
            raise self._error("cannot write", exc) from exc

    def _error(self, what: str, exc: OSError) -> PinFileError:
        return PinFileError(
            f"{what} pin file {str(self.path)!r}: {exc.strerror or exc}; choose a writable "
            "place with [gateway] pin_file"
        )
