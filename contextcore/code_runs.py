"""The record of code mode's runs in a session: each program a model ran with ``run_code``,
the tool calls it made and its answer, kept in the session's ``code`` part beside the
variables runs keep (see :meth:`contextcore.store.JsonParts.code_state`).

A run belongs to the turn that was the session's latest when it ran, so a recorded request
context shows the runs made after it (``get_request_context`` and the viewer).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

__all__ = ["CodeCall", "CodeRun", "runs_of"]


@dataclass(frozen=True)
class CodeCall:
    """One tool call a program made: where it went and whether it succeeded."""

    server: str
    tool: str
    ok: bool


@dataclass(frozen=True)
class CodeRun:
    """One program run: when, after which turn, its code, its calls and its answer."""

    at: float
    turn: str | None
    code: str
    calls: tuple[CodeCall, ...]
    answer: str
    is_error: bool

    def to_json(self) -> dict[str, Any]:
        """The run as the store keeps it."""
        return asdict(self)

    @classmethod
    def of(cls, data: Mapping[str, Any]) -> CodeRun:
        """A stored run (fields a version without them did not write read as empty)."""
        calls = data.get("calls") or ()
        return cls(
            at=float(data.get("at", 0.0)),
            turn=data.get("turn"),
            code=str(data.get("code", "")),
            calls=tuple(
                CodeCall(str(c.get("server", "")), str(c.get("tool", "")), bool(c.get("ok")))
                for c in calls
                if isinstance(c, Mapping)
            ),
            answer=str(data.get("answer", "")),
            is_error=bool(data.get("is_error")),
        )


def runs_of(state: Mapping[str, Any] | None, turn: str | None = None) -> list[CodeRun]:
    """The runs a session's code state records, oldest first; with ``turn``, those made
    after that turn (while it was the latest)."""
    stored: Sequence[Any] = (state or {}).get("runs") or ()
    runs = [CodeRun.of(r) for r in stored if isinstance(r, Mapping)]
    return runs if turn is None else [r for r in runs if r.turn == turn]
