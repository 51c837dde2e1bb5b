"""Behaviour of each built-in filter, through the pipeline."""

from __future__ import annotations

import json
from typing import Any

from history_builders import an_result, an_tool_use, oa_assistant_calls, oa_call, oa_result, text

from contextcore.history import (
    CollapseGroup,
    RunContext,
    run_pipeline,
    validate_window,
    window_tokens,
)


def _ids(messages: list[dict[str, Any]]) -> list[str]:
    return [m["id"] for m in messages]


def _numbered(count: int) -> list[dict[str, Any]]:
    return [
        dict(text("user" if i % 2 == 0 else "assistant", f"message {i}"), id=f"m{i}")
        for i in range(count)
    ]


def test_size_limiter_keeps_the_newest_messages_that_fit_the_budget() -> None:
    messages = _numbered(10)
    budget = window_tokens(messages[7:]) + 1

    result = run_pipeline(
        messages,
        [{"name": "sizeLimiter", "options": {"maxTokens": budget, "prioritizeUser": False}}],
    )

    assert _ids(result.messages) == ["m7", "m8", "m9"]
    assert result.report.dropped == 7


def test_size_limiter_prefers_user_messages_by_default() -> None:
    messages = _numbered(6)
    budget = window_tokens(messages[0:5:2]) + 1

    result = run_pipeline(messages, [{"name": "sizeLimiter", "options": {"maxTokens": budget}}])

    assert _ids(result.messages) == ["m0", "m2", "m4"]


def test_size_limiter_keeps_one_system_message_even_when_it_prefers_others() -> None:
    messages = [dict(text("system", "be brief"), id="s"), *_numbered(8)]
    budget = window_tokens([messages[0], messages[7], messages[8]])

    result = run_pipeline(messages, [{"name": "sizeLimiter", "options": {"maxTokens": budget}}])

    assert result.messages[0]["id"] == "s"
    assert len(result.messages) == 3


def test_size_limiter_counts_the_whole_message_not_only_its_text() -> None:
    big_args = oa_call("c1", "write_file", path="a.py", content="y" * 4000)
    messages = [oa_assistant_calls(big_args), oa_result("c1"), text("user", "next")]

    result = run_pipeline(messages, [{"name": "sizeLimiter", "options": {"maxTokens": 300}}])

    assert [m["role"] for m in result.messages] == ["user"]


def test_size_limiter_cuts_huge_contents_before_counting() -> None:
    messages = [text("user", "q" * 100_000)]

    result = run_pipeline(messages, [{"name": "sizeLimiter", "options": {"maxContentChars": 1000}}])

    assert result.messages[0]["content"].startswith("q" * 1000)
    assert result.messages[0]["content"].endswith("...[truncated]")
    assert result.report.truncated == 1


def test_size_limiter_never_keeps_a_tool_call_without_its_results() -> None:
    messages = [
        text("user", "go"),
        oa_assistant_calls(oa_call("a"), oa_call("b")),
        oa_result("a", "r" * 400),
        oa_result("b", "r" * 400),
        text("user", "thanks"),
    ]

    for budget in range(20, 400, 10):
        result = run_pipeline(messages, [{"name": "sizeLimiter", "options": {"maxTokens": budget}}])
        assert validate_window(result.messages) == []
        assert result.report.backfilled == 0


def test_backfill_moves_results_after_their_call_keeping_their_order() -> None:
    messages = [
        oa_assistant_calls(oa_call("a"), oa_call("b")),
        text("user", "wait"),
        oa_result("b", "second"),
        oa_result("a", "first"),
    ]

    result = run_pipeline(messages, ["toolCallBackfill"])

    assert [m.get("tool_call_id") for m in result.messages] == [None, "b", "a", None]
    assert result.report.moved == 2


def test_backfill_inserts_a_synthetic_result_for_an_unanswered_call() -> None:
    messages = [oa_assistant_calls(oa_call("a")), text("user", "stop")]

    result = run_pipeline(
        messages, [{"name": "toolCallBackfill", "options": {"missingContent": "lost"}}]
    )

    assert result.messages[1] == {
        "role": "tool",
        "tool_call_id": "a",
        "content": "lost",
        "id": f"{result.messages[0]['id']}:a:missing",
    }
    assert result.report.backfilled == 1


def test_backfill_turns_a_result_without_call_into_a_system_message() -> None:
    result = run_pipeline([text("user", "hi"), oa_result("ghost", "data")], ["toolCallBackfill"])

    orphan = result.messages[1]
    assert (orphan["role"], orphan["content"], "tool_call_id" in orphan) == (
        "system",
        "data",
        False,
    )
    assert result.report.orphans_converted == 1


def test_backfill_can_keep_the_call_id_of_an_orphan() -> None:
    options = {"stripOrphanToolId": False, "orphanRole": "user"}

    result = run_pipeline(
        [oa_result("ghost", "data")], [{"name": "toolCallBackfill", "options": options}]
    )

    assert result.messages[0]["role"] == "user"
    assert result.messages[0]["tool_call_id"] == "ghost"


