"""Message builders and Hypothesis strategies shared by the history tests."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import strategies as st

Msg = dict[str, Any]


def oa_call(call_id: str, name: str = "read_file", **arguments: Any) -> Msg:
    """One OpenAI tool call entry."""
    return {
        "id": call_id,
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(arguments)},
    }


def oa_assistant_calls(*calls: Msg, content: str | None = None) -> Msg:
    """An OpenAI assistant message making ``calls``."""
    return {"role": "assistant", "content": content, "tool_calls": list(calls)}


def oa_result(call_id: str, content: str = "ok") -> Msg:
    """An OpenAI tool result message."""
    return {"role": "tool", "tool_call_id": call_id, "content": content}


def an_tool_use(call_id: str, name: str = "read_file", **arguments: Any) -> Msg:
    """An Anthropic tool_use block."""
    return {"type": "tool_use", "id": call_id, "name": name, "input": arguments}


def an_result(call_id: str, content: str = "ok", is_error: bool = False) -> Msg:
    """An Anthropic tool_result block."""
    return {"type": "tool_result", "tool_use_id": call_id, "content": content, "is_error": is_error}


def text(role: str, content: str) -> Msg:
    """A plain text message."""
    return {"role": role, "content": content}


_SIZES = st.sampled_from([0, 4, 40, 400, 3000, 60000])
_TOOLS = st.sampled_from(["read_file", "write_file", "ls", "browser_snapshot", "run_command"])


def _payload(size: int, salt: str) -> str:
    if size == 0:
        return ""
    return (f"{salt} " + "x" * size)[:size]


@st.composite
def conversations(draw: st.DrawFn, shape: str | None = None, messy: bool = True) -> list[Msg]:
    """Conversations in one shape, with parallel tool calls and (when ``messy``) delayed,
    missing and orphan results, empty messages and huge contents."""
    shape = shape or draw(st.sampled_from(["openai", "anthropic"]))
    out: list[Msg] = []
    pending: list[tuple[int, str, str]] = []
    steps = draw(st.integers(0, 14))
    kinds = ["system", "user", "assistant", "tools", "tools"]
    if messy:
        kinds += ["orphan", "empty"]
    for step in range(steps):
        kind = draw(st.sampled_from(kinds))
        if kind in ("system", "user", "assistant"):
            body = _payload(draw(_SIZES), f"{kind}{step}") or f"{kind} {step}"
            out.append(text(kind, body))
        elif kind == "empty":
            out.append(text(draw(st.sampled_from(["user", "assistant"])), ""))
        elif kind == "orphan":
            _emit_results(out, shape, [(f"ghost_{step}", "stray result")])
        else:
            ids = [f"call_{step}_{j}" for j in range(draw(st.integers(1, 3)))]
            names = [draw(_TOOLS) for _ in ids]
            _emit_calls(out, shape, ids, names, step)
            now = []
            for call_id in ids:
                fate = draw(
                    st.sampled_from(["now", "now", "later", "missing"]) if messy else st.just("now")
                )
                body = _payload(draw(_SIZES), call_id) or ("" if messy else "ok")
                if fate == "now":
                    now.append((call_id, body))
                elif fate == "later":
                    pending.append((draw(st.integers(1, 3)), call_id, body))
            if messy and draw(st.booleans()):
                now.reverse()
            _emit_results(out, shape, now)
        due = [(c, b) for d, c, b in pending if d <= 1]
        pending = [(d - 1, c, b) for d, c, b in pending if d > 1]
        _emit_results(out, shape, due)
    return out


def _emit_calls(out: list[Msg], shape: str, ids: list[str], names: list[str], step: int) -> None:
    if shape == "openai":
        calls = [oa_call(c, n, path=f"src/f{step % 3}.py") for c, n in zip(ids, names, strict=True)]
        out.append(oa_assistant_calls(*calls))
    else:
        blocks = [
            an_tool_use(c, n, path=f"src/f{step % 3}.py") for c, n in zip(ids, names, strict=True)
        ]
        out.append({"role": "assistant", "content": [{"type": "text", "text": "calling"}, *blocks]})


def _emit_results(out: list[Msg], shape: str, results: list[tuple[str, str]]) -> None:
    if not results:
        return
    if shape == "openai":
        out.extend(oa_result(c, b) for c, b in results)
    else:
        out.append({"role": "user", "content": [an_result(c, b) for c, b in results]})
