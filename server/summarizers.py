"""Summary providers, tried in order, the one used reported: an LLM API (Anthropic Messages
or any OpenAI-compatible chat-completions endpoint), MCP sampling (only when the calling
client declares it and the connection can carry a server-to-client request), then the
extractive summarizer, which needs no LLM and never fails.

The domain's :class:`~contextcore.history.SummarizerChain` is synchronous and runs in the
tool call's worker thread; each async provider here is bridged back to the event loop with
``anyio.from_thread.run``. All providers of one chain share one deadline of
``[history.summarizer] timeout`` seconds, so a summary never holds a request longer than
that: whatever is left when the LLM API gives up is what sampling gets, and the extractive
summarizer needs no time budget. Failures (timeout, HTTP 429/500, malformed body, missing
key) are recorded as the attempt's error and the next provider is tried. The API key is read
from the environment variable named by ``api_key_env`` at call time and never appears in an
error or a log line.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Protocol

import anyio
import anyio.from_thread
import httpx
from mcp import types
from mcp.server import ServerRequestContext
from mcp.shared.message import ServerMessageMetadata

from contextcore.config import SummarizerConfig
from contextcore.history import ExtractiveSummarizer, Summarizer, SummarizerChain
from contextcore.history.messages import ToolCall, content_parts, make_message
from contextcore.history.summaries import EXTRACTIVE

__all__ = [
    "AnthropicSummarizer",
    "AsyncSummarizer",
    "Deadline",
    "OpenAISummarizer",
    "ProviderError",
    "Sampler",
    "SamplingSummarizer",
    "SummarizerFactory",
    "render_transcript",
    "sampler_for",
]

log = logging.getLogger(__name__)

ANTHROPIC_URL = "https://api.anthropic.com"
OPENAI_URL = "https://api.openai.com/v1"
ANTHROPIC_VERSION = "2023-06-01"
_PIECE_CHARS = 2000
_TRANSCRIPT_CHARS = 60_000

#: ``(system prompt, user prompt, max_tokens) -> text``: one MCP sampling round trip.
Sampler = Callable[[str, str, int], Awaitable[str]]


class ProviderError(Exception):
    """A provider could not produce a summary; the message says why (never the key)."""


class AsyncSummarizer(Protocol):
    """An async summary provider."""

    name: str

    async def summarize(
        self, messages: Sequence[Mapping[str, Any]], previous_summary: str | None, max_tokens: int
    ) -> str: ...


def system_prompt(max_tokens: int) -> str:
    """Instructions shared by every LLM provider."""
    return (
        "You maintain the running summary of a conversation between a user and an AI agent "
        "that uses tools. Fold the previous summary (if any) and the new messages into one "
        f"summary of at most {max_tokens} tokens. Keep errors, decisions, identifiers, file "
        "paths and numbers verbatim; keep what was done and what is still open. Write plain "
        "text, no preamble."
    )


def render_transcript(messages: Sequence[Mapping[str, Any]], previous_summary: str | None) -> str:
    """The prompt: the previous summary, then one line block per message (long parts cut,
    oldest dropped first when the whole is too long)."""
    blocks = [f"[{m.get('role', '?')}] {_message_text(m)}" for m in messages]
    total, kept = 0, []
    for block in reversed(blocks):
        total += len(block) + 1
        if total > _TRANSCRIPT_CHARS:
            break
        kept.append(block)
    head = f"Previous summary:\n{previous_summary}\n\n" if previous_summary else ""
    return f"{head}New messages:\n" + "\n".join(reversed(kept))


def _cut(text: str) -> str:
    return text if len(text) <= _PIECE_CHARS else text[:_PIECE_CHARS] + " …[cut]"


def _message_text(raw: Mapping[str, Any]) -> str:
    parts: list[str] = []
    for part in content_parts(make_message(raw)):
        if isinstance(part, str):
            parts.append(_cut(part))
        elif isinstance(part, ToolCall):
            arguments = json.dumps(dict(part.arguments), ensure_ascii=False)
            parts.append(f"(calls {part.name} {_cut(arguments)})")
        elif raw.get("role") == "tool":
            parts.append(_cut(part.text))
        else:
            parts.append(f"(tool result) {_cut(json.dumps(part.text, ensure_ascii=False))}")
    return " ".join(parts)


# -- HTTP providers ----------------------------------------------------------------------


class _HttpSummarizer:
    name = "http"
    default_url = ""

    def __init__(
        self,
        config: SummarizerConfig,
        *,
        environ: Mapping[str, str] | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.config = config
        self._environ = environ
        self._transport = transport

    def _key(self) -> str:
        name = self.config.api_key_env
        if not name:
            raise ProviderError("history.summarizer.api_key_env is not set")
        environ = os.environ if self._environ is None else self._environ
        key = environ.get(name, "")
        if not key:
            raise ProviderError(f"environment variable {name!r} is not set or empty")
        return key

    def _request(self, key: str, body: dict[str, Any]) -> tuple[str, dict[str, str]]:
        raise NotImplementedError

    def _text(self, data: Any) -> str:
        raise NotImplementedError

    async def summarize(
        self, messages: Sequence[Mapping[str, Any]], previous_summary: str | None, max_tokens: int
    ) -> str:
        if not self.config.model:
            raise ProviderError("history.summarizer.model is empty; name the model to use")
        key = self._key()
        body: dict[str, Any] = {
            "model": self.config.model,
            "max_tokens": self.config.max_tokens,
            "system": system_prompt(max_tokens),
            "prompt": render_transcript(messages, previous_summary),
        }
        url, headers = self._request(key, body)
        payload = self._payload(body)
        try:
            async with httpx.AsyncClient(
                timeout=self.config.timeout, transport=self._transport
            ) as client:
                response = await client.post(url, json=payload, headers=headers)
        except httpx.TimeoutException as exc:
            raise ProviderError(f"{url} timed out ({type(exc).__name__})") from None
        except httpx.HTTPError as exc:
            raise ProviderError(f"{url} failed: {type(exc).__name__}") from None
        if response.status_code != 200:
            raise ProviderError(f"{url} answered HTTP {response.status_code}")
        try:
            text = self._text(response.json())
        except (ValueError, KeyError, IndexError, TypeError, AttributeError) as exc:
            raise ProviderError(f"{url} sent a malformed body ({type(exc).__name__})") from None
        if not isinstance(text, str) or not text.strip():
            raise ProviderError(f"{url} sent no summary text")
        return text

    def _payload(self, body: dict[str, Any]) -> dict[str, Any]:
        raise NotImplementedError


class AnthropicSummarizer(_HttpSummarizer):
    """``POST {base_url}/v1/messages`` with ``x-api-key`` and ``anthropic-version``."""

    name = "anthropic"

    def _request(self, key: str, body: dict[str, Any]) -> tuple[str, dict[str, str]]:
        base = (self.config.base_url or ANTHROPIC_URL).rstrip("/")
        return f"{base}/v1/messages", {"x-api-key": key, "anthropic-version": ANTHROPIC_VERSION}

    def _payload(self, body: dict[str, Any]) -> dict[str, Any]:
        return {
            "model": body["model"],
            "max_tokens": body["max_tokens"],
            "system": body["system"],
            "messages": [{"role": "user", "content": body["prompt"]}],
        }

    def _text(self, data: Any) -> str:
        blocks = data["content"]
        return "".join(b["text"] for b in blocks if b.get("type") == "text")


class OpenAISummarizer(_HttpSummarizer):
    """``POST {base_url}/chat/completions`` with a Bearer key (any compatible endpoint)."""

    name = "openai"

    def _request(self, key: str, body: dict[str, Any]) -> tuple[str, dict[str, str]]:
        base = (self.config.base_url or OPENAI_URL).rstrip("/")
        return f"{base}/chat/completions", {"authorization": f"Bearer {key}"}

    def _payload(self, body: dict[str, Any]) -> dict[str, Any]:
        return {
            "model": body["model"],
            "max_tokens": body["max_tokens"],
            "messages": [
                {"role": "system", "content": body["system"]},
                {"role": "user", "content": body["prompt"]},
            ],
        }

    def _text(self, data: Any) -> str:
        text = data["choices"][0]["message"]["content"]
        if not isinstance(text, str):
            raise TypeError("content is not a string")
        return text


# -- MCP sampling ------------------------------------------------------------------------


class SamplingSummarizer:
    """Asks the connected client's model through ``sampling/createMessage``."""

    name = "sampling"

    def __init__(self, sampler: Sampler, max_tokens: int) -> None:
        self._sampler = sampler
        self._max_tokens = max_tokens

    async def summarize(
        self, messages: Sequence[Mapping[str, Any]], previous_summary: str | None, max_tokens: int
    ) -> str:
        prompt = render_transcript(messages, previous_summary)
        return await self._sampler(system_prompt(max_tokens), prompt, self._max_tokens)


