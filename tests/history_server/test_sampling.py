"""MCP sampling as a summary provider: used when the calling client declares it (and the
connection can carry the request), skipped otherwise, and tried after a failing LLM API."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fake_llm import FakeLLM
from history_env import HistoryEnv, chat, summarizer_config
from mcp import types

from tests.support.mcp_calls import call

SAMPLED = "SAMPLED SUMMARY: decided to keep sqlite"


class Sampling:
    """A client's sampling callback that records what it was asked."""

    def __init__(self) -> None:
        self.requests: list[types.CreateMessageRequestParams] = []

    async def __call__(
        self, context: Any, params: types.CreateMessageRequestParams
    ) -> types.CreateMessageResult:
        self.requests.append(params)
        return types.CreateMessageResult(
            role="assistant", content=types.TextContent(type="text", text=SAMPLED), model="fake"
        )


async def summarize(env: HistoryEnv, mode: str, **client: Any) -> dict[str, Any]:
    async with env.client(mode, **client) as c:
        sid = (await call(c, "create_session"))["session_id"]
        await call(c, "append_messages", session_id=sid, messages=chat(12))
        return await call(c, "summarize_history", session_id=sid)


async def test_a_client_that_declares_sampling_writes_the_summary(env: HistoryEnv) -> None:
    sampling = Sampling()
    out = await summarize(env, "legacy", sampling_callback=sampling)
    assert out["provider"] == "sampling" and out["summary"]["text"] == SAMPLED
    assert [a["provider"] for a in out["attempts"]] == ["sampling"]
    (params,) = sampling.requests
    assert params.max_tokens == 500 and params.system_prompt
    prompt = params.messages[0].content
    assert isinstance(prompt, types.TextContent) and "src/file_0.py" in prompt.text


async def test_a_client_without_sampling_gets_the_extractive_summary(env: HistoryEnv) -> None:
    out = await summarize(env, "legacy")
    assert out["provider"] == "extractive"
    assert [a["provider"] for a in out["attempts"]] == ["extractive"]


async def test_a_2026_client_has_no_back_channel_so_sampling_is_skipped(env: HistoryEnv) -> None:
    sampling = Sampling()
    out = await summarize(env, "auto", sampling_callback=sampling)
    assert out["provider"] == "extractive" and sampling.requests == []


async def test_sampling_is_tried_after_a_failing_llm_api(
    fake_llm: FakeLLM, make_env: Callable[..., HistoryEnv]
) -> None:
    fake_llm.behaviour = "429"
    env = make_env(summarizer=summarizer_config(fake_llm, "openai"))
    out = await summarize(env, "legacy", sampling_callback=Sampling())
    assert out["provider"] == "sampling"
    assert [a["provider"] for a in out["attempts"]] == ["openai", "sampling"]
    assert "HTTP 429" in out["attempts"][0]["error"]


async def test_use_sampling_off_skips_it(make_env: Callable[..., HistoryEnv]) -> None:
    from contextcore.config import SummarizerConfig

    env = make_env(summarizer=SummarizerConfig(use_sampling=False))
    sampling = Sampling()
    out = await summarize(env, "legacy", sampling_callback=sampling)
    assert out["provider"] == "extractive" and sampling.requests == []


async def test_a_failing_sampling_callback_falls_through(env: HistoryEnv) -> None:
    async def refuse(context: Any, params: types.CreateMessageRequestParams) -> types.ErrorData:
        return types.ErrorData(code=-1, message="user declined")

    out = await summarize(env, "legacy", sampling_callback=refuse)
    assert out["provider"] == "extractive"
    assert out["attempts"][0]["provider"] == "sampling" and out["attempts"][0]["error"]
