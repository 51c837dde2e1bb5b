"""Per-run input to the pipeline: collapsed groups, a token budget and pinned messages."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["CollapseGroup", "RunContext"]


@dataclass(frozen=True)
class CollapseGroup:
    """Messages a user collapsed into one named placeholder (per session)."""

    name: str
    message_ids: tuple[str, ...]
    description: str | None = None
    items: tuple[str, ...] | None = None

    def to_dict(self) -> dict[str, Any]:
        """The group as a JSON-ready dict."""
        data: dict[str, Any] = {"name": self.name, "messageIds": list(self.message_ids)}
        if self.description is not None:
            data["description"] = self.description
        if self.items is not None:
            data["items"] = list(self.items)
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> CollapseGroup:
        """Inverse of :meth:`to_dict`."""
        items = data.get("items")
        return cls(
            name=str(data["name"]),
            message_ids=tuple(str(i) for i in data.get("messageIds", ())),
            description=data.get("description"),
            items=tuple(str(i) for i in items) if items is not None else None,
        )


@dataclass(frozen=True)
class RunContext:
    """What one run needs besides the messages.

    ``max_tokens`` caps the budget of every size limiter (and, when the pipeline has none,
    adds a final budget guard). ``pinned`` messages (a summary, a snapshot) are put before the
    filtered window unchanged and their tokens are taken from the budget first.
    """

    groups: tuple[CollapseGroup, ...] = ()
    max_tokens: int | None = None
    pinned: tuple[Mapping[str, Any], ...] = field(default=())
