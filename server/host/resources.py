"""The broker's MCP resources: the catalog, sessions, recorded requests, rules and
references, each as JSON plus a Markdown rendering."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any
from urllib.parse import quote, unquote, urlsplit

import anyio.to_thread
from context_broker.tools.analytics import usage_payload
from context_broker.tools.catalog import catalog_rows
from mcp import MCPError, types

from contextcore.errors import ContextCoreError
from contextcore.items import ItemRef, Reference, Rule
from contextcore.render import render_markdown, summary_line
from contextcore.services.broker import ContextBroker
from contextcore.sessions import Session

from ..ui.app import APP_URI, app_resource, read_app

__all__ = ["ResourceReader", "resource_templates"]

JSON = "application/json"
MARKDOWN = "text/markdown"

_TEMPLATES = (
    ("session", "context://sessions/{session_id}", "A session's context items and turn log."),
    (
        "request",
        "context://sessions/{session_id}/requests/{request_id}",
        "One recorded request context: which items were used and why.",
    ),
    ("rule", "context://rules/{name}", "A rule's text."),
    ("reference", "context://references/{name}", "A reference's text."),
)


def resource_templates() -> list[types.ResourceTemplate]:
    """The URI templates hosts can fill in."""
    return [
        types.ResourceTemplate(uri_template=uri, name=name, description=text, mime_type=JSON)
        for name, uri, text in _TEMPLATES
    ]


def _item_uri(ref: ItemRef) -> str:
    return f"context://{ref.type}s/{quote(ref.name, safe='')}"


def _not_found(uri: str, why: str) -> MCPError:
    return MCPError(types.INVALID_PARAMS, f"resource {uri!r} not found: {why}", {"uri": uri})


def _session_markdown(session: Session) -> str:
    lines = [f"# Session {session.session_id}", ""]
    lines.append(f"agent {session.agent or '(none)'} · created {session.created_at}")
    lines += ["", "## Context items", ""]
    for item in session.items:
        lines.append(f"- **{item.ref.key}** `{item.include_mode}`")
    if not session.items:
        lines.append("_none_")
    lines += ["", "## Turns", ""]
    for turn in session.turns:
        uri = f"context://sessions/{session.session_id}/requests/{turn.request_id}"
        lines.append(f"- [{turn.request_id}]({uri}) {turn.timestamp} · {summary_line(turn.items)}")
    if not session.turns:
        lines.append("_none_")
    return "\n".join(lines) + "\n"


def _contents(uri: str, data: Any, markdown: str) -> types.ReadResourceResult:
    return types.ReadResourceResult(
        contents=[
            types.TextResourceContents(uri=uri, mime_type=JSON, text=json.dumps(data, indent=2)),
            types.TextResourceContents(uri=uri, mime_type=MARKDOWN, text=markdown),
        ]
    )


class ResourceReader:
    """Lists and reads resources of one broker; under ``profile``, only the items it allows
    and the sessions created under it."""

    def __init__(self, broker: ContextBroker, profile: str | None = None) -> None:
        self.broker = broker
        self.profile = profile
        self._shown = broker.profile(profile)

    def list(self) -> list[types.Resource]:
        """The catalog and every rule and reference (sessions are private: never listed)."""
        out = [
            types.Resource(
                uri="context://catalog",
                name="catalog",
                description="Every rule, reference and tool with its include mode.",
                mime_type=JSON,
            )
        ]
        out.append(
            types.Resource(
                uri="context://stats",
                name="stats",
                description="Inclusion analytics across all sessions: what was included, "
                "how, and how strongly search matched.",
                mime_type=JSON,
            )
        )
        out.append(app_resource())
        for item in self.broker.catalog.items(["rule", "reference"]):
            if self._shown is not None and not self._shown.allows(item.ref):
                continue
            out.append(
                types.Resource(
                    uri=_item_uri(item.ref),
                    name=f"{item.ref.type}:{item.name}",
                    description=item.description or None,
                    mime_type=JSON,
                )
            )
        return out

    async def read(self, uri: str) -> types.ReadResourceResult:
        """Read ``uri``; raise ``MCPError`` (invalid params) when it names nothing."""
        if uri == APP_URI:
            return read_app()
        try:
            return await anyio.to_thread.run_sync(self._read, uri)
        except ContextCoreError as exc:
            raise _not_found(uri, exc.message) from exc

    def _read(self, uri: str) -> types.ReadResourceResult:
        parts = urlsplit(uri)
        path = [unquote(p) for p in parts.path.split("/")[1:]] if parts.path else []
        if parts.scheme != "context":
            raise _not_found(uri, "this server's resources start with 'context://'")
        match parts.netloc, path:
            case "catalog", []:
                rows = catalog_rows(self.broker, None, self.profile).model_dump(mode="json")
                return _contents(uri, rows, self._catalog_markdown(rows["items"]))
            case "stats", []:
                usage = usage_payload(self.broker, None, self.profile)
                data = usage.model_dump(mode="json", exclude={"report"})
                return _contents(uri, data, f"# Usage\n\n```\n{usage.report}\n```\n")
            case "sessions", [session_id, *rest]:
                if self.profile is not None:
                    self.broker.require_profile(session_id, self.profile)
                return self._read_session(uri, session_id, rest)
            case ("rules" | "references") as kind, [name]:
                return self._item(uri, ItemRef(kind[:-1], name))  # type: ignore[arg-type]
        raise _not_found(uri, "use context://catalog or one of the resource templates")

    def _read_session(
        self, uri: str, session_id: str, rest: Sequence[str]
    ) -> types.ReadResourceResult:
        match rest:
            case []:
                session = self.broker.full_session(session_id)
                return _contents(uri, session.to_dict(), _session_markdown(session))
            case ["requests", request_id]:
                context = self.broker.request(session_id, request_id)
                md = render_markdown(context, self.broker.lookup)
                return _contents(uri, context.to_dict(), md)
        raise _not_found(uri, "use context://catalog or one of the resource templates")

    def _item(self, uri: str, ref: ItemRef) -> types.ReadResourceResult:
        item = self.broker.catalog.require(ref)
        if self._shown is not None and not self._shown.allows(ref):
            raise _not_found(uri, f"{ref.key} is not in profile {self.profile!r}")
        assert isinstance(item, Rule | Reference)
        data = {
            "key": ref.key,
            "type": ref.type,
            "name": item.name,
            "description": item.description,
            "include_mode": item.include,
            "priority": item.priority,
            "enabled": item.enabled,
            "text": item.text,
        }
        head = f"# {item.name}" + (f" — {item.description}" if item.description else "")
        return _contents(uri, data, f"{head}\n\n{item.text}\n")

    @staticmethod
    def _catalog_markdown(rows: Sequence[dict[str, Any]]) -> str:
        lines = ["# Catalog", ""]
        for kind, title in (("rule", "Rules"), ("reference", "References"), ("tool", "Tools")):
            lines += [f"## {title}", ""]
            found = [r for r in rows if r["type"] == kind]
            for r in found:
                off = " _(disabled)_" if not r["enabled"] else ""
                lines.append(f"- **{r['key']}** `{r['include_mode']}`{off}")
            lines += ["_none_"] if not found else []
            lines.append("")
        return "\n".join(lines)
