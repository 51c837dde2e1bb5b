"""Summary providers, tried in order, the one used reported: an LLM API (Anthropic Messages
or any OpenAI-compatible chat-completions endpoint, each through its provider's official SDK,
installed by the ``anthropic`` or ``openai`` extra), MCP sampling (only when the calling
client declares it and the connection can carry a server-to-client request), then the
extractive summarizer, which needs no LLM and never fails.

The domain's :class:`~contextcore.history.SummarizerChain` is synchronous and runs in the
tool call's worker thread; each async provider here is bridged back to the event loop with
``anyio.from_thread.run``. All providers of one chain share one deadline of
``[history.summarizer] timeout`` seconds, so a summary never holds a request longer than
that: whatever is left when the LLM API gives up is what sampling gets, and the extractive
summarizer needs no time budget. An SDK is imported on the first summary, in the worker
thread and before that budget starts; a config naming a provider whose SDK is missing is
refused at startup. Failures (timeout, HTTP 429/500, malformed body, missing key) are
recorded as the attempt's error and the next provider is tried, never retried by the SDK.
The API key is read from the environment variable named by ``api_key_env`` at call time
and never appears in an error or a log line.
"""

from __future__ import annotations

import importlib.util
import json
import logging
import os
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from types import ModuleType
from typing import Any, Protocol

import anyio
import anyio.from_thread
from mcp import types
from mcp.server import ServerRequestContext
from mcp.shared.message import ServerMessageMetadata

from contextcore.config import SummarizerConfig
from contextcore.errors import ConfigError
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
    "require_sdk",
    "sampler_for",
]

log = logging.getLogger(__name__)

ANTHROPIC_URL = "https://api.anthropic.com"
OPENAI_URL = "https://api.openai.com/v1"
_PIECE_CHARS = 2000
_TRANSCRIPT_CHARS = 60_000

#: ``(system prompt, user prompt, max_tokens) -> text``: one MCP sampling round trip.
Sampler = Callable[[str, str, int], Awaitable[str]]


class ProviderError(Exception):
    """A provider could not produce a summary; the message says why (never the key)."""


class AsyncSummarizer(Protocol):
    """An async summary provider."""

    name: str

    def prepare(self) -> None:
        """Load what the provider needs (called in the worker thread before the time
        budget starts)."""

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


# -- LLM API providers ------------------------------------------------------------------


def require_sdk(config: SummarizerConfig) -> None:
    """Refuse a config whose LLM API provider's SDK is not installed, naming the extra that
    brings it (the extra, the provider and the SDK's module share one name)."""
    provider = config.provider
    if provider != "none" and not _installed(provider):
        raise ConfigError(
            f"history.summarizer.provider = {provider!r} needs the {provider} SDK, which is not "
            f"installed; install the extra: pip install 'mcp-context-broker[{provider}]'",
            field="history.summarizer.provider",
        )


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ValueError:  # sys.modules holds None for it: its import is blocked
        return False


