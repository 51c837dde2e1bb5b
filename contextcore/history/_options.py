"""Filter options from JSON (camelCase keys) into frozen option dataclasses, with pydantic.

An options dataclass declares its checks in its field types (the aliases below); pydantic
maps ``maxTokens`` to ``max_tokens`` and rejects unknown keys. Plain dataclasses of your own
filters get the same rules.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from functools import cache
from typing import Annotated, Any, TypeAlias, TypeVar

from pydantic import AfterValidator, ConfigDict, Field, Strict, TypeAdapter, ValidationError
from pydantic.alias_generators import to_camel

from ..errors import HistoryError
from .tokens import Tokenizer, resolve_tokenizer

__all__ = [
    "OPTIONS_CONFIG",
    "Count",
    "Flag",
    "Fraction",
    "Positive",
    "Text",
    "Texts",
    "TokenizerChoice",
    "camel",
    "parse_options",
]

T = TypeVar("T")

#: Set as ``__pydantic_config__`` on an options dataclass: camelCase keys, no unknown ones.
OPTIONS_CONFIG = ConfigDict(alias_generator=to_camel, extra="forbid")


def _known_tokenizer(value: str | Tokenizer) -> str | Tokenizer:
    try:
        resolve_tokenizer(value)
    except HistoryError as exc:
        raise ValueError(exc.message.removeprefix("tokenizer: ")) from None
    return value


Count: TypeAlias = Annotated[int, Strict(), Field(ge=0)]
Positive: TypeAlias = Annotated[int, Strict(), Field(ge=1)]
Fraction: TypeAlias = Annotated[float, Strict(), Field(ge=0)]
Flag: TypeAlias = Annotated[bool, Strict()]
Text: TypeAlias = Annotated[str, Strict()]
Texts: TypeAlias = tuple[Annotated[str, Strict()], ...]
TokenizerChoice: TypeAlias = Annotated[str | Tokenizer, AfterValidator(_known_tokenizer)]


def camel(name: str) -> str:
    """``max_tokens`` -> ``maxTokens``."""
    return to_camel(name)


def parse_options(options_type: type[T], raw: object, where: str) -> T:
    """Build ``options_type`` from a JSON object, raising ``HistoryError`` naming the key."""
    if raw is None:
        return options_type()
    if not isinstance(raw, Mapping):
        raise HistoryError(f"{where} must be an object, got {raw!r}", field=where)
    adapter: TypeAdapter[T] = _adapter(options_type)  # type: ignore[arg-type]
    try:
        return adapter.validate_python(dict(raw))
    except ValidationError as exc:
        raise _error(options_type, exc, where) from None


@cache
def _adapter(options_type: type[Any]) -> TypeAdapter[Any]:
    if "__pydantic_config__" in vars(options_type):
        return TypeAdapter(options_type)
    # A plain dataclass: the same rules, on a subclass so the caller's class is untouched.
    bound = type(options_type.__name__, (options_type,), {"__pydantic_config__": OPTIONS_CONFIG})
    return TypeAdapter(bound)


def _error(options_type: type[Any], exc: ValidationError, where: str) -> HistoryError:
    first = exc.errors()[0]
    key = ".".join(str(part) for part in first["loc"])
    field = f"{where}.{key}" if key else where
    if first["type"] == "unexpected_keyword_argument":
        known = ", ".join(camel(f.name) for f in dataclasses.fields(options_type))
        text = f"{field}: unknown option {key!r}; known options: {known}"
    elif first["type"] == "value_error":
        text = f"{field}: {first['msg'].removeprefix('Value error, ')}"
    else:
        text = f"{field}: {first['msg']}, got {first['input']!r}"
    return HistoryError(text, field=field)
