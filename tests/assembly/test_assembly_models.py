"""assemble_context with named and inline models: depth-first leaves, framing, literals, the
tools component, the model's filters and budget, and every structural rule as a tool error
naming the rule and the component's path (with no turn recorded)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from assembly_env import AssemblyEnv, chat, new_session, tool_turn
from pydantic import BaseModel, ValidationError

from contextcore.assembly import AssemblyModelSpec
from tests.support.mcp_calls import call, error

BRIEF = {
    "intro": "Be brief.",
    "components": [{"kind": "message", "framing": "The user asks:"}, {"kind": "rules"}],
    "filters": [{"name": "sizeLimiter", "options": {"maxTokens": 5000}}],
}


def nested(depth: int) -> dict[str, Any]:
    node: dict[str, Any] = {"kind": "message"}
    for _ in range(depth - 1):
        node = {"kind": "rules", "children": [node]}
    return node


async def assemble(client: Any, sid: str, model: Any, **extra: Any) -> dict[str, Any]:
    return await call(
        client, "assemble_context", session_id=sid, message="hi", model=model, **extra
    )


async def test_a_named_model_from_the_config_is_used_by_name(make_env: Any) -> None:
    env = make_env(models={"brief": BRIEF})
    async with env.client() as client:
        sid = await new_session(client)
        out = await assemble(client, sid, "brief")
    assert out["messages"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "The user asks:\n\nhi"},
        {"role": "system", "content": out["messages"][2]["content"]},
    ]
    assert out["messages"][2]["content"].startswith("## Rules\n\n### 005 tone — always")
    assert out["report"]["model"] == "brief"
    assert out["report"]["filters"]["budget"] is not None
    assert [s["name"] for s in out["report"]["filters"]["steps"]] == [
        "sizeLimiter",
        "toolCallBackfill",
    ]


async def test_unknown_names_and_model_with_preset_are_errors_naming_model(
    make_env: Any,
) -> None:
    env = make_env(models={"brief": BRIEF})
    async with env.client() as client:
        sid = await new_session(client)
        text = await error(client, "assemble_context", session_id=sid, message="x", model="nope")
        assert text.startswith("assemble_context: model: unknown model 'nope'") and "brief" in text
        text = await error(
            client, "assemble_context", session_id=sid, message="x", model="brief", preset="topic"
        )
        assert "model: give either model or preset, not both" in text
        assert (await call(client, "list_turns", session_id=sid))["turns"] == []


async def test_nested_components_emit_depth_first_and_only_leaves_emit(env: AssemblyEnv) -> None:
    model = {
        "components": [
            {"kind": "literal", "text": "A"},
            {
                "kind": "rules",
                "children": [
                    {"kind": "literal", "text": "B"},
                    {"kind": "message", "children": [{"kind": "literal", "text": "C"}]},
                    {"kind": "literal", "text": "D", "framing": "Note:"},
                ],
            },
            {"kind": "literal", "text": "E"},
        ]
    }
    async with env.client() as client:
        out = await assemble(client, await new_session(client), model)
    assert [m["content"] for m in out["messages"]] == ["A", "B", "C", "Note:\n\nD", "E"]
    assert [c["path"] for c in out["report"]["components"]] == [
        "components[0]",
        "components[1].children[0]",
        "components[1].children[1].children[0]",
        "components[1].children[2]",
        "components[2]",
    ]
    assert out["report"]["model"] == "inline"
    assert "the model has no message component" in out["report"]["warnings"][0]


async def test_the_tools_component_lists_names_descriptions_and_schemas(
    env: AssemblyEnv,
) -> None:
    model = {"components": [{"kind": "tools", "framing": "You may call:"}, {"kind": "message"}]}
    async with env.client() as client:
        sid = await new_session(client)
        without = await assemble(client, sid, model)
        await call(
            client,
            "add_context_item",
            session_id=sid,
            type="tool",
            name="get_current_time",
            server="time",
        )
        out = await assemble(client, sid, model)
    # no tool selected: the component (framing included) emits nothing
    assert without["messages"] == [{"role": "user", "content": "hi"}]
    assert without["report"]["components"][0]["tokens"] == 0
    text = out["messages"][0]["content"]
    # Worded as build_request_context words it; without downstream servers no name calls it.
    assert text.startswith(
        "You may call:\n\n## Tools\n\n### time/get_current_time (server time, tool "
        "get_current_time; no connected server offers it) — manual\nGet the current time"
    )
    schema = json.loads(text.split("Input schema: ", 1)[1])
    assert schema == {"type": "object", "properties": {"timezone": {"type": "string"}}}


async def test_history_framing_is_its_own_message_before_a_non_empty_window(
    env: AssemblyEnv,
) -> None:
    model = {"components": [{"kind": "history", "framing": "So far:"}, {"kind": "message"}]}
    async with env.client() as client:
        empty = await assemble(client, await new_session(client), model)
        sid = await new_session(client)
        await call(client, "append_messages", session_id=sid, messages=chat(2))
        out = await assemble(client, sid, model)
    assert empty["messages"] == [{"role": "user", "content": "hi"}]
    assert out["messages"][0] == {"role": "system", "content": "So far:"}
    assert out["report"]["components"][0]["messages"] == [0, 1, 2]


async def test_filters_trim_only_the_history_and_pinned_parts_survive(env: AssemblyEnv) -> None:
    big = "x" * 2000
    model = {
        "intro": "intro",
        "components": [{"kind": "rules"}, {"kind": "history"}, {"kind": "message"}],
        "filters": [{"name": "sizeLimiter", "options": {"maxTokens": 1000}}],
    }
    turns = [m for i in range(6) for m in tool_turn(f"c{i}", big)]
    async with env.client() as client:
        sid = await new_session(client)
        await call(client, "append_messages", session_id=sid, messages=turns)
        out = await assemble(client, sid, model)
        model["filters"] = [{"name": "sizeLimiter", "options": {"maxTokens": 10}}]
        starved = await assemble(client, sid, model)
    rows = {c["kind"]: c for c in out["report"]["components"]}
    kept = [out["messages"][i] for i in rows["history"]["messages"]]
    assert 0 < len(kept) < 12 and out["report"]["filters"]["dropped"] == 12 - len(kept)
    assert [m["role"] for m in kept] == ["assistant", "tool"] * (len(kept) // 2)
    assert out["report"]["total_tokens"] <= 1000
    assert out["messages"][-1] == {"role": "user", "content": "hi"}
    # pinned parts alone over budget: the whole window goes, nothing else does
    assert [c["kind"] for c in starved["report"]["components"] if c["messages"]] == [
        "intro",
        "rules",
        "message",
    ]
    assert starved["report"]["total_tokens"] > starved["report"]["filters"]["budget"]


async def test_bad_filters_are_errors_naming_the_model_field(env: AssemblyEnv) -> None:
    async with env.client() as client:
        sid = await new_session(client)
        model = {"components": [{"kind": "history"}], "filters": ["noSuchFilter"]}
        text = await error(client, "assemble_context", session_id=sid, message="x", model=model)
        assert "model.filters[0]: unknown filter 'noSuchFilter'" in text
        model["filters"] = "nope"
        text = await error(client, "assemble_context", session_id=sid, message="x", model=model)
        assert "unknown filter preset 'nope'" in text
        assert (await call(client, "list_turns", session_id=sid))["turns"] == []


LIMITS = [
    (
        {"components": [{"kind": "message"}, nested(7)]},
        "model.components[1]" + ".children[0]" * 6,
        "max-depth",
    ),
    (
        {"components": [{"kind": "literal", "text": "x"}] * 129},
        "model.components[128]",
        "max-nodes",
    ),
    (
        {
            "components": [
                {"kind": "rules", "children": [{"kind": "message"}] * 127},
                {"kind": "rules"},
            ]
        },
        "model.components[1]",
        "max-nodes",
    ),
    (
        {
            "components": [
                {"kind": "message"},
                {
                    "kind": "rules",
                    "children": [{"kind": "literal", "text": "t", "children": [{"kind": "rules"}]}],
                },
            ]
        },
        "model.components[1].children[0]",
        "literal-children",
    ),
    (
        {"components": [{"kind": "rules", "framing": "F", "children": [{"kind": "rules"}]}]},
        "model.components[0]",
        "parent-framing",
    ),
    ({"components": [{"kind": "literal"}]}, "model.components[0]", "literal-text"),
    ({"components": [{"kind": "rules", "text": "t"}]}, "model.components[0]", "literal-text"),
    (
        {"components": [{"kind": "history"}, {"kind": "rules", "children": [{"kind": "history"}]}]},
        "model.components[1].children[0]",
        "single-history",
    ),
]


@pytest.mark.parametrize(("model", "path", "rule"), LIMITS, ids=[r for _, _, r in LIMITS])
async def test_structural_rules_are_errors_naming_rule_and_path(
    env: AssemblyEnv, model: dict[str, Any], path: str, rule: str
) -> None:
    async with env.client() as client:
        sid = await new_session(client)
        text = await error(client, "assemble_context", session_id=sid, message="x", model=model)
        turns = (await call(client, "list_turns", session_id=sid))["turns"]
    assert text.startswith(f"assemble_context: {path}: ") and f"(rule {rule})" in text
    assert turns == []


async def test_models_at_the_limits_are_accepted(env: AssemblyEnv) -> None:
    deepest = {"components": [nested(6)]}
    widest = {
        "components": [{"kind": "rules", "children": [{"kind": "literal", "text": "x"}] * 127}]
    }
    async with env.client() as client:
        sid = await new_session(client)
        deep = await assemble(client, sid, deepest)
        wide = await assemble(client, sid, widest)
    assert deep["messages"] == [{"role": "user", "content": "hi"}]
    assert len(wide["messages"]) == 127


async def test_hostile_nesting_fails_fast_on_the_depth_rule(env: AssemblyEnv) -> None:
    async with env.client() as client:
        sid = await new_session(client)
        text = await error(
            client,
            "assemble_context",
            session_id=sid,
            message="x",
            model={"components": [nested(60)]},
        )
    assert "(rule max-depth)" in text


@pytest.mark.parametrize(
    ("model", "expected"),
    [
        ({"components": [{"kind": "poem"}]}, "model.components[0].kind: Input should be"),
        (
            {"components": [{"kind": "rules", "colour": "red"}]},
            "model.components[0].colour: unknown key",
        ),
        ({"components": []}, "model.components: "),
        ({"intro": "x"}, "model.components: Field required"),
        (["rules"], "invalid arguments: model.str: Input should be a valid string"),
    ],
)
async def test_malformed_models_are_errors_naming_the_field(
    env: AssemblyEnv, model: Any, expected: str
) -> None:
    async with env.client() as client:
        sid = await new_session(client)
        text = await error(client, "assemble_context", session_id=sid, message="x", model=model)
    assert expected in text


def test_a_config_rejects_a_model_breaking_a_rule_naming_it_and_the_path() -> None:
    class Config(BaseModel):
        models: dict[str, AssemblyModelSpec]

    good = Config.model_validate({"models": {"brief": BRIEF}})
    assert good.models["brief"].components[0].kind == "message"
    bad = {
        "components": [
            {"kind": "rules", "children": [{"kind": "literal", "children": [{"kind": "rules"}]}]}
        ]
    }
    with pytest.raises(ValidationError) as info:
        Config.model_validate({"models": {"bad": bad}})
    text = str(info.value)
    assert "models.bad" in text and "components[0].children[0]" in text
    assert "rule literal-children" in text
