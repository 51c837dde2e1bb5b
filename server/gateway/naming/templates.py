"""Downstream resource templates as hosts see them, and the server a filled-in URI goes to.

A template is exposed the way its server's resources are (see :func:`.naming.wrap_resource_uri`):
under ``prefix = ""``, and for a ``ui://`` template always, as the server wrote it; otherwise as
``downstream://<server>/`` followed by the template with its literal text quoted and its
``{...}`` expressions kept, so a host can still fill it in. A URI filled in from a wrapped
template splits back to the server and, unquoted, the URI the server's own template gives (a
filled-in value that a host percent-encoded reaches the server decoded). A URI filled in from
an unwrapped template is routed by matching it against the templates, first server in name
order.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from urllib.parse import quote

from .names import RESOURCE_SCHEME, wrap_resource_uri

__all__ = ["TemplateTable", "wrap_template"]

_EXPRESSION = re.compile(r"\{[^{}]*\}")

Target = tuple[str, str]  # (server, original template or uri)


def wrap_template(server: str, template: str, prefix: str | None) -> str:
    """The exposed form of ``server``'s URI template ``template`` (see the module's text)."""
    if wrap_resource_uri(server, template, prefix) == template:
        return template
    literals = _EXPRESSION.split(template)
    expressions = [*_EXPRESSION.findall(template), ""]
    body = "".join(
        quote(text, safe="") + expr for text, expr in zip(literals, expressions, strict=True)
    )
    return f"{RESOURCE_SCHEME}://{quote(server, safe='')}/{body}"


def _pattern(template: str) -> re.Pattern[str]:
    """Matches the URIs ``template`` can be filled in to (each expression: any text)."""
    return re.compile(".*".join(re.escape(t) for t in _EXPRESSION.split(template)), re.DOTALL)


@dataclass
class TemplateTable:
    """The exposed templates of one listing: ``(server, original template)`` by exposed
    template, and the unwrapped ones as patterns to route filled-in URIs by."""

    by_exposed: dict[str, Target] = field(default_factory=dict)
    _patterns: list[tuple[re.Pattern[str], str]] = field(default_factory=list)
    _originals: list[tuple[str, re.Pattern[str]]] = field(default_factory=list)

    @classmethod
    def of(cls, rows: Iterable[tuple[str, Target]]) -> TemplateTable:
        """A table of ``(exposed template, (server, original))`` rows, in routing order."""
        table = cls()
        for exposed, target in rows:
            table.by_exposed[exposed] = target
            table._originals.append((target[0], _pattern(target[1])))
            if exposed == target[1]:
                table._patterns.append((_pattern(exposed), target[0]))
        return table

    def fills(self, target: Target) -> bool:
        """Whether ``(server, uri)`` is a URI one of that server's templates fills in to."""
        server, uri = target
        return any(s == server and p.fullmatch(uri) for s, p in self._originals)

    def route(self, uri: str) -> Target | None:
        """``(server, uri)`` for a URI filled in from an unwrapped template, or None."""
        for pattern, server in self._patterns:
            if pattern.fullmatch(uri):
                return server, uri
        return None
