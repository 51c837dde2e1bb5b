"""Text the broker processes is handled in time linear in its size: a message holding one
huge token without spaces (a hex blob, a minified line) no longer freezes the broker.

These tests only guard "does not hang"; the growth figures are in benchmarks/text_paths.py."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import anyio
from mcp import Client

from tests.support.mcp_calls import call

# Generous, yet far below what the quadratic path took (about 22 s for 80 KB).
BOUND_S = 3.0
TOKEN_CHARS = 80_000


def _blob(unit: str, size: int = TOKEN_CHARS) -> str:
    return (unit * (size // len(unit) + 1))[:size]


def _chat(first: str, count: int = 12) -> list[dict[str, Any]]:
    """A conversation long enough for the summary policy, opening with ``first``."""
    rest = [
        {"role": "assistant" if i % 2 else "user", "content": f"message {i}"}
        for i in range(1, count)
    ]
    return [{"role": "user", "content": first}, *rest]


async def _timed(client: Client, name: str, **arguments: Any) -> dict[str, Any]:
    # A regex holds the GIL for its whole run, so the event loop (and the deadline) stays
    # frozen until it ends: the elapsed time is checked too, not only the deadline.
    started = time.monotonic()
    with anyio.fail_after(BOUND_S):
        result = await client.call_tool(name, arguments)
    elapsed = time.monotonic() - started
    assert elapsed < BOUND_S, f"{name} took {elapsed:.1f} s"
    assert not result.is_error, result.content
    assert isinstance(result.structured_content, dict)
    return result.structured_content


async def test_get_history_summarizes_a_message_with_an_80_kb_hex_token_without_hanging(
    history_client: Callable[..., Client],
) -> None:
    async with history_client() as client:
        sid = (await call(client, "create_session"))["session_id"]
        await call(
            client, "append_messages", session_id=sid, messages=_chat("see " + _blob("deadbeef"))
        )
        window = await _timed(client, "get_history", session_id=sid)
    update = window["summary_update"]
    assert update["updated"] and update["provider"] == "extractive"
    assert window["summary_used"]


async def test_summarizing_long_dashed_and_slashed_tokens_does_not_hang(
    history_client: Callable[..., Client],
) -> None:
    messages = [
        {"role": "user", "content": "look at " + _blob("a-", TOKEN_CHARS // 2)},
        {"role": "assistant", "content": "the path is " + _blob("src_/", TOKEN_CHARS // 2)},
        {"role": "user", "content": _blob("Aa_0.", TOKEN_CHARS // 2)},
    ]
    async with history_client() as client:
        done = await _timed(
            client, "summarize_history", messages=messages, previous_summary=_blob("x-", 19_000)
        )
    assert done["updated"] and done["summary"]["text"]
