"""Python signatures of tools, as code mode calls them: each tool an ``async def`` named by
the name a host calls it by, its input schema's properties as keyword-only parameters, its
return type from the output schema when the server gives one.

A model reads a tool's signature in the request-context text and ``get_context_items``; the
sandbox type-checks a program against the same signatures (:func:`stubs`) before it runs,
so a wrong argument is a type error with its line, not a downstream call.
"""

from __future__ import annotations

import keyword
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from .items import Tool

__all__ = [
    "CALL_TOOL_SIGNATURE",
    "Parameter",
    "Signature",
    "function_name",
    "python_line",
    "signature",
    "stubs",
]

CALL_TOOL_SIGNATURE = (
    "async def call_tool(server: str, tool: str, arguments: dict[str, Any] | None = None) -> Any"
)
"""The one function that reaches any tool the caller may use, by server and original name."""

_NOT_IDENT = re.compile(r"[^0-9A-Za-z_]")
_SIMPLE = {"string": "str", "integer": "int", "number": "float", "boolean": "bool", "null": "None"}
_MAX_LITERALS = 12
_MAX_DEPTH = 3


def function_name(exposed: str) -> str:
    """The Python name of a tool called by ``exposed``: characters a Python name cannot
    hold become ``_`` (``my-server__get`` is ``my_server__get``), a keyword gets a ``_``."""
    name = _NOT_IDENT.sub("_", exposed) or "_"
    if name[0].isdigit():
        name = f"_{name}"
    return f"{name}_" if keyword.iskeyword(name) else name


@dataclass(frozen=True)
class Parameter:
    """One keyword-only parameter: its property name, annotation and whether it is required."""

    name: str
    annotation: str
    required: bool
    default: str = "None"


@dataclass(frozen=True)
class Signature:
    """A tool's Python signature: ``extra`` when some property names are no Python names
    (they are passed through ``**extra``)."""

    name: str
    parameters: tuple[Parameter, ...]
    returns: str
    extra: bool = False

    def render(self) -> str:
        """``async def name(*, a: str, b: int | None = None) -> dict[str, Any]``."""
        parts = [
            f"{p.name}: {p.annotation}" if p.required else f"{p.name}: {p.annotation} = {p.default}"
            for p in self.parameters
        ]
        if self.extra:
            parts.append("**extra: Any")
        elif parts:
            parts.insert(0, "*")
        return f"async def {self.name}({', '.join(parts)}) -> {self.returns}"

    def keywords(self) -> frozenset[str]:
        """The parameter names the signature declares."""
        return frozenset(p.name for p in self.parameters)


def _annotation(schema: Any, depth: int = 0) -> str:
    """The Python annotation of a JSON schema (``Any`` where it cannot say more)."""
    if not isinstance(schema, Mapping) or depth > _MAX_DEPTH:
        return "Any"
    if "enum" in schema and isinstance(schema["enum"], list) and schema["enum"]:
        values = schema["enum"][:_MAX_LITERALS]
        if all(isinstance(v, str | int | bool) and not isinstance(v, float) for v in values):
            return f"Literal[{', '.join(repr(v) for v in values)}]"
    if "const" in schema and isinstance(schema["const"], str | int | bool):
        return f"Literal[{schema['const']!r}]"
    for key in ("anyOf", "oneOf"):
        if isinstance(schema.get(key), list):
            return _union(_annotation(s, depth + 1) for s in schema[key])
    kind = schema.get("type")
    if isinstance(kind, list):
        return _union(_annotation({**schema, "type": k}, depth) for k in kind)
    if kind in _SIMPLE:
        return _SIMPLE[kind]
    if kind == "array":
        return f"list[{_annotation(schema.get('items'), depth + 1)}]"
    if kind == "object" or "properties" in schema:
        return "dict[str, Any]"
    return "Any"


def _members(annotation: str) -> list[str]:
    """The members of a union annotation, split where no bracket is open."""
    out, depth, start = [], 0, 0
    for i, ch in enumerate(annotation):
        depth += {"[": 1, "]": -1}.get(ch, 0)
        if depth == 0 and annotation.startswith(" | ", i):
            out.append(annotation[start:i])
            start = i + 3
    return [*out, annotation[start:]]


def _union(annotations: Iterable[str]) -> str:
    unique = list(dict.fromkeys(m for a in annotations for m in _members(a)))
    if "Any" in unique:
        return "Any"
    return " | ".join(unique)


def _default(schema: Any) -> str | None:
    """The default a property's schema gives, as Python source (None: none given)."""
    if not isinstance(schema, Mapping) or "default" not in schema:
        return None
    value = schema["default"]
    if value is None or isinstance(value, bool | int | float | str):
        text = repr(value)
        return text if len(text) <= 40 else None
    return None


def _returns(output_schema: Mapping[str, Any] | None) -> str:
    """A tool's return type: its structured content's type, else ``Any`` (its text, or the
    structured content a server gives without declaring it)."""
    if output_schema is None:
        return "Any"
    return _annotation(output_schema)


def signature(
    exposed: str,
    input_schema: Mapping[str, Any] | None,
    output_schema: Mapping[str, Any] | None = None,
) -> Signature:
    """The signature of a tool called by ``exposed`` with these schemas: required
    properties first, then the optional ones with their default (else ``None``)."""
    schema = input_schema if isinstance(input_schema, Mapping) else {}
    properties = schema.get("properties")
    properties = properties if isinstance(properties, Mapping) else {}
    required = set(schema.get("required") or ())
    named = [(k, v) for k, v in properties.items() if k.isidentifier() and not keyword.iskeyword(k)]
    params: list[Parameter] = []
    for key, sub in sorted(named, key=lambda kv: kv[0] not in required):
        annotation = _annotation(sub)
        if key in required:
            params.append(Parameter(key, annotation, True))
            continue
        default = _default(sub)
        if default is None or default == "None":
            annotation = annotation if annotation == "Any" else _union([annotation, "None"])
            default = "None"
        params.append(Parameter(key, annotation, False, default))
    extra = len(named) < len(properties) or schema.get("additionalProperties") is True
    return Signature(function_name(exposed), tuple(params), _returns(output_schema), extra)


def stubs(signatures: Iterable[Signature]) -> str:
    """A stub file declaring ``call_tool`` and each signature, for the sandbox's type check."""
    lines = ["from typing import Any, Literal", "", f"{CALL_TOOL_SIGNATURE}: ..."]
    lines += [f"{s.render()}: ..." for s in signatures]
    return "\n".join(lines) + "\n"


def python_line(tool: Tool, call_name: str | None) -> str | None:
    """The line a text gives a tool for ``run_code``: ``Python: async def ...``; None for a
    tool with no name to call it by."""
    if call_name is None:
        return None
    found = signature(call_name, tool.input_schema, tool.output_schema)
    return f"Python (run_code): `{found.render()}`"