def sampler_for(ctx: ServerRequestContext[Any] | None) -> Sampler | None:
    """A sampler over the calling client, or ``None`` when it did not declare sampling or
    the connection cannot carry a server-to-client request (2026-07-28 clients have no
    back-channel during a tool call)."""
    if ctx is None:
        return None
    session = ctx.session
    wanted = types.ClientCapabilities(sampling=types.SamplingCapability())
    if not session.check_client_capability(wanted) or not session.can_send_request:
        return None

    async def sample(system: str, prompt: str, max_tokens: int) -> str:
        # send_request, not the deprecated create_message wrapper (which warns).
        request = types.CreateMessageRequest(
            params=types.CreateMessageRequestParams(
                messages=[
                    types.SamplingMessage(
                        role="user", content=types.TextContent(type="text", text=prompt)
                    )
                ],
                system_prompt=system,
                max_tokens=max_tokens,
            )
        )
        result = await session.send_request(
            request,
            types.CreateMessageResult,
            metadata=ServerMessageMetadata(related_request_id=ctx.request_id),
        )
        content = result.content
        if not isinstance(content, types.TextContent):
            raise ProviderError(f"the client sampled {content.type!r} content, not text")
        return content.text

    return sample


# -- the chain ---------------------------------------------------------------------------


class Deadline:
    """One time budget shared by a chain's providers, started by the first one."""

    def __init__(self, seconds: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.seconds = seconds
        self._clock = clock
        self._start: float | None = None

    def remaining(self) -> float:
        """Seconds left (the budget starts counting on the first call)."""
        if self._start is None:
            self._start = self._clock()
        return self.seconds - (self._clock() - self._start)


class _Blocking:
    """A domain :class:`Summarizer` running an async provider on the event loop."""

    def __init__(self, provider: AsyncSummarizer, deadline: Deadline) -> None:
        self.provider = provider
        self.deadline = deadline

    def summarize(
        self, messages: Sequence[Mapping[str, Any]], previous_summary: str | None, max_tokens: int
    ) -> str:
        return anyio.from_thread.run(self._run, messages, previous_summary, max_tokens)

    async def _run(
        self, messages: Sequence[Mapping[str, Any]], previous_summary: str | None, max_tokens: int
    ) -> str:
        left = self.deadline.remaining()
        if left <= 0:
            raise ProviderError(f"the summary time budget of {self.deadline.seconds}s is used up")
        try:
            with anyio.fail_after(left):
                return await self.provider.summarize(messages, previous_summary, max_tokens)
        except TimeoutError:
            raise ProviderError(
                f"no answer within the summary time budget ({self.deadline.seconds}s)"
            ) from None


class SummarizerFactory:
    """Builds the chain for one call: configured LLM API, sampling (if offered), extractive.

    Build a fresh chain per tool call: its deadline starts with its first provider.
    """

    def __init__(
        self,
        config: SummarizerConfig,
        *,
        environ: Mapping[str, str] | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.config = config
        self._environ = environ
        self._transport = transport

    def api_provider(self) -> AsyncSummarizer | None:
        """The configured LLM API provider, or ``None`` for ``provider = "none"``."""
        kind = self.config.provider
        if kind == "anthropic":
            return AnthropicSummarizer(
                self.config, environ=self._environ, transport=self._transport
            )
        if kind == "openai":
            return OpenAISummarizer(self.config, environ=self._environ, transport=self._transport)
        return None

    def chain(self, sampler: Sampler | None = None) -> SummarizerChain:
        """The providers in order; sampling only with a ``sampler`` and ``use_sampling``."""
        deadline = Deadline(self.config.timeout)
        providers: list[tuple[str, Summarizer]] = []
        api = self.api_provider()
        if api is not None:
            providers.append((api.name, _Blocking(api, deadline)))
        if sampler is not None and self.config.use_sampling:
            sampling = SamplingSummarizer(sampler, self.config.max_tokens)
            providers.append((sampling.name, _Blocking(sampling, deadline)))
        providers.append((EXTRACTIVE, ExtractiveSummarizer()))
        return SummarizerChain(providers)
