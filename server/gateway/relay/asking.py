"""What a downstream asks during a 2026-07-28 host's call, asked in that call's answer.

A host on the 2026-07-28 wire cannot be sent a request: a server that needs something of it
answers the call with an ``InputRequiredResult`` (the questions, and a ``requestState``), and
the host calls again with its ``inputResponses``. A downstream on the handshake-era wire (a
stdio or SSE server, an older HTTP one) asks with requests of its own during the call, and
the MCP client the broker uses answers a 2026-07-28 downstream's ``InputRequiredResult``
through the same callbacks; both reach :mod:`.relay`, which hands the question to the call's
:class:`Exchange`.

So a 2026-07-28 host's call runs as an exchange: the downstream call runs in the gateway's
task group, not in the host's request, and the host's request waits for whichever comes
first, the call's result or questions. Questions are answered to the host as an
``InputRequiredResult`` whose ``requestState`` the broker keeps (a random token, not signed
data: the host can only hand it back), valid once, for the same tool and arguments, from the
host it was given to (the same profile and, over HTTP, the same bearer token, else the same
stream: see :attr:`.host.Host.holder`); the downstream's requests keep waiting meanwhile. A
retry carrying the token answers them and waits again: several questions at once and several
rounds work. A host that does not come back within the server's ``timeout`` gets nothing
more: the downstream's questions are answered with an error and the call is cancelled (the
downstream gets ``notifications/cancelled``), so no downstream request is left waiting. A
retry with a token the broker did not issue, issued for another call or another host, or
expired, is refused with ``-32602`` and touches nothing, so a token another host saw redeems
nothing for it.
"""

from __future__ import annotations

import itertools
import json
import logging
import secrets
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from dataclasses import dataclass, field
from typing import Any

import anyio
import mcp_types as types
from mcp.shared.exceptions import MCPError

__all__ = ["PREFIX", "Asking", "Exchange", "call_key"]

log = logging.getLogger(__name__)

PREFIX = "cb-ask."
"""Every ``requestState`` the broker issues starts with this; others are a downstream's."""
LIMIT = 256
"""Exchanges waiting for a host's answers at once; the oldest is given up beyond it."""
MAX_QUESTIONS = 16
"""Questions one call may have open at once; a downstream asking more gets an error for each."""
_SETTLE = 0.02
"""How long a first question waits for others asked with it, so they go in one answer."""

Outcome = types.CallToolResult | types.InputRequiredResult
Forward = Callable[["Exchange"], Awaitable[Outcome]]
Spawn = Callable[[Callable[[], Coroutine[Any, Any, None]]], None]


def call_key(name: str, arguments: Mapping[str, Any] | None) -> str:
    """What a retry must repeat: the tool's name and its arguments."""
    return json.dumps([name, arguments or {}], sort_keys=True, default=str)


@dataclass
class _Question:
    request: types.InputRequest
    answered: anyio.Event = field(default_factory=anyio.Event)
    answer: dict[str, Any] | types.ErrorData | None = None


