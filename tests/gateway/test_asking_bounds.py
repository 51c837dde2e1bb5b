"""A downstream cannot flood a 2026-07-28 host's call with questions: beyond the bound, each
further question is refused at once, and the host is asked only the first ones."""

from __future__ import annotations

from typing import Any

import anyio
import mcp_types as types
from context_broker.server.gateway.relay.asking import MAX_QUESTIONS, Exchange


async def test_questions_beyond_the_bound_are_refused_at_once() -> None:
    exchange = Exchange("", "call", timeout=5)
    answers: list[Any] = []
    request = types.ListRootsRequest()

    async def ask() -> None:
        answers.append(await exchange.ask(request))

    async with anyio.create_task_group() as tg:
        for _ in range(MAX_QUESTIONS + 3):
            tg.start_soon(ask)
        await anyio.sleep(0.05)
        refused = [a for a in answers if isinstance(a, types.ErrorData)]
        assert len(refused) == 3 and all(a.code == types.INVALID_REQUEST for a in refused)
        asked = await exchange.next()
        assert isinstance(asked, dict) and len(asked) == MAX_QUESTIONS
        exchange.answer({key: {"roots": []} for key in asked})
    assert len(answers) == MAX_QUESTIONS + 3
    assert sum(a == {"roots": []} for a in answers) == MAX_QUESTIONS
