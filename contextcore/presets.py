"""Search presets (``conservative``, ``normal``, ``aggressive``) and how the parameters in
force for one request are resolved from the config, the session and the call.

A preset sets ``top_n``, ``include_score``, the two relevance floors (``top_k`` comes from
the config or the call): ``min_score`` for
rules and references, ``min_score_tools`` for tools, and ``conversation_weight``, how much a
follow-up's earlier turns count (``conservative`` selects for the message alone, so a session
created with it is not led by its past). Later sources win: the config's preset,
then values the config sets explicitly, then the session's preset, then the call's preset,
then values the call sets explicitly.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Literal, get_args

from .errors import SearchInputError
from .items import ItemType

__all__ = ["PRESETS", "PRESET_NAMES", "PresetName", "Selection", "parse_preset", "resolve"]

PresetName = Literal["conservative", "normal", "aggressive"]
PRESET_NAMES: tuple[PresetName, ...] = get_args(PresetName)


@dataclass(frozen=True)
class Selection:
    """The parameters agent items are chosen with for one request."""

    preset: PresetName
    top_k: int
    top_n: int
    include_score: float
    min_score: float
    min_score_tools: float
    conversation_weight: float = 0.0

    def floors(self) -> dict[ItemType, float]:
        """The relevance floor per item type."""
        return {"rule": self.min_score, "reference": self.min_score, "tool": self.min_score_tools}

    def to_dict(self) -> dict[str, Any]:
        return {
            "preset": self.preset,
            "top_k": self.top_k,
            "top_n": self.top_n,
            "include_score": self.include_score,
            "min_score": self.min_score,
            "min_score_tools": self.min_score_tools,
            "conversation_weight": self.conversation_weight,
        }


# Floors calibrated on the development sets (benchmarks/relevance.py): at "normal", clearly
# off-topic messages select nothing while recall@5 on MetaTool drops by less than one point.
PRESETS: dict[PresetName, Selection] = {
    "conservative": Selection("conservative", 20, 3, 0.8, 0.35, 0.32, 0.0),
    "normal": Selection("normal", 20, 5, 0.7, 0.25, 0.22, 1.0),
    "aggressive": Selection("aggressive", 20, 10, 0.6, 0.15, 0.12, 1.0),
}

_FIELDS = (
    "top_k",
    "top_n",
    "include_score",
    "min_score",
    "min_score_tools",
    "conversation_weight",
)


def parse_preset(value: object, *, field: str = "preset") -> PresetName:
    """Return ``value`` as a preset name, or raise naming ``field``."""
    for name in PRESET_NAMES:
        if value == name:
            return name
    raise SearchInputError(
        f"unknown preset {value!r}; use one of {', '.join(PRESET_NAMES)}", field=field
    )


def _apply(base: Selection, values: dict[str, Any]) -> Selection:
    given = {k: v for k, v in values.items() if k in _FIELDS and v is not None}
    return replace(base, **given) if given else base


def resolve(
    config_preset: PresetName,
    config_values: dict[str, Any],
    session_preset: PresetName | None = None,
    call_preset: PresetName | None = None,
    call_values: dict[str, Any] | None = None,
) -> Selection:
    """The parameters in force: presets and explicit values, later sources winning."""
    chosen = _apply(PRESETS[config_preset], config_values)
    if session_preset is not None:
        chosen = replace(PRESETS[session_preset], top_k=chosen.top_k)
    if call_preset is not None:
        chosen = replace(PRESETS[call_preset], top_k=chosen.top_k)
    return _apply(chosen, call_values or {})