class _ApiSummarizer:
    """An LLM API through its provider's official SDK, which is imported on first use (it
    takes a second or more) and never retries: a failure falls through to the next provider."""

    name = "api"
    default_url = ""

    def __init__(self, config: SummarizerConfig, *, environ: Mapping[str, str] | None = None):
        self.config = config
        self._environ = environ

    @property
    def url(self) -> str:
        """Where requests go; always explicit, so no SDK environment variable redirects them."""
        return (self.config.base_url or self.default_url).rstrip("/")

    def prepare(self) -> None:
        self._sdk()

    def _sdk(self) -> ModuleType:
        raise NotImplementedError

    async def _ask(self, key: str, system: str, prompt: str) -> str | None:
        raise NotImplementedError

    def _key(self) -> str:
        name = self.config.api_key_env
        if not name:
            raise ProviderError("history.summarizer.api_key_env is not set")
        environ = os.environ if self._environ is None else self._environ
        key = environ.get(name, "")
        if not key:
            raise ProviderError(f"environment variable {name!r} is not set or empty")
        return key

    async def summarize(
        self, messages: Sequence[Mapping[str, Any]], previous_summary: str | None, max_tokens: int
    ) -> str:
        if not self.config.model:
            raise ProviderError("history.summarizer.model is empty; name the model to use")
        key = self._key()
        sdk, url = self._sdk(), self.url
        prompt = render_transcript(messages, previous_summary)
        try:
            text = await self._ask(key, system_prompt(max_tokens), prompt)
        except sdk.APITimeoutError:
            raise ProviderError(f"{url} timed out") from None
        except sdk.APIStatusError as exc:
            raise ProviderError(f"{url} answered HTTP {exc.status_code}") from None
        except sdk.APIConnectionError as exc:
            raise ProviderError(f"{url} failed: {type(exc.__cause__ or exc).__name__}") from None
        except (sdk.APIResponseValidationError, *_MALFORMED) as exc:
            raise ProviderError(f"{url} sent a malformed body ({type(exc).__name__})") from None
        if not isinstance(text, str) or not text.strip():
            raise ProviderError(f"{url} sent no summary text")
        return text


# What reading a body of the wrong shape raises (the SDKs build their models unvalidated).
_MALFORMED = (ValueError, KeyError, IndexError, TypeError, AttributeError)


class AnthropicSummarizer(_ApiSummarizer):
    """The Anthropic Messages API (``{base_url}/v1/messages``) through the ``anthropic`` SDK."""

    name = "anthropic"
    default_url = ANTHROPIC_URL

    def _sdk(self) -> ModuleType:
        import anthropic

        return anthropic

    async def _ask(self, key: str, system: str, prompt: str) -> str | None:
        import anthropic

        async with anthropic.AsyncAnthropic(
            api_key=key, base_url=self.url, timeout=self.config.timeout, max_retries=0
        ) as client:
            message = await client.messages.create(
                model=self.config.model,
                max_tokens=self.config.max_tokens,
                system=system,
                messages=[{"role": "user", "content": prompt}],
            )
        return "".join(block.text for block in message.content if block.type == "text")


class OpenAISummarizer(_ApiSummarizer):
    """Chat completions (``{base_url}/chat/completions``) through the ``openai`` SDK: the
    OpenAI API or any compatible endpoint."""

    name = "openai"
    default_url = OPENAI_URL

    def _sdk(self) -> ModuleType:
        import openai

        return openai

    async def _ask(self, key: str, system: str, prompt: str) -> str | None:
        import openai

        async with openai.AsyncOpenAI(
            api_key=key, base_url=self.url, timeout=self.config.timeout, max_retries=0
        ) as client:
            completion = await client.chat.completions.create(
                model=self.config.model,
                max_tokens=self.config.max_tokens,
                messages=[
                    {"role": "system", "content": system},
                    {"role": "user", "content": prompt},
                ],
            )
        return completion.choices[0].message.content


# -- MCP sampling ------------------------------------------------------------------------


class SamplingSummarizer:
    """Asks the connected client's model through ``sampling/createMessage``."""

    name = "sampling"

    def __init__(self, sampler: Sampler, max_tokens: int) -> None:
        self._sampler = sampler
        self._max_tokens = max_tokens

    def prepare(self) -> None:
        """Nothing to load."""

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
        self.provider.prepare()
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

    Build a fresh chain per tool call: its deadline starts with its first provider. Raises
    :class:`ConfigError` when the configured provider's SDK is not installed.
    """

    def __init__(
        self, config: SummarizerConfig, *, environ: Mapping[str, str] | None = None
    ) -> None:
        require_sdk(config)
        self.config = config
        self._environ = environ

    def api_provider(self) -> AsyncSummarizer | None:
        """The configured LLM API provider, or ``None`` for ``provider = "none"``."""
        kind = self.config.provider
        if kind == "anthropic":
            return AnthropicSummarizer(self.config, environ=self._environ)
        if kind == "openai":
            return OpenAISummarizer(self.config, environ=self._environ)
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
