"""call_tool's argument check runs no regular expression a downstream server supplied and
never fails the call on a schema too deep to check."""

from __future__ import annotations

import time

from context_broker.server.gateway.trust.arguments import schema_problem

CATASTROPHIC = {
    "type": "object",
    "properties": {
        "pattern": {"type": "string", "pattern": "^(a+)+$"},
        "name": {"type": "string"},
    },
    "patternProperties": {"^(b+)+$": {"type": "integer"}},
    "required": ["name"],
}


def test_a_downstream_pattern_is_not_run_on_the_broker_but_the_rest_is_checked() -> None:
    hostile = {"pattern": "a" * 27 + "!", "b" * 27 + "!": 1, "name": 7}
    start = time.perf_counter()
    problem = schema_problem("evil", "tool", CATASTROPHIC, hostile)
    elapsed = time.perf_counter() - start
    # Backtracking over 27 characters takes about 4 s per pattern (0.5 s at 24).
    assert elapsed < 1.0
    assert problem is not None and "arguments['name']: 7 is not of type 'string'" in problem
    assert schema_problem("evil", "tool", CATASTROPHIC, {"pattern": "zzz", "name": "ok"}) is None
    missing = schema_problem("evil", "tool", CATASTROPHIC, {"pattern": "a"})
    assert missing is not None and "'name' is a required property" in missing


def test_a_schema_too_deep_to_check_forwards_the_call_unchecked() -> None:
    deep: dict[str, object] = {"type": "object"}
    node = deep
    for _ in range(5000):
        child: dict[str, object] = {"type": "object"}
        node["properties"] = {"x": child}
        node = child
    assert schema_problem("deep", "tool", deep, {"x": 1}) is None
