"""What a filter is: a named function over messages with a frozen options dataclass.

A filter receives the messages (in order), its parsed options and a :class:`FilterRun`
(the run context, the conversation shape, the run's tally), and returns new messages. It
must not mutate the messages it receives; it builds new ones with
:func:`~contextcore.history.messages.make_message`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from ..context import RunContext
from ..messages import Message, Shape
from ..repair import RepairOptions
from ..report import Tally
from ..tokens import Tokenizer, message_tokens

__all__ = ["FilterDefinition", "FilterFunction", "FilterRun"]

OptionsT = TypeVar("OptionsT")


@dataclass(frozen=True)
class FilterRun:
    """Everything a filter may read during one run besides its messages and options."""

    context: RunContext
    shape: Shape | None
    tally: Tally
    repair: RepairOptions

    def pinned_tokens(self, tokenizer: Tokenizer, overhead: int) -> int:
        """Tokens taken by the pinned messages, which every budget must leave room for."""
        return sum(message_tokens(raw, tokenizer, overhead) for raw in self.context.pinned)


FilterFunction = Callable[[Sequence[Message], Any, FilterRun], list[Message]]


@dataclass(frozen=True)
class FilterDefinition(Generic[OptionsT]):
    """A registered filter: its name, its options type (a dataclass) and its function.

    Options arrive in camelCase (``maxTokens``) and map to the dataclass's snake_case
    fields (``max_tokens``); pydantic checks them against the field types (``Count``,
    ``Positive``, ``Flag``... in ``contextcore.history._options``).
    """

    name: str
    options_type: type[OptionsT]
    apply: Callable[[Sequence[Message], OptionsT, FilterRun], list[Message]]
    description: str = ""