def test_backfill_gathers_anthropic_results_into_the_user_message_after_the_call() -> None:
    messages = [
        {"role": "assistant", "content": [an_tool_use("a"), an_tool_use("b")]},
        {"role": "user", "content": [an_result("a"), {"type": "text", "text": "also this"}]},
        {"role": "assistant", "content": "hm"},
        {"role": "user", "content": [an_result("b", "late"), an_result("zz", "stray")]},
    ]

    result = run_pipeline(messages, ["toolCallBackfill"])

    assert validate_window(result.messages) == []
    carrier = result.messages[1]["content"]
    assert [b.get("tool_use_id") for b in carrier] == ["a", "b", None]
    assert result.messages[-1]["role"] == "system"
    assert result.messages[-1]["content"] == [{"type": "text", "text": "stray"}]


def test_collapsed_group_becomes_one_placeholder_where_it_starts() -> None:
    messages = _numbered(5)
    group = CollapseGroup("setup", ("m1", "m3"), "installing tools", ("pip", "npm"))

    result = run_pipeline(messages, ["collapseGroupReplacer"], RunContext(groups=(group,)))

    assert _ids(result.messages) == ["m0", "collapsed:setup", "m2", "m4"]
    assert json.loads(result.messages[1]["content"]) == {
        "type": "collapsed_group",
        "name": "setup",
        "description": "installing tools",
        "items": ["pip", "npm"],
    }
    assert result.report.collapsed == 2


def _read(call_id: str, path: str, body: str) -> list[dict[str, Any]]:
    return [oa_assistant_calls(oa_call(call_id, "read_file", path=path)), oa_result(call_id, body)]


def test_file_contents_limiter_keeps_only_the_newest_versions_of_recent_files() -> None:
    messages = [
        *_read("1", "a.py", "A1" * 50),
        *_read("2", "a.py", "A2" * 50),
        *_read("3", "b.py", "B1" * 50),
    ]
    spec = [{"name": "fileContentsLimiter", "options": {"filesLimit": 1, "versionsPerFile": 1}}]

    result = run_pipeline(messages, spec)

    contents = [m["content"] for m in result.messages if m["role"] == "tool"]
    assert "a.py" in contents[0] and "A1" not in contents[0]
    assert "a.py" in contents[1] and "A2" not in contents[1]
    assert contents[2] == "B1" * 50


def test_file_contents_limiter_replaces_old_write_contents_but_keeps_the_path() -> None:
    write = oa_call("w", "write_file", path="a.py", content="old" * 100)
    messages = [
        oa_assistant_calls(write),
        oa_result("w"),
        *_read("r", "a.py", "new" * 100),
        *_read("s", "a.py", "newer"),
    ]
    spec = [{"name": "fileContentsLimiter", "options": {"versionsPerFile": 2}}]

    result = run_pipeline(messages, spec)

    arguments = json.loads(result.messages[0]["tool_calls"][0]["function"]["arguments"])
    assert arguments["path"] == "a.py"
    assert "older version of a.py" in arguments["content"]


def test_prune_middle_shrinks_the_middle_and_keeps_both_ends_whole() -> None:
    big = "z" * 5000
    write = oa_call("w", "write_file", path="big.py", content=big)
    read = oa_call("r", "read_file", path="big.py")
    middle = [
        oa_assistant_calls(write),
        oa_result("w", big),
        oa_assistant_calls(read),
        oa_result("r", "short"),
        text("assistant", big),
    ]
    messages = [text("user", big), *middle, *[text("user", big) for _ in range(6)]]

    result = run_pipeline(messages, ["pruneMiddle"])

    out = result.messages
    assert out[0]["content"] == big and all(m["content"] == big for m in out[-6:])
    arguments = json.loads(out[1]["tool_calls"][0]["function"]["arguments"])
    assert arguments == {"path": "big.py", "content": "[truncated]"}
    assert out[2]["content"] == "z" * 200 + "...[truncated]"
    assert json.loads(out[3]["tool_calls"][0]["function"]["arguments"]) == {"path": "big.py"}
    assert out[5]["content"] == "z" * 200 + "...[truncated]"


def test_importance_retention_keeps_recent_messages_and_important_older_ones() -> None:
    messages = _numbered(20)
    messages[3]["content"] = "Traceback: ValueError raised, the build failed"
    spec = [{"name": "importanceRetention", "options": {"maxMessages": 5}}]

    result = run_pipeline(messages, spec)

    assert _ids(result.messages)[0] == "m3"
    assert _ids(result.messages)[-2:] == ["m18", "m19"]
    assert len(result.messages) == 5


def test_ui_compression_shrinks_big_accessibility_trees() -> None:
    leaf = {
        "role": "button",
        "name": "n" * 1500,
        "description": "noise",
        "children": [{"role": "deep", "children": [{"role": "deeper"}]}],
    }
    tree = {"role": "root", "help": "noise", "children": [leaf] * 50}
    snap = oa_call("s", "browser_snapshot")
    messages = [oa_assistant_calls(snap), oa_result("s", json.dumps(tree))]

    result = run_pipeline(messages, ["uiCompression"])

    compressed = json.loads(result.messages[1]["content"])
    assert "help" not in compressed
    assert len(compressed["children"]) == 21
    assert compressed["children"][-1] == "...[30 more truncated]"
    child = compressed["children"][0]
    assert "description" not in child and child["name"].endswith("...[truncated]")
    assert child["children"][0]["children"] == ["[truncated]"]
