"""``context-broker check``: what a user needs to know before plugging a config into a host."""

from __future__ import annotations

import shlex
from collections.abc import Callable
from pathlib import Path
from typing import Any

from context_broker.server.embedding import resolve_model_dir
from context_broker.server.parts import build_parts
from context_broker.server.settings import load_config

from contextcore.errors import ContextCoreError

from ..gateway import GatewayError
from ..gateway.servers_file import survey_servers
from ..gateway.trust.gate import approve_hint
from ..host.gateway_tools import RESERVED_NAMES
from ..summarizers import require_sdk
from ..terminal import escape, escape_lines
from ._import_review import server_line
from .install import broker_command

__all__ = ["check_exit_code", "check_report", "format_check"]

SERVER_DOWN = 2
"""Exit code of ``check`` when an enabled downstream server is not connected."""
NEEDS_REVIEW = 3
"""Exit code of ``check`` when a downstream tool is held back or flagged."""


def _model_report(parts: Any) -> dict[str, Any]:
    config = parts.config
    embedder = parts.embedder
    if embedder is None:
        return {
            "model": config.search.model,
            "source": "disabled",
            "loaded": False,
            "search": "lexical only (search.semantic = false)",
        }
    model_dir = resolve_model_dir(config)
    try:
        embedder.embed(["context broker check"])
    except ContextCoreError as exc:
        return {
            "model": embedder.model_name,
            "source": "unavailable",
            "loaded": False,
            "error": exc.message,
            "search": "LEXICAL ONLY: the embedding model could not be loaded",
        }
    status = embedder.status()
    return {
        "model": embedder.model_name,
        "source": status.source,
        "model_dir": str(model_dir) if model_dir else None,
        "loaded": True,
        "search": config.search.mode,
    }


def check_report(
    config_path: Path, announce: Callable[[str], None] | None = None
) -> dict[str, Any]:
    """Validate the config, load its catalog and the model; never raises for bad input.

    Before any server starts, ``announce`` is given one line for each server that came from
    the config's ``mcp_servers_file`` (copied from a host's file, not written in the config):
    the command it is about to run."""
    try:
        config = load_config(config_path)
        require_sdk(config.history.summarizer)  # as serve refuses it at startup
        parts = build_parts(config)
    except ContextCoreError as exc:
        return {"ok": False, "config": str(config_path), "error": exc.message}
    from .live import gather_downstream

    try:
        survey = survey_servers(config, reserved=RESERVED_NAMES)
        if announce is not None:
            for line in _imported_commands(survey):
                announce(line)
        servers = gather_downstream(parts)
    except GatewayError as exc:
        return {"ok": False, "config": str(config_path), "error": str(exc)}
    for server in servers:
        cfg = survey.servers.get(server["name"])
        server["include"] = (cfg.include if cfg else None) or "always"
        server["origin"] = survey.origins.get(server["name"], "config")
        _one_shot(server)
    persistence = config.persistence
    store_error, damaged = _store_problem(config)
    return {
        "ok": True,
        "config": str(config_path),
        "agent": config.agent.name,
        "items": parts.catalog.counts(),
        "servers": servers,
        "warnings": list(survey.warnings),
        "model": _model_report(parts),
        "persistence": {
            "backend": persistence.backend,
            "path": str(config.resolve(persistence.path)) if persistence.path else None,
            "error": store_error,
            "damaged_records": damaged,
        },
    }


def _imported_commands(survey: Any) -> list[str]:
    """The commands check is about to run that the config does not write itself."""
    lines = []
    for name, cfg in survey.servers.items():
        origin = survey.origins.get(name, "config")
        if cfg.enabled and cfg.kind == "stdio" and origin.startswith("imported"):
            entry = {"command": cfg.command, "args": list(cfg.args), "cwd": cfg.cwd}
            lines.append(f"starting {server_line(name, entry)} ({origin})")
    return lines


def _one_shot(server: dict[str, Any]) -> None:
    """A server as one look sees it: one that did not connect has ``failed`` (a running
    broker would be trying again, which a check does not), its error without the class name
    of the broker's own errors."""
    if server["state"] == "reconnecting":
        server["state"] = "failed"
    error = server.get("lastError")
    if isinstance(error, str) and error.startswith(_OWN_ERROR):
        server["lastError"] = error.removeprefix(_OWN_ERROR)


_OWN_ERROR = f"{GatewayError.__name__}: "


def _store_problem(config: Any) -> tuple[str | None, int]:
    """Why the session store cannot be used (refused at startup, or not writable), or None;
    and how many of its records are damaged (reads skip them)."""
    from ..stores import build_store, check_store

    try:
        store = build_store(config)
    except ContextCoreError as exc:
        return exc.message, 0
    try:
        return check_store(store), len(store.damaged_records())
    except ContextCoreError as exc:
        return exc.message, 0
    finally:
        store.close()


