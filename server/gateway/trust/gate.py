"""Which downstream tools may be shown and called: pins, trust modes, limits.

Every fresh tool list of a server passes :meth:`ToolGate.admit` before anything else sees it:

1. tools past the server's limit (``max_tools_per_server``) are dropped;
2. each whole definition (name aside) is hashed as sent (:func:`~.pins.definition_digest`),
   then every key and string of it cleaned and clipped (:mod:`.sanitize`) and scanned for
   injection phrasing;
3. the server's ``trust`` mode decides, against the pin file, whether the tool is listed:

   ``pin`` (default)
       a tool of the server's first listing is pinned on first sight; a tool first seen
       later is held until approved (unless ``hold_new_tools = false``, which pins it on
       first sight too); a definition that differs from its pin is held back until a person
       approves it (``context-broker tools approve``).
   ``auto``
       changes are accepted and re-pinned, with a warning in the log.
   ``strict``
       nothing is pinned automatically: a new tool is held until approved, and so is a
       flagged one unless a person approved exactly that definition. Changes are held as
       under ``pin``.

Whatever the mode, a tool whose name holds hidden or control characters is held until a
person approves it (the name cannot be cleaned: calls need it as it is).

A version-1 pin (it covered title, description and input schema only) whose parts still
match is upgraded in place when the definition has nothing beyond them; otherwise the
remaining fields are pinned on first sight under ``pin`` and held for approval under
``strict``.

The pin holds only the approved definition, so a description that flips back and forth is
listed only while it equals the approved one.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar

import mcp_types as types
from context_broker.server.settings import AppConfig, DownstreamConfig
from context_broker.server.version import broker_program
from context_broker.tools.gateway import FlaggedRow, HeldRow, TrustRow

from ..errors import PinFileError
from .pins import (
    LEGACY_FIELDS,
    Pin,
    PinSource,
    PinStore,
    definition_digest,
    legacy_digest,
    listing_digest,
)
from .sanitize import CleanTool, clean_definition, clean_tool

__all__ = [
    "Admission",
    "FlaggedTool",
    "HeldTool",
    "Limits",
    "ToolGate",
    "TrustMode",
    "TrustReport",
    "approve_hint",
]

log = logging.getLogger(__name__)

TrustMode = Literal["pin", "auto", "strict"]
_SHOWN_DROPS = 20
_Row = TypeVar("_Row", types.Prompt, types.Resource, types.ResourceTemplate)
_UNCHECKED = "0" * 64  # the hash of a definition too deep to hash (held whatever it says)


def approve_hint(
    server: str,
    tool: str,
    sha256: str | None = None,
    where: str = "--config FILE",
    program: str | None = None,
) -> str:
    """The command that approves the held definition of ``server``/``tool`` whose hash is
    ``sha256`` (approvals name the hash reviewed); ``program`` starts the broker (default:
    this installation's, by its full path)."""
    digest = (sha256 or "HASH")[:12]
    program = program if program is not None else broker_program()
    return f"{program} tools approve {server}/{tool} --hash {digest} {where}"


@dataclass(frozen=True)
class Limits:
    """Size limits on what one downstream server may put in front of a model."""

    max_description_chars: int = 2_000
    max_tools_per_server: int = 200


@dataclass(frozen=True)
class HeldTool:
    """A tool kept from hosts, the catalog and calls, and why."""

    name: str
    reason: str
    sha256: str


@dataclass(frozen=True)
class FlaggedTool:
    """A tool whose description matches known injection patterns."""

    name: str
    findings: tuple[str, ...]


@dataclass(frozen=True)
class TrustReport:
    """What the gate did to one server's last tool list."""

    mode: TrustMode
    offered: int = 0
    held: tuple[HeldTool, ...] = ()
    flagged: tuple[FlaggedTool, ...] = ()
    truncated: tuple[str, ...] = ()
    dropped: tuple[str, ...] = ()

    @property
    def needs_review(self) -> bool:
        """Whether a person should look: something is held back or flagged."""
        return bool(self.held or self.flagged)

    def row(self) -> TrustRow:
        """What ``list_servers`` and ``check --json`` show."""
        return TrustRow(
            mode=self.mode,
            offered=self.offered,
            held=[HeldRow(tool=h.name, reason=h.reason, sha256=h.sha256) for h in self.held],
            flagged=[FlaggedRow(tool=f.name, findings=list(f.findings)) for f in self.flagged],
            truncated=list(self.truncated),
            dropped=len(self.dropped),
            dropped_tools=list(self.dropped[:_SHOWN_DROPS]),
        )


@dataclass(frozen=True)
class Admission:
    """One server's tool list after the gate: what may be shown, what is held, and the raw
    tools kept (within the limit) to decide again when the pin file changes."""

    accepted: list[types.Tool]
    held: dict[str, HeldTool]
    report: TrustReport
    listing: list[types.Tool] = field(default_factory=list)


class ToolGate:
    """Applies limits, cleaning and the trust modes to downstream tool lists."""

    def __init__(self, pins: PinStore | None = None, limits: Limits | None = None) -> None:
        self.pins = pins if pins is not None else PinStore(None)
        self.limits = limits or Limits()
        self._reported: set[str] = set()  # what vet() logged already

    @classmethod
    def from_config(cls, config: AppConfig) -> ToolGate:
        """The gate of a config: its pin file (relative to the config folder) and limits."""
        g = config.gateway
        return cls(
            PinStore(config.resolve(g.pin_file)),
            Limits(g.max_description_chars, g.max_tools_per_server),
        )

    def reload(self) -> bool:
        """Whether the pin file changed on disk (an approval); unreadable changes are logged
        and ignored, the pins in memory stay in force."""
        try:
            return self.pins.changed_on_disk()
        except PinFileError as exc:
            log.warning("%s", exc)
            return False

    def vet(
        self, server: str, config: DownstreamConfig, rows: Sequence[_Row], key: str, kind: str
    ) -> list[_Row]:
        """A server's prompts, resources or resource templates as hosts may see them, weighed
        as its tools are: every key and string cleaned and clipped as a tool's are; one whose
        ``key`` (name, URI) holds hidden characters is held whatever the mode; under
        ``trust = "strict"`` so is one flagged for hidden characters or injection phrasing
        unless a person approved it. Under ``pin`` and ``strict`` each is pinned in the pin
        file as ``<kind>:<key>`` (``prompt:review``), a changed definition is held until
        approved (``context-broker tools approve SERVER 'prompt:review'``), and under
        ``strict`` a new one is too. Held and
        flagged ones are logged once."""
        max_chars = config.max_description_chars or self.limits.max_description_chars
        shown: list[_Row] = []
        pins: dict[str, Pin] = {}
        pending: dict[str, Any] = {}
        for row in rows:
            clean = clean_definition(row, key, max_chars)
            name = str(getattr(row, "name", ""))[:200]
            written = row.model_dump(by_alias=True, mode="json").get(key)
            pin_key = f"{kind}:{written}"
            digest = listing_digest(row)
            pin, reason = self._weigh(server, config, clean, pin_key, digest)
            if pin is not None:
                pins[pin_key] = pin
            if reason is not None or clean.findings:
                what = f"held back: {reason}" if reason else "flagged, shown cleaned"
                why = "; ".join(str(f) for f in clean.findings)
                self._report(f"downstream {server!r}: {kind} {name!r} {what} ({why})")
            if reason is None:
                shown.append(clean.definition)
            if config.trust != "auto":
                pending[pin_key] = None
                if reason is not None and clean.hold_reason is None:
                    definition = clean.definition.model_dump(
                        by_alias=True, mode="json", exclude_none=True
                    )
                    pending[pin_key] = {
                        "sha256": digest,
                        "reasons": [reason],
                        "definition": definition,
                    }
        if pins or pending:
            self._record(server, pins, pending)
        return shown

    def _weigh(
        self,
        server: str,
        config: DownstreamConfig,
        clean: Any,
        pin_key: str,
        digest: str,
    ) -> tuple[Pin | None, str | None]:
        """``(pin to record, reason to hold)`` for one prompt, resource or template."""
        if clean.hold_reason is not None:
            return None, clean.hold_reason
        if config.trust == "auto":
            return None, _strict_flag(config, clean)
        pin = self.pins.pin(server, pin_key)
        if pin is not None and pin.sha256 == digest:
            return None, None if pin.approved == "user" else _strict_flag(config, clean)
        if pin is not None:
            return None, (
                f"its definition changed since it was approved (approved sha256 "
                f"{pin.sha256[:12]}, now {digest[:12]})"
            )
        if config.trust == "strict":
            return None, 'new, not approved yet (trust = "strict" lists only approved ones)'
        return Pin(digest, "first-sight", definition=None), _strict_flag(config, clean)

    def _report(self, message: str) -> None:
        if message not in self._reported:
            self._reported.add(message)
            log.warning("%s", message)

    def cap(self, config: DownstreamConfig) -> int:
        """The most tools one server may have (listed, or called unlisted under ``auto``)."""
        return config.max_tools or self.limits.max_tools_per_server

    def admit(self, server: str, config: DownstreamConfig, tools: list[types.Tool]) -> Admission:
        """Decide which of ``tools`` (as the downstream listed them) may be shown."""
        cap = self.cap(config)
        max_chars = config.max_description_chars or self.limits.max_description_chars
        kept, dropped = tools[:cap], tools[cap:]
        accepted: list[types.Tool] = []
        held: dict[str, HeldTool] = {}
        flagged: list[FlaggedTool] = []
        truncated: list[str] = []
        pins: dict[str, Pin] = {}
        pending: dict[str, Any] = {}
        known = self.pins.known(server)
        for tool in kept:
            clean = clean_tool(tool, max_chars)
            digest = definition_digest(tool) if clean.checked else _UNCHECKED
            if clean.findings:
                flagged.append(FlaggedTool(tool.name, tuple(str(f) for f in clean.findings)))
            if clean.clipped:
                truncated.append(tool.name)
            seen = _Seen(self.pins.pin(server, tool.name), digest, tool, clean, known)
            new_pin, reason = _decide(config, seen)
            if new_pin is not None:
                pins[tool.name] = new_pin
                _log_repin(server, seen, new_pin)
            if reason is None:
                accepted.append(clean.tool)
                pending[tool.name] = None
            else:
                held[tool.name] = HeldTool(tool.name, reason, digest)
                pending[tool.name] = _pending_entry(clean, digest, reason)
        self._record(server, pins, pending)
        report = TrustReport(
            mode=config.trust,
            offered=len(tools),
            held=tuple(held.values()),
            flagged=tuple(flagged),
            truncated=tuple(truncated),
            dropped=tuple(t.name for t in dropped),
        )
        return Admission(accepted, held, report, list(kept))

    def _record(self, server: str, pins: dict[str, Pin], pending: dict[str, Any]) -> None:
        try:
            self.pins.record(server, pins, pending)
        except PinFileError as exc:
            log.warning("downstream %r: %s; pins are kept in memory only", server, exc)


@dataclass(frozen=True)
class _Seen:
    """One listed tool as the gate weighs it: its pin, its hash, its cleaned form, and
    whether its server was listed before."""

    pin: Pin | None
    digest: str
    tool: types.Tool
    clean: CleanTool
    server_known: bool

    def pin_as(self, source: PinSource) -> Pin:
        return Pin(self.digest, source, definition=_shown(self.clean))

    def matches_pin(self) -> bool:
        """Whether the pin approves this definition (a version-1 pin: the parts it covered,
        when the definition has nothing beyond them)."""
        if self.pin is None:
            return False
        if not self.pin.legacy:
            return self.pin.sha256 == self.digest
        return self.legacy_match() and not self.beyond_legacy()

    def legacy_match(self) -> bool:
        return self.pin is not None and self.pin.sha256 == legacy_digest(self.tool)

    def beyond_legacy(self) -> list[str]:
        """Fields a version-1 pin never covered that this definition has."""
        shown = self.tool.model_dump(by_alias=True, exclude_none=True)
        return sorted(set(shown) - LEGACY_FIELDS)


def _strict_flag(config: DownstreamConfig, clean: Any) -> str | None:
    """Why ``trust = "strict"`` holds a flagged definition nobody approved, or None."""
    if not clean.findings or config.trust != "strict":
        return None
    kinds = ", ".join(f.kind for f in clean.findings)
    return f'it looks like a prompt injection ({kinds}); trust = "strict" holds it'


def _decide(config: DownstreamConfig, seen: _Seen) -> tuple[Pin | None, str | None]:
    """``(pin to record, reason to hold)`` for one tool under the server's trust settings."""
    pin, mode = seen.pin, config.trust
    approved = (
        seen.clean.checked and pin is not None and pin.approved == "user" and seen.matches_pin()
    )
    if seen.clean.hold_reason is not None and not approved:
        return None, seen.clean.hold_reason + "; it is held whatever the trust mode"
    if seen.matches_pin():
        assert pin is not None
        upgrade = seen.pin_as(pin.approved) if pin.legacy else None
        if mode == "strict" and seen.clean.findings and pin.approved != "user":
            kinds = ", ".join(f.kind for f in seen.clean.findings)
            return upgrade, (
                f"its definition looks like a prompt injection ({kinds}); "
                'trust = "strict" holds it until approved'
            )
        return upgrade, None
    if mode == "auto":
        return seen.pin_as("auto"), None
    if pin is None:
        return _decide_new(config, seen)
    if seen.legacy_match():  # a version-1 pin; the fields it never covered are new
        fields = ", ".join(seen.beyond_legacy())
        if mode == "pin":
            return seen.pin_as("first-sight"), None
        return None, (
            f"approved when pins covered only its title, description and input schema; its "
            f"{fields} were never approved"
        )
    return None, (
        f"its definition changed since it was approved (approved sha256 {pin.sha256[:12]}, "
        f"now {seen.digest[:12]})"
    )


def _decide_new(config: DownstreamConfig, seen: _Seen) -> tuple[Pin | None, str | None]:
    """A tool never pinned: pinned on first sight, or held until approved."""
    if config.trust == "strict":
        return None, 'new tool, not approved yet (trust = "strict" lists only approved tools)'
    if seen.server_known and config.hold_new_tools:
        return None, (
            "new tool, first seen after its server's first listing (hold_new_tools = true "
            "holds such tools until approved)"
        )
    return seen.pin_as("first-sight"), None


def _log_repin(server: str, seen: _Seen, new: Pin) -> None:
    """Warn when a pin is replaced: a version-1 pin upgraded, or a change accepted."""
    if seen.pin is None:
        return
    if seen.pin.legacy and seen.legacy_match():
        log.warning(
            "downstream %r: tool %r: its pin from an older pin file now covers its whole "
            "definition (%s)",
            server,
            seen.tool.name,
            "nothing beyond what it covered"
            if new.approved == seen.pin.approved
            else f"{', '.join(seen.beyond_legacy())} pinned on first sight",
        )
    else:
        log.warning(
            'downstream %r: tool %r changed; accepted and re-pinned (trust = "auto")',
            server,
            seen.tool.name,
        )


def _shown(clean: CleanTool) -> dict[str, Any]:
    """The definition as hosts are shown it (cleaned), name aside: what a review reads."""
    return clean.tool.model_dump(by_alias=True, mode="json", exclude_none=True, exclude={"name"})


def _pending_entry(clean: CleanTool, digest: str, reason: str) -> dict[str, Any]:
    return {"sha256": digest, "reasons": [reason], "definition": _shown(clean)}


def log_report(server: str, old: TrustReport | None, new: TrustReport) -> None:
    """Warn about what the gate held, flagged, clipped or dropped, when it differs from the
    previous listing (a refresh that changes nothing logs nothing)."""
    before = old or TrustReport(mode=new.mode)
    for h in new.held:
        if h not in before.held:
            log.warning(
                "downstream %r: tool %r held back: %s; review it with `%s tools status` and "
                "approve it with `%s`",
                server,
                h.name,
                h.reason,
                broker_program(),
                approve_hint(server, h.name, h.sha256),
            )
    for f in new.flagged:
        if f not in before.flagged:
            log.warning(
                "downstream %r: tool %r looks like a prompt injection: %s",
                server,
                f.name,
                "; ".join(f.findings),
            )
    if new.truncated and new.truncated != before.truncated:
        log.warning(
            "downstream %r: descriptions of %d tools clipped to the length limit: %s",
            server,
            len(new.truncated),
            ", ".join(new.truncated[:_SHOWN_DROPS]),
        )
    if new.dropped and new.dropped != before.dropped:
        log.warning(
            "downstream %r lists %d tools; %d past the limit were dropped "
            "([gateway] max_tools_per_server or [servers.%s] max_tools)",
            server,
            new.offered,
            len(new.dropped),
            server,
        )
