"""Context items (rules, references, tools), include modes and item keys."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal, TypeAlias, get_args

from .errors import CatalogError

__all__ = [
    "INCLUDE_MODES",
    "ITEM_TYPES",
    "ContextItem",
    "IncludeMode",
    "ItemRef",
    "ItemType",
    "Reference",
    "Rule",
    "TextItem",
    "Tool",
    "parse_include",
    "parse_item_type",
]

ItemType = Literal["rule", "reference", "tool"]
IncludeMode = Literal["always", "manual", "agent"]
ITEM_TYPES: tuple[ItemType, ...] = get_args(ItemType)
INCLUDE_MODES: tuple[IncludeMode, ...] = get_args(IncludeMode)


def parse_item_type(value: object, *, field: str = "type") -> ItemType:
    """Return ``value`` as an item type, or raise naming ``field``."""
    for kind in ITEM_TYPES:
        if value == kind:
            return kind
    raise CatalogError(
        f"{field}: unknown item type {value!r}; use one of {', '.join(ITEM_TYPES)}", field=field
    )


def parse_include(value: object, *, field: str = "include") -> IncludeMode:
    """Return ``value`` as an include mode, or raise naming ``field``."""
    for mode in INCLUDE_MODES:
        if value == mode:
            return mode
    raise CatalogError(
        f"{field}: unknown include mode {value!r}; use one of {', '.join(INCLUDE_MODES)}",
        field=field,
    )


@dataclass(frozen=True, order=True)
class ItemRef:
    """How an item is referred to everywhere: type + name (+ server for tools)."""

    type: ItemType
    name: str
    server: str | None = None

    @property
    def key(self) -> str:
        """The external key: ``tool:<server>/<tool>``, ``rule:<name>``, ``reference:<name>``."""
        if self.type == "tool":
            return f"tool:{self.server}/{self.name}"
        return f"{self.type}:{self.name}"

    @classmethod
    def parse(cls, key: str) -> ItemRef:
        """Parse an external item key; raise ``CatalogError`` if it is malformed."""
        kind, sep, rest = key.partition(":")
        if not sep or not rest:
            raise CatalogError(
                f"malformed item key {key!r}; expected 'tool:<server>/<tool>', "
                "'rule:<name>' or 'reference:<name>'",
                field="key",
            )
        item_type = parse_item_type(kind, field="key")
        if item_type != "tool":
            return cls(item_type, rest)
        server, slash, name = rest.partition("/")
        if not slash or not server or not name:
            raise CatalogError(f"malformed tool key {key!r}; expected 'tool:<server>/<tool>'")
        return cls("tool", name, server)

    def to_dict(self) -> dict[str, Any]:
        return {"type": self.type, "name": self.name, "server": self.server}


@dataclass(frozen=True)
class TextItem:
    """A named text for the model: a :class:`Rule` or a :class:`Reference` (``kind``)."""

    kind: ClassVar[Literal["rule", "reference"]]

    name: str
    text: str
    description: str = ""
    include: IncludeMode = "agent"
    priority: int = 0
    enabled: bool = True
    source: str | None = None

    @property
    def ref(self) -> ItemRef:
        return ItemRef(self.kind, self.name)

    @property
    def effective_include(self) -> IncludeMode:
        return self.include


class Rule(TextItem):
    """A behavioural instruction for the agent."""

    kind = "rule"


class Reference(TextItem):
    """A document the agent may need to read."""

    kind = "reference"


@dataclass(frozen=True)
class Tool:
    """A tool offered by a downstream MCP server.

    ``include`` is the tool's own setting and ``server_include`` its server's default; the
    effective mode falls back from one to the other, then to ``always``.
    """

    server: str
    name: str
    description: str = ""
    input_schema: Mapping[str, Any] = field(default_factory=dict)
    include: IncludeMode | None = None
    server_include: IncludeMode | None = None
    enabled: bool = True
    app_only: bool = False
    """Marked for its MCP App alone (``_meta.ui.visibility`` without ``"model"``): never
    shown to a model, found by search or called through ``call_tool``; the App calls it
    directly by its listed name."""
    output_schema: Mapping[str, Any] | None = None
    """The schema of the tool's structured content, where its server gives one."""

    @property
    def ref(self) -> ItemRef:
        return ItemRef("tool", self.name, self.server)

    @property
    def effective_include(self) -> IncludeMode:
        return self.include or self.server_include or "always"

    @property
    def priority(self) -> int:
        return 0


ContextItem: TypeAlias = Rule | Reference | Tool


def for_model(item: ContextItem) -> bool:
    """Whether a model may be shown ``item``: every item but an app-only tool."""
    return not (isinstance(item, Tool) and item.app_only)