def format_check(report: dict[str, Any]) -> str:
    """A short text rendering of ``check_report``, every line escaped for a terminal (server
    names, tool names and a downstream's stderr come from outside)."""
    if not report["ok"]:
        return f"config {escape(report['config'])}: INVALID\n  {escape_lines(report['error'])}"
    code = check_exit_code(report)
    verdict = "OK" if code == 0 else f"valid, but check fails (exit code {code}: see below)"
    lines = [f"config {report['config']}: {verdict} (agent {report['agent']!r})", "items:"]
    if not report["items"]:
        lines.append("  none")
    for kind, modes in sorted(report["items"].items()):
        detail = ", ".join(f"{n} {mode}" for mode, n in sorted(modes.items()))
        lines.append(f"  {kind}: {sum(modes.values())} ({detail})")
    model = report["model"]
    where = f" ({model['model_dir']})" if model.get("model_dir") else ""
    lines.append(f"embedding model: {model['model']} from {model['source']}{where}")
    if model.get("error"):
        lines.append(f"  error: {model['error']}")
    lines.append(f"search: {model['search']}")
    for server in report["servers"]:
        state = f"{server['state']}, {server['toolCount']} tools"
        error = f" ({server['lastError']})" if server["lastError"] else ""
        lines.append(f"server {server['name']} [{server['transport']}]: {state}{error}")
        if "include" in server:
            lines.append(f"  include {server['include']} ({server['origin']})")
        if server["state"] not in ("connected", "disabled"):
            lines.append(_leave_out(server, report["config"]))
        lines += _trust_lines(server["name"], server.get("trust"), str(report["config"]))
        lines += [f"  name clash: {escape(why)}" for why in server.get("nameClashes", [])]
    lines += [f"warning: {warning}" for warning in report.get("warnings", [])]
    p = report["persistence"]
    lines.append(f"persistence: {p['backend']}" + (f" at {p['path']}" if p["path"] else ""))
    if p.get("error"):
        lines.append(f"  error: {p['error']}")
    config = shlex.quote(str(report["config"]))
    if p.get("damaged_records"):
        lines.append(
            f"  damaged records: {p['damaged_records']} (every read skips them; "
            f"`{_broker()} repair --config {config}` shows and removes them)"
        )
    if code == NEEDS_REVIEW:
        lines.append(
            "downstream tools need review (held back or flagged above): exit code "
            f"{NEEDS_REVIEW}; see `{_broker()} tools status --config {config}`"
        )
    return "\n".join(escape(line) for line in lines)


def _broker() -> str:
    """This installation's command, as a shell runs it without the venv on ``PATH``."""
    return shlex.join(broker_command())


def _leave_out(server: dict[str, Any], config: str) -> str:
    """How to turn off a server that is not connected, said where it goes: an imported
    server's settings go in a ``[servers.NAME]`` table of the config, beside its entry."""
    table = f"[servers.{server['name']}]"
    if str(server.get("origin", "config")).startswith("imported") and table not in str(
        server.get("origin")
    ):
        return f"  or leave it out: add a {table} table with enabled = false to {config}"
    return f"  or leave it out: set enabled = false in its {table} table of {config}"


def _trust_lines(server: str, trust: dict[str, Any] | None, config: str) -> list[str]:
    """What the tool gate held back, flagged, clipped or dropped for one server; the approve
    command as it runs (this broker's path, the config checked)."""
    if not trust:
        return []
    lines = []
    for held in trust["held"]:
        lines.append(f"  held back: {held['tool']}: {held['reason']}")
        where = f"--config {shlex.quote(config)}"
        hint = approve_hint(server, held["tool"], held.get("sha256"), where, _broker())
        lines.append(f"    approve: {hint}")
    for flagged in trust["flagged"]:
        lines.append(f"  flagged: {flagged['tool']}: {'; '.join(flagged['findings'])}")
    if trust["truncated"]:
        lines.append(
            f"  clipped descriptions ({len(trust['truncated'])}): {', '.join(trust['truncated'])}"
        )
    if trust["dropped"]:
        lines.append(
            f"  dropped: {trust['dropped']} of {trust['offered']} tools past the limit "
            "([gateway] max_tools_per_server)"
        )
    return lines


def check_exit_code(report: dict[str, Any]) -> int:
    """0 when all is well, 1 for an invalid config, 2 when an enabled downstream server could
    not be started or reached, 3 when a downstream tool is held back or flagged (a person
    should look before plugging the config into a host)."""
    if not report["ok"] or report["persistence"].get("error"):
        return 1
    if any(s["state"] not in ("connected", "disabled") for s in report["servers"]):
        return SERVER_DOWN
    for server in report["servers"]:
        trust = server.get("trust") or {}
        if trust.get("held") or trust.get("flagged"):
            return NEEDS_REVIEW
    return 0
