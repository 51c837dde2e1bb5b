"""Assembly models: which components make up the LLM input, in which order, and the history
filters applied to it.

A model is an optional ``intro`` (a system text placed first), an ordered list of
``components`` and ``filters`` (a history pipeline spec: a preset name or a list of names
and ``{"name": ..., "options": {...}}``; ``toolCallBackfill`` always runs last). Each
component has a ``kind``, an optional ``framing`` text put before what it emits, ``text``
(literals only) and optional ``children``. Nesting only organises: traversal is depth-first,
left to right, and only leaves emit.

Structural rules, each an :class:`AssemblyError` naming the rule and the component's path
(``components[2].children[0]``):

- ``literal-children``: a ``literal`` has children (its text would never be emitted);
- ``max-depth``: nesting deeper than 6 (top-level components are at depth 1);
- ``max-nodes``: more than 128 components in total, parents included;
- ``parent-framing``: a component with children has a ``framing`` (it would never be emitted);
- ``literal-text``: a ``literal`` without ``text``, or ``text`` on any other kind;
- ``single-history``: more than one ``history`` component (the window is filtered once).

``AssemblyModelSpec`` is the pydantic edge (tool arguments, config files);
:func:`parse_model` turns raw data into the frozen :class:`AssemblyModel` used inside.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeAlias

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from .errors import ContextCoreError

__all__ = [
    "COMPONENT_KINDS",
    "MAX_DEPTH",
    "MAX_NODES",
    "PRESETS",
    "AssemblyError",
    "AssemblyModel",
    "AssemblyModelSpec",
    "Component",
    "ComponentKind",
    "ComponentSpec",
    "model_from_spec",
    "parse_model",
    "preset_model",
]

ComponentKind: TypeAlias = Literal[
    "rules", "references", "tools", "summary", "snapshot", "history", "message", "literal"
]
COMPONENT_KINDS: tuple[ComponentKind, ...] = (
    "rules",
    "references",
    "tools",
    "summary",
    "snapshot",
    "history",
    "message",
    "literal",
)
MAX_DEPTH = 6
MAX_NODES = 128


class AssemblyError(ContextCoreError):
    """An assembly model breaks a rule; ``rule`` names it (``max-depth``, ...) and ``field``
    the offending component's path."""

    def __init__(self, message: str, *, field: str | None = None, rule: str | None = None):
        super().__init__(message, field=field)
        self.rule = rule


# -- the pydantic edge -------------------------------------------------------------------


class ComponentSpec(BaseModel):
    """One component as written in a tool call or a config file."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: ComponentKind
    framing: str | None = Field(None, description="Text put before what the component emits.")
    text: str | None = Field(None, description="The text of a literal component.")
    children: tuple[ComponentSpec, ...] = Field(
        (), description="Nested components (organisation only: only leaves emit)."
    )


class AssemblyModelSpec(BaseModel):
    """An assembly model as written in a tool call or under ``[models.<name>]`` in a config."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    intro: str | None = Field(None, description="A system text placed first.")
    components: tuple[ComponentSpec, ...] = Field(min_length=1)
    filters: str | tuple[str | dict[str, Any], ...] | None = Field(
        None, description="History filters: a preset name or a list of filter entries."
    )

    @model_validator(mode="after")
    def _structure(self) -> AssemblyModelSpec:
        try:
            check_structure(self.model_dump()["components"])
        except AssemblyError as exc:
            raise ValueError(exc.message) from None
        return self


# -- the frozen model used inside --------------------------------------------------------


@dataclass(frozen=True)
class Component:
    """A component with its path in the model (``components[1].children[0]``)."""

    kind: ComponentKind
    path: str
    framing: str | None = None
    text: str | None = None
    children: tuple[Component, ...] = ()


@dataclass(frozen=True)
class AssemblyModel:
    """A validated model; ``filters`` ``None`` means the history service's default preset."""

    components: tuple[Component, ...]
    intro: str | None = None
    filters: str | tuple[str | Mapping[str, Any], ...] | None = None

    def leaves(self) -> Iterator[Component]:
        """The emitting components, depth-first, left to right."""
        stack = list(reversed(self.components))
        while stack:
            node = stack.pop()
            if node.children:
                stack.extend(reversed(node.children))
            else:
                yield node


