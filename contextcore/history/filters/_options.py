"""Parsing filter options from JSON (camelCase keys) into frozen option dataclasses."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any, Literal, TypeVar, get_args, get_origin, get_type_hints

from ...errors import HistoryError
from ..tokens import resolve_tokenizer

__all__ = ["camel", "parse_options"]

T = TypeVar("T")


def camel(name: str) -> str:
    """``max_tokens`` -> ``maxTokens``."""
    head, *rest = name.split("_")
    return head + "".join(part.title() for part in rest)


def parse_options(options_type: type[T], raw: object, where: str) -> T:
    """Build ``options_type`` from a JSON object, raising ``HistoryError`` naming the key."""
    if raw is None:
        return options_type()
    if not isinstance(raw, Mapping):
        raise HistoryError(f"{where} must be an object, got {raw!r}", field=where)
    fields = {camel(f.name): f for f in dataclasses.fields(options_type)}  # type: ignore[arg-type]
    hints = get_type_hints(options_type)
    values: dict[str, Any] = {}
    for key, value in raw.items():
        spec = fields.get(key)
        if spec is None:
            raise HistoryError(
                f"{where}.{key}: unknown option {key!r}; known options: {', '.join(fields)}",
                field=f"{where}.{key}",
            )
        values[spec.name] = _check(value, hints[spec.name], spec, f"{where}.{key}")
    return options_type(**values)


def _check(value: object, hint: Any, spec: dataclasses.Field[Any], where: str) -> Any:
    if spec.metadata.get("kind") == "tokenizer":
        resolve_tokenizer(value, field=where)
        return value
    origin = get_origin(hint)
    if origin is Literal:
        if value in get_args(hint):
            return value
        choices = ", ".join(repr(choice) for choice in get_args(hint))
        raise HistoryError(f"{where}: {value!r} is not one of {choices}", field=where)
    if origin is tuple:
        if isinstance(value, list | tuple) and all(isinstance(v, str) for v in value):
            return tuple(value)
        raise HistoryError(f"{where}: expected a list of strings, got {value!r}", field=where)
    if hint is bool:
        if isinstance(value, bool):
            return value
        raise HistoryError(f"{where}: expected true or false, got {value!r}", field=where)
    if hint is int or hint is float:
        return _number(value, hint, spec, where)
    if hint is str and isinstance(value, str):
        return value
    raise HistoryError(
        f"{where}: expected {getattr(hint, '__name__', hint)}, got {value!r}", field=where
    )


def _number(value: object, hint: type, spec: dataclasses.Field[Any], where: str) -> Any:
    ok = isinstance(value, int) if hint is int else isinstance(value, int | float)
    if isinstance(value, bool) or not ok:
        raise HistoryError(f"{where}: expected a number, got {value!r}", field=where)
    low = spec.metadata.get("min", 0)
    if value < low:
        raise HistoryError(f"{where}: {value!r} is below the minimum {low!r}", field=where)
    return value
