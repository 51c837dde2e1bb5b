"""Tool units: an assistant tool-call message together with the messages answering it.

Filters that drop or keep messages work on whole units, so they never separate a call from
its results. Units are found wherever the results are (even out of place), so they also
hold on windows that still need repair.
"""

from __future__ import annotations

from collections.abc import Sequence

from .messages import Message

__all__ = ["safe_cut", "tool_units"]


def tool_units(messages: Sequence[Message]) -> list[list[int]]:
    """Group message positions into units, ordered by their first position.

    A unit is one message, or an assistant message with tool calls plus every message that
    holds a result for one of those calls (chained when one message answers several).
    """
    owner: dict[str, int] = {}
    for index, message in enumerate(messages):
        for call_id in message.call_ids:
            owner.setdefault(call_id, index)
    parent = list(range(len(messages)))

    def find(index: int) -> int:
        while parent[index] != index:
            parent[index] = parent[parent[index]]
            index = parent[index]
        return index

    for index, message in enumerate(messages):
        for call_id in message.result_ids:
            caller = owner.get(call_id)
            if caller is not None:
                parent[find(index)] = find(caller)
    groups: dict[int, list[int]] = {}
    for index in range(len(messages)):
        groups.setdefault(find(index), []).append(index)
    return sorted(groups.values(), key=lambda unit: unit[0])


def safe_cut(messages: Sequence[Message], index: int) -> int:
    """The largest position ``<= index`` at which cutting the list splits no unit."""
    cut = max(0, min(index, len(messages)))
    spans = [(unit[0], unit[-1]) for unit in tool_units(messages) if len(unit) > 1]
    moved = True
    while moved:
        moved = False
        for first, last in spans:
            if first < cut <= last:
                cut, moved = first, True
    return cut