def check_structure(components: object, *, prefix: str = "") -> None:
    """Apply the structural rules to raw component data (dicts with ``children`` lists).

    Runs iteratively, before any recursive validation, so hostile nesting fails fast. Values
    of the wrong type are left for the schema validation to report.
    """
    if not isinstance(components, Sequence) or isinstance(components, str | bytes):
        return
    stack: list[tuple[object, str, int]] = [
        (node, f"{prefix}components[{i}]", 1) for i, node in reversed(list(enumerate(components)))
    ]
    count = 0
    histories = 0
    while stack:
        node, path, depth = stack.pop()
        count += 1
        if count > MAX_NODES:
            _fail("max-nodes", path, f"more than {MAX_NODES} components in the model; merge some")
        if depth > MAX_DEPTH:
            _fail("max-depth", path, f"nesting deeper than {MAX_DEPTH} levels; flatten the model")
        if not isinstance(node, Mapping):
            continue
        kind, children = node.get("kind"), node.get("children") or ()
        has_children = isinstance(children, Sequence) and not isinstance(children, str) and children
        _check_node(node, kind, bool(has_children), path)
        if kind == "history" and not has_children:
            histories += 1
            if histories > 1:
                _fail("single-history", path, "a model has at most one history component")
        if has_children:
            assert isinstance(children, Sequence)
            stack.extend(
                (child, f"{path}.children[{i}]", depth + 1)
                for i, child in reversed(list(enumerate(children)))
            )


def _check_node(node: Mapping[str, Any], kind: object, has_children: bool, path: str) -> None:
    if kind == "literal" and has_children:
        _fail(
            "literal-children",
            path,
            "a literal component cannot have children; move them next to it",
        )
    if has_children and node.get("framing") is not None:
        _fail(
            "parent-framing",
            path,
            "only leaves emit, so framing on a component with children would be lost; "
            "put it on a leaf or add a literal child",
        )
    if kind == "literal" and not has_children and not node.get("text"):
        _fail("literal-text", path, "a literal component needs a non-empty text")
    if kind != "literal" and node.get("text") is not None:
        _fail("literal-text", path, f"text applies to literal components only, not {kind!r}")


def _fail(rule: str, path: str, detail: str) -> None:
    raise AssemblyError(f"{path}: {detail} (rule {rule})", field=path, rule=rule)


def model_from_spec(spec: AssemblyModelSpec) -> AssemblyModel:
    """The frozen model for an already validated spec."""

    def build(node: ComponentSpec, path: str) -> Component:
        children = tuple(
            build(child, f"{path}.children[{i}]") for i, child in enumerate(node.children)
        )
        return Component(node.kind, path, node.framing, node.text, children)

    components = tuple(build(c, f"components[{i}]") for i, c in enumerate(spec.components))
    return AssemblyModel(components, spec.intro, spec.filters)


def parse_model(raw: object, *, field: str = "model") -> AssemblyModel:
    """Validate raw model data (a tool argument) and return the frozen model.

    Every problem is an :class:`AssemblyError` whose field starts with ``field``
    (``model.components[2].children[0]``).
    """
    if isinstance(raw, AssemblyModelSpec):
        return model_from_spec(raw)
    if not isinstance(raw, Mapping):
        raise AssemblyError(f"{field} must be a model name or an object, got {raw!r}", field=field)
    try:
        check_structure(raw.get("components"), prefix=f"{field}.")
        spec = AssemblyModelSpec.model_validate(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = _path(field, first["loc"])
        detail = "unknown key" if first["type"] == "extra_forbidden" else first["msg"]
        raise AssemblyError(f"{where}: {detail}", field=where) from None
    return model_from_spec(spec)


def _path(field: str, loc: Sequence[int | str]) -> str:
    out = field
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else f".{part}"
    return out


# -- presets -----------------------------------------------------------------------------

DEFAULT_INTRO = (
    "The context below was assembled for this request: rules to follow, reference material, "
    "the conversation so far and the user's latest message."
)


def _preset(filters: str) -> AssemblyModel:
    kinds: tuple[ComponentKind, ...] = (
        "rules",
        "references",
        "summary",
        "snapshot",
        "history",
        "message",
    )
    components = tuple(Component(kind, f"components[{i}]") for i, kind in enumerate(kinds))
    return AssemblyModel(components, DEFAULT_INTRO, filters)


PRESETS: Mapping[str, AssemblyModel] = {
    "default": _preset("general"),
    "topic": _preset("topic"),
}


def preset_model(name: object, *, field: str = "preset") -> AssemblyModel:
    """The built-in model ``name``; raise :class:`AssemblyError` naming ``field`` if unknown."""
    if isinstance(name, str) and name in PRESETS:
        return PRESETS[name]
    raise AssemblyError(
        f"unknown assembly preset {name!r}; use one of {', '.join(PRESETS)}", field=field
    )
