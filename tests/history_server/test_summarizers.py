"""The LLM API providers against a fake API on a real local socket: both protocols, and
every failure (timeout, 429, 500, malformed body, missing key) falling through to the next
provider with its reason recorded and the key never shown."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import pytest
from context_broker.server.summarizers import (
    AnthropicSummarizer,
    OpenAISummarizer,
    ProviderError,
    SummarizerFactory,
)
from fake_llm import SUMMARY, FakeLLM
from history_env import KEY, HistoryEnv, chat, summarizer_config

from contextcore.history import SummaryOutcome
from tests.support.broker_procs import server_env
from tests.support.mcp_calls import call

ENV = {"TEST_LLM_KEY": KEY}
# The real command with one module's import blocked, as if its SDK were not installed.
WITHOUT_MODULE = (
    "import sys; sys.modules[sys.argv[1]] = None; "
    "from context_broker.server.cli.commands import main; raise SystemExit(main(sys.argv[2:]))"
)


async def chain_summary(factory: SummarizerFactory) -> SummaryOutcome:
    chain = factory.chain()
    with anyio.fail_after(10):
        return await anyio.to_thread.run_sync(chain.summarize, chat(4), "before: chose sqlite", 200)


async def test_the_anthropic_provider_speaks_the_messages_api(fake_llm: FakeLLM) -> None:
    provider = AnthropicSummarizer(summarizer_config(fake_llm, "anthropic"), environ=ENV)
    with anyio.fail_after(10):
        text = await provider.summarize(chat(3), "before: chose sqlite", 200)
    assert text == SUMMARY
    path, headers, body = fake_llm.requests[-1]
    assert path == "/v1/messages"
    # The SDK sends the key as a bearer token and names the API version it speaks.
    assert headers["authorization"] == f"Bearer {KEY}" and headers["anthropic-version"]
    assert body["model"] == "test-model" and body["max_tokens"] == 500
    assert "200 tokens" in body["system"]
    prompt = body["messages"][0]["content"]
    assert "chose sqlite" in prompt and "src/file_2.py" in prompt


async def test_the_openai_provider_speaks_chat_completions(fake_llm: FakeLLM) -> None:
    provider = OpenAISummarizer(summarizer_config(fake_llm, "openai"), environ=ENV)
    with anyio.fail_after(10):
        text = await provider.summarize(chat(3), None, 200)
    assert text == SUMMARY
    path, headers, body = fake_llm.requests[-1]
    assert path == "/v1/chat/completions" and headers["authorization"] == f"Bearer {KEY}"
    assert [m["role"] for m in body["messages"]] == ["system", "user"]


@pytest.mark.parametrize("provider", ["anthropic", "openai"])
async def test_a_working_api_is_the_provider_used(fake_llm: FakeLLM, provider: str) -> None:
    outcome = await chain_summary(
        SummarizerFactory(summarizer_config(fake_llm, provider), environ=ENV)
    )
    assert outcome.provider == provider and outcome.text == SUMMARY


@pytest.mark.parametrize(
    ("behaviour", "reason"),
    [("429", "HTTP 429"), ("500", "HTTP 500"), ("malformed", "malformed body")],
)
@pytest.mark.parametrize("provider", ["anthropic", "openai"])
async def test_api_failures_fall_through_to_the_extractive_summarizer(
    fake_llm: FakeLLM, provider: str, behaviour: Any, reason: str
) -> None:
    fake_llm.behaviour = behaviour
    outcome = await chain_summary(
        SummarizerFactory(summarizer_config(fake_llm, provider), environ=ENV)
    )
    assert outcome.provider == "extractive" and outcome.text
    failed = outcome.attempts[0]
    assert failed.provider == provider and failed.error and reason in failed.error
    assert KEY not in failed.error


@pytest.mark.parametrize("provider", ["anthropic", "openai"])
async def test_a_hanging_api_costs_at_most_the_timeout(fake_llm: FakeLLM, provider: str) -> None:
    fake_llm.behaviour = "hang"
    factory = SummarizerFactory(summarizer_config(fake_llm, provider, timeout=0.5), environ=ENV)
    started = time.monotonic()
    outcome = await chain_summary(factory)
    assert time.monotonic() - started < 2.0
    assert outcome.provider == "extractive"
    error = outcome.attempts[0].error
    assert error and ("timed out" in error or "time budget" in error)


async def test_a_missing_key_names_the_variable_and_falls_through(fake_llm: FakeLLM) -> None:
    factory = SummarizerFactory(summarizer_config(fake_llm, "anthropic"), environ={})
    outcome = await chain_summary(factory)
    assert outcome.provider == "extractive"
    assert "'TEST_LLM_KEY' is not set" in str(outcome.attempts[0].error)
    assert fake_llm.requests == []


async def test_provider_errors_never_echo_the_key(fake_llm: FakeLLM) -> None:
    fake_llm.behaviour = "500"
    provider = OpenAISummarizer(summarizer_config(fake_llm, "openai"), environ=ENV)
    with anyio.fail_after(10), pytest.raises(ProviderError) as info:
        await provider.summarize(chat(2), None, 100)
    assert KEY not in str(info.value) and "HTTP 500" in str(info.value)


async def test_a_session_summary_by_the_api_is_stored_and_reported(
    fake_llm: FakeLLM, make_env: Callable[..., HistoryEnv]
) -> None:
    env = make_env(summarizer=summarizer_config(fake_llm, "anthropic"))
    async with env.client() as client:
        sid = (await call(client, "create_session"))["session_id"]
        await call(client, "append_messages", session_id=sid, messages=chat(12))
        window = await call(client, "get_history", session_id=sid)
        assert window["summary_update"]["provider"] == "anthropic"
        assert window["messages"][0]["content"] == f"[Earlier conversation summary: {SUMMARY}]"
        fake_llm.behaviour = "500"
        await call(client, "append_messages", session_id=sid, messages=chat(12, start=12))
        failed = await call(client, "summarize_history", session_id=sid)
        assert failed["provider"] == "extractive"
        assert [a["provider"] for a in failed["attempts"]] == ["anthropic", "extractive"]
        assert "HTTP 500" in failed["attempts"][0]["error"]


@pytest.mark.parametrize(("command", "provider"), [("serve", "anthropic"), ("check", "openai")])
def test_a_provider_whose_sdk_is_missing_is_refused_naming_the_extra(
    tmp_path: Path, command: str, provider: str
) -> None:
    config = tmp_path / "broker.toml"
    config.write_text(
        f'[search]\nsemantic = false\n\n[history.summarizer]\nprovider = "{provider}"\n'
        'model = "test-model"\napi_key_env = "TEST_LLM_KEY"\n',
        encoding="utf-8",
    )
    done = subprocess.run(
        [sys.executable, "-c", WITHOUT_MODULE, provider, command, "--config", str(config)],
        capture_output=True,
        stdin=subprocess.DEVNULL,
        text=True,
        timeout=90,
        env=server_env(),
        check=False,
    )
    output = done.stdout + done.stderr
    assert done.returncode == 1, output
    assert f"history.summarizer.provider = '{provider}' needs the {provider} SDK" in output
    assert f"pip install 'mcp-context-broker[{provider}]'" in output
