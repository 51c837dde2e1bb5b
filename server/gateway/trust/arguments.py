"""Checks a downstream tool call's arguments against the tool's input schema before it is
forwarded, so a model that built bad arguments learns what is wrong without the call
reaching the server.

The schema is read as its server wrote it (JSON Schema 2020-12 by default, or the dialect
its ``$schema`` names): ``$ref``s into the same document (``#/$defs/...``, ``$anchor``s)
are resolved; a ``$ref`` to any other URI is never fetched and accepts anything (MCP forbids
clients to dereference network references), leaving that part to the server.
"""

from __future__ import annotations

import json
import logging
from collections import OrderedDict
from collections.abc import Mapping
from functools import lru_cache
from typing import Any

import jsonschema
from jsonschema.exceptions import SchemaError
from jsonschema.protocols import Validator
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012

__all__ = ["schema_problem"]

log = logging.getLogger(__name__)

_MAX_SCHEMA_CHARS = 1200
_MAX_PROBLEMS = 3


def _without_patterns(node: Any) -> Any:
    """The schema without ``pattern`` and ``patternProperties``: their regular expressions
    come from the downstream server and would run on the broker's event loop in time no one
    bounds, so the broker checks types, required properties and structure and leaves
    patterns to the server itself."""
    if isinstance(node, dict):
        out: dict[str, Any] = {}
        for key, value in node.items():
            if (key == "pattern" and isinstance(value, str)) or key == "patternProperties":
                continue
            if key in ("properties", "$defs", "definitions") and isinstance(value, dict):
                # names of properties or definitions, not keywords: keep every one
                out[key] = {name: _without_patterns(sub) for name, sub in value.items()}
            else:
                out[key] = _without_patterns(value)
        return out
    if isinstance(node, list):
        return [_without_patterns(v) for v in node]
    return node


def _unchecked_remote(uri: str) -> Resource[Any]:
    """What a ``$ref`` outside the schema resolves to: a schema any value satisfies (the
    reference is not fetched)."""
    return Resource.from_contents({}, default_specification=DRAFT202012)


# Resolves only what the schema itself defines; every other URI gets _unchecked_remote.
_LOCAL_ONLY: Registry[Any] = Registry(retrieve=_unchecked_remote)  # type: ignore[call-arg]


@lru_cache(maxsize=512)
def _validator(schema_json: str) -> Validator | None:
    schema = _without_patterns(json.loads(schema_json))
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    try:
        cls.check_schema(schema)
    except SchemaError as exc:
        # A server's broken schema must not make its tool uncallable: its own checks apply.
        log.warning("input schema cannot be used for checking (%s); forwarding unchecked", exc)
        return None
    validator: Validator = cls(schema, format_checker=cls.FORMAT_CHECKER, registry=_LOCAL_ONLY)
    return validator


# The catalog keeps a tool's schema object until the tool changes, so a call finds its
# validator by the object's identity without serializing the schema again.
_BY_OBJECT: OrderedDict[int, tuple[Mapping[str, Any], str, Validator | None]] = OrderedDict()


def _compiled(schema: Mapping[str, Any]) -> tuple[str, Validator | None]:
    """The schema as canonical JSON and its validator (None: not usable for checking)."""
    hit = _BY_OBJECT.get(id(schema))
    if hit is not None and hit[0] is schema:
        return hit[1], hit[2]
    schema_json = json.dumps(schema, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    _BY_OBJECT[id(schema)] = (schema, schema_json, _validator(schema_json))
    while len(_BY_OBJECT) > 512:
        _BY_OBJECT.popitem(last=False)
    return schema_json, _BY_OBJECT[id(schema)][2]


def _where(path: Any) -> str:
    parts = [str(p) for p in path]
    return "arguments" + "".join(f"[{p!r}]" if not p.isdigit() else f"[{p}]" for p in parts)


def schema_problem(
    server: str, tool: str, schema: Mapping[str, Any], arguments: Mapping[str, Any]
) -> str | None:
    """None when ``arguments`` satisfy ``schema``; else a message quoting the problems and
    the schema. A ``null`` given for an argument the schema does not require counts as
    leaving it out (callers write omitted arguments so; the server reads them as it will)."""
    if not schema:
        return None
    required = schema.get("required")
    needed = set(required) if isinstance(required, list | tuple) else set()
    checked = {k: v for k, v in arguments.items() if v is not None or k in needed}
    try:
        schema_json, validator = _compiled(schema)
        if validator is None:
            return None
        errors = sorted(validator.iter_errors(checked), key=lambda e: list(e.path))
    except (RecursionError, ValueError, TypeError) as exc:
        # A schema too deep or odd to check must not fail the call: the server checks.
        log.warning("arguments for %s/%s forwarded unchecked: %s", server, tool, exc)
        return None
    if not errors:
        return None
    problems = "; ".join(
        f"{_where(e.absolute_path)}: {e.message[:200]}" for e in errors[:_MAX_PROBLEMS]
    )
    if len(errors) > _MAX_PROBLEMS:
        problems += f"; and {len(errors) - _MAX_PROBLEMS} more"
    shown = schema_json if len(schema_json) <= _MAX_SCHEMA_CHARS else schema_json[:1199] + "…"
    return (
        f"arguments for {server}/{tool} do not match its input schema, so the call was not "
        f"forwarded: {problems}. Input schema: {shown}"
    )
