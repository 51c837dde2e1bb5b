"""``collapseGroupReplacer``: one placeholder per collapsed group, where the group starts.

The placeholder is a message whose content is the JSON
``{"type": "collapsed_group", "name", "description"?, "items"?}``. A message listed in
several groups belongs to the first. If a group splits a tool call from its result, the
final ``toolCallBackfill`` repairs the chain.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from .._options import OPTIONS_CONFIG
from ..context import CollapseGroup
from ..messages import Message, make_message
from .base import FilterDefinition, FilterRun

__all__ = ["COLLAPSE_GROUP_REPLACER", "CollapseOptions", "collapse_groups", "placeholder_for"]


@dataclass(frozen=True)
class CollapseOptions:
    """Options of ``collapseGroupReplacer``: the placeholder's role."""

    __pydantic_config__ = OPTIONS_CONFIG

    role: Literal["system", "user"] = "system"


def placeholder_for(group: CollapseGroup, role: str = "system") -> Message:
    """The placeholder message standing for ``group``."""
    body: dict[str, Any] = {"type": "collapsed_group", "name": group.name}
    if group.description is not None:
        body["description"] = group.description
    if group.items is not None:
        body["items"] = list(group.items)
    return make_message(
        {
            "role": role,
            "content": json.dumps(body, ensure_ascii=False),
            "id": f"collapsed:{group.name}",
        }
    )


def collapse_groups(
    messages: Sequence[Message], options: CollapseOptions, run: FilterRun
) -> list[Message]:
    """Replace the messages of each group by its placeholder, at the group's first message."""
    groups = run.context.groups
    owner: dict[str, int] = {}
    for index, group in enumerate(groups):
        for message_id in group.message_ids:
            owner.setdefault(message_id, index)
    out: list[Message] = []
    placed: set[int] = set()
    for message in messages:
        found = owner.get(message.id)
        if found is None:
            out.append(message)
            continue
        run.tally.collapsed += 1
        if found not in placed:
            placed.add(found)
            out.append(placeholder_for(groups[found], options.role))
    return out


COLLAPSE_GROUP_REPLACER: FilterDefinition[CollapseOptions] = FilterDefinition(
    "collapseGroupReplacer",
    CollapseOptions,
    collapse_groups,
    "replace each collapsed group by one placeholder message",
)
