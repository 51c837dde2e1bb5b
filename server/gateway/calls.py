"""A downstream tool call's answer, shaped in one place for every path that makes the call.

:meth:`Gateway.call` is the one way a downstream tool is called: the stdio short path, the
MCP SDK's path and the awaited :meth:`Gateway.call_tool` all go through it, and each gets its
:data:`Answer` from :func:`shaped`: secrets masked, cut to ``max_result_bytes``, and a failure
mapped to what a host is answered with (a tool error, or for a call made as written the
JSON-RPC error the server answered with).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import mcp_types as types

from ..wire.results import capped_downstream, error_result
from .errors import GatewayError
from .trust.secrets import Redactor

__all__ = ["Answer", "AnswerFn", "Cancel", "Outcome", "Runner", "awaited", "shaped"]

Answer = types.CallToolResult | types.InputRequiredResult | dict[str, Any] | types.ErrorData
"""What a host is answered with: the downstream's result (as the SDK's model, or on the stdio
fast lane as the JSON object the server sent), a 2026-07-28 host's questions, a tool error
result, or the JSON-RPC error the server answered a call made as written with."""
AnswerFn = Callable[[Answer], None]
Cancel = Callable[[str], None]
"""Gives a call up (with the reason): its answer never comes."""
Runner = Callable[[Callable[[], Awaitable[None]]], None]
"""Takes the work of a call that needs a task (its session's lane), to run it."""

Outcome = types.CallToolResult | types.InputRequiredResult | dict[str, Any] | GatewayError


def shaped(
    outcome: Outcome, *, where: str, as_written: bool, redactor: Redactor, max_bytes: int
) -> Answer:
    """``outcome`` as a host gets it: a result with secrets masked and cut to ``max_bytes``
    (see :func:`capped_downstream`; ``where`` names server and tool), in the form it came in
    (the same object when nothing changed); a failure as a tool error naming server and
    tool, or, ``as_written``, as the JSON-RPC error the server answered with."""
    if isinstance(outcome, GatewayError):
        if as_written and outcome.error is not None:
            return outcome.error
        return error_result(str(outcome))
    if isinstance(outcome, types.InputRequiredResult):
        return redactor.redact_model(outcome)
    raw = outcome if isinstance(outcome, dict) else _json(outcome)
    masked = redactor.redact_json(raw) if redactor.contains_secret(raw) else raw
    capped = capped_downstream(where, masked, max_bytes)
    if isinstance(outcome, dict):
        return capped
    return outcome if capped is raw else types.CallToolResult.model_validate(capped)


async def awaited(start: Callable[[AnswerFn, Runner], Cancel]) -> Answer:
    """The answer of the call ``start(done, run)`` makes, awaited: work the call hands to
    ``run`` (its session's lane) runs here, in the caller's own task; a call answered
    elsewhere (the fast lane) is waited for. A cancelled caller gives the call up."""
    answers: list[Answer] = []
    answered = anyio.Event()
    work: list[Callable[[], Awaitable[None]]] = []

    def done(answer: Answer) -> None:
        if not answers:
            answers.append(answer)
            answered.set()

    cancel = start(done, work.append)
    try:
        for step in work:
            await step()
        await answered.wait()
    finally:
        if not answers:
            cancel("caller cancelled")
    return answers[0]


def _json(result: types.CallToolResult) -> dict[str, Any]:
    return result.model_dump(by_alias=True, mode="json", exclude_none=True)