class Exchange:
    """One host call's downstream call and the questions it asked that the host has not
    answered yet."""

    def __init__(self, owner: str, call: str, timeout: float) -> None:
        self.owner = owner
        self.call = call
        self.timeout = timeout
        """How long the host has to come back with its answers."""
        self.scope = anyio.CancelScope()
        self.done = anyio.Event()
        self.outcome: Outcome | None = None
        self.error: Exception | None = None
        self._keys = itertools.count(1)
        self._open: dict[str, _Question] = {}
        self._unsent: list[str] = []
        self._changed = anyio.Event()

    async def ask(self, request: types.InputRequest) -> dict[str, Any] | types.ErrorData:
        """Put ``request`` to the host in the call's next answer and wait for its response
        (the wire JSON of the host's ``inputResponses`` entry), or the error it ended with; a
        question beyond :data:`MAX_QUESTIONS` open ones is refused at once."""
        if len(self._open) >= MAX_QUESTIONS:
            return types.ErrorData(
                code=types.INVALID_REQUEST,
                message=f"{request.method}: this call already has {MAX_QUESTIONS} questions "
                "waiting for the host",
            )
        key = f"q{next(self._keys)}"
        question = _Question(request)
        self._open[key] = question
        self._unsent.append(key)
        self._changed.set()
        try:
            await question.answered.wait()
        finally:
            self._open.pop(key, None)
        assert question.answer is not None
        return question.answer

    def answer(self, responses: Mapping[str, Any]) -> None:
        """The host's ``inputResponses``: each answers the question of its key; a question
        the host left unanswered is asked again in the next answer."""
        for key, question in list(self._open.items()):
            if key in self._unsent:
                continue
            if isinstance(responses.get(key), dict):
                question.answer = responses[key]
                question.answered.set()
            else:
                self._unsent.append(key)
        self._changed.set()

    def abandon(self, why: str) -> None:
        """Give the call up: every open question gets ``why`` as an error, the call is
        cancelled."""
        for question in self._open.values():
            question.answer = types.ErrorData(code=types.REQUEST_TIMEOUT, message=why)
            question.answered.set()
        self.scope.cancel()

    async def run(self, forward: Forward) -> None:
        """The downstream call, in the gateway's task group."""
        with self.scope:
            try:
                self.outcome = await forward(self)
            except Exception as exc:  # answered to the host by :meth:`next`
                self.error = exc
        if self.outcome is None and self.error is None:
            self.error = MCPError(types.REQUEST_TIMEOUT, "the call was given up")
        self.done.set()
        self._changed.set()

    async def next(self) -> Outcome | dict[str, types.InputRequest]:
        """The call's outcome, or the questions to put to the host now."""
        while True:
            if self._unsent:
                with anyio.move_on_after(_SETTLE):
                    await self.done.wait()  # others asked together come in the same answer
                asked = {k: self._open[k].request for k in self._unsent if k in self._open}
                self._unsent.clear()
                if asked:
                    return asked
                continue
            if self.done.is_set():
                if self.error is not None:
                    raise self.error
                assert self.outcome is not None
                return self.outcome
            self._changed = anyio.Event()
            await self._changed.wait()


class Asking:
    """The exchanges waiting for a host's answers, by the ``requestState`` issued for them.
    ``spawn`` runs a task in the gateway's task group."""

    def __init__(self, spawn: Spawn) -> None:
        self._spawn = spawn
        self._waiting: OrderedDict[str, Exchange] = OrderedDict()

    def waiting(self) -> int:
        """Exchanges waiting for a host to come back."""
        return len(self._waiting)

    async def call(
        self,
        owner: str,
        call: str,
        retry: Mapping[str, Any] | None,
        forward: Forward,
        timeout: float,
    ) -> Outcome:
        """A 2026-07-28 host's call (``owner``: whose, the profile and the host's
        :attr:`.host.Host.holder`; ``call``: :func:`call_key`) as an
        exchange: a new one running ``forward``, or, when ``retry`` carries a
        ``requestState`` the broker issued, the waiting one it answers. The host has
        ``timeout`` seconds to come back with answers."""
        state = (retry or {}).get("requestState")
        if isinstance(state, str) and state.startswith(PREFIX):
            exchange = self._resumed(state, owner, call)
            responses = (retry or {}).get("inputResponses")
            exchange.answer(responses if isinstance(responses, Mapping) else {})
        else:
            exchange = Exchange(owner, call, timeout)
            self._spawn(lambda: exchange.run(forward))
        finished = False
        try:
            outcome = await exchange.next()
            finished = True
        finally:
            if not finished:  # the host's request went (cancelled, or it failed)
                exchange.abandon("the host's request ended")
        if isinstance(outcome, dict):
            return self._asked(exchange, outcome)
        return outcome

    def _resumed(self, state: str, owner: str, call: str) -> Exchange:
        exchange = self._waiting.get(state)
        if exchange is None or exchange.owner != owner or exchange.call != call:
            raise MCPError(
                types.INVALID_PARAMS,
                "requestState: not one this broker issued for this call, or it expired; "
                "call the tool again without it",
            )
        del self._waiting[state]
        return exchange

    def _asked(
        self, exchange: Exchange, questions: dict[str, types.InputRequest]
    ) -> types.InputRequiredResult:
        """The answer putting ``questions`` to the host, under a fresh token."""
        while len(self._waiting) >= LIMIT:
            _, oldest = self._waiting.popitem(last=False)
            oldest.abandon("too many calls were waiting for their hosts' answers")
        token = PREFIX + secrets.token_urlsafe(32)
        self._waiting[token] = exchange
        self._spawn(lambda: self._expire(token, exchange))
        return types.InputRequiredResult(input_requests=questions, request_state=token)

    async def _expire(self, token: str, exchange: Exchange) -> None:
        await anyio.sleep(exchange.timeout)
        if self._waiting.get(token) is exchange:
            del self._waiting[token]
            why = f"the host did not answer within {exchange.timeout:g}s"
            log.info("a downstream call was given up: %s", why)
            exchange.abandon(why)
