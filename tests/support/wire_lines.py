"""Hostile lines for the broker's wire (hypothesis strategies), shared by the stdio and HTTP
tests: requests with usable ids that must be answered, and lines that must be skipped."""

from __future__ import annotations

import json
from dataclasses import dataclass

from hypothesis import strategies as st

__all__ = ["CALL", "LINES", "PLACEHOLDER", "SECRET", "Line"]

SECRET = "cb-wire-secret-7f3a9c"
PLACEHOLDER = "@@ID@@"
CALL = "time__get_current_time"


@dataclass(frozen=True)
class Line:
    """A line to send: ``text`` with :data:`PLACEHOLDER` for a fresh id of ``id_kind`` (None
    when the line carries no usable id and needs no answer)."""

    text: bytes
    id_kind: str | None


_METHODS = st.sampled_from(
    ["ping", "tools/list", "tools/call", "resources/list", "resources/read", "prompts/list",
     "prompts/get", "completion/complete", "logging/setLevel", "initialize", "nope/never",
     "notifications/initialized"]
)  # fmt: skip
# Each is one whole token (a string is closed, brackets are balanced), so a line built from
# them keeps its "id" member readable however broken its values are; a string that swallows
# the rest of the line is a case of its own (the answer then goes to "id": null).
_HOSTILE_TEXT = st.sampled_from(
    ['"\\ud83d"', '"cut emoji \\ud83d"', '"\\udfff\\ud800"', '"a\x00b"', '"\x01\x1f"',
     "7" * 4301, "-" + "9" * 5000, "1e99999", "NaN", "Infinity", '"\\u0000"', '"\\\\"',
     '"' + "x" * 100_000 + '"', '"\u202e\u200b\ufeff"']
)  # fmt: skip


@st.composite
def _deep_text(draw: st.DrawFn) -> str:
    levels = draw(st.integers(min_value=100, max_value=6000))
    if draw(st.booleans()):
        return "[" * levels + "]" * levels
    return '{"a":' * levels + "0" + "}" * levels


_SCALARS = st.one_of(
    st.integers().map(str),
    st.floats(allow_nan=False, allow_infinity=False).map(json.dumps),
    st.text(max_size=50).map(json.dumps),
    st.sampled_from(["true", "false", "null"]),
    _HOSTILE_TEXT,
    _deep_text(),
)
_VALUES = st.recursive(
    _SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4).map(lambda items: "[" + ",".join(items) + "]"),
        st.dictionaries(st.text(max_size=10).map(json.dumps), inner, max_size=4).map(
            lambda d: "{" + ",".join(f"{k}:{v}" for k, v in d.items()) + "}"
        ),
    ),
    max_leaves=8,
)
_TOOL_NAMES = st.sampled_from(
    [CALL, "call_tool", "create_session", "build_request_context", "list_rules", "nope", ""]
)


@st.composite
def _request(draw: st.DrawFn) -> Line:
    """A request-shaped line: usable id, maybe hostile envelope fields and params."""
    members = [f'"id": {PLACEHOLDER}']
    jsonrpc = draw(st.sampled_from(['"2.0"'] * 6 + ['"1.0"', "2.0", "null", "", '"2.0\\u0000"']))
    if jsonrpc:
        members.append(f'"jsonrpc": {jsonrpc}')
    method = draw(st.one_of(_METHODS.map(json.dumps), _SCALARS, st.just("")))
    if method:
        members.append(f'"method": {method}')
    if method == '"tools/call"' and draw(st.booleans()):
        name = json.dumps(draw(_TOOL_NAMES))
        params = f'{{"name": {name}, "arguments": {draw(_VALUES)}}}'
    else:
        params = draw(st.one_of(st.just(""), _VALUES))
    if params:
        members.append(f'"params": {params}')
    members = draw(st.permutations(members))
    text = "{" + ", ".join(members) + "}"
    return Line(text.encode("utf-8", "surrogatepass"), draw(st.sampled_from(["int", "str"])))


@st.composite
def _cut_request(draw: st.DrawFn) -> Line:
    """A request cut short after its id: still answered under that id."""
    rest = draw(st.text(max_size=40).map(json.dumps))
    head = '{"jsonrpc": "2.0", "id": ' + PLACEHOLDER + ","
    text = head + ' "method": "ping", "params": {"x": ' + rest
    cut = draw(st.integers(min_value=len(head), max_value=len(text)))
    return Line(text[:cut].encode(), draw(st.sampled_from(["int", "str"])))


_NO_ANSWER = st.one_of(
    st.binary(max_size=300),
    _VALUES.map(lambda text: text.encode("utf-8", "surrogatepass")),
    st.sampled_from(["null", "1.5", "true", "[]", "{}", '"x"']).map(
        lambda bad: f'{{"jsonrpc": "2.0", "id": {bad}, "method": "ping"}}'.encode()
    ),
    _VALUES.map(
        lambda params: (
            f'{{"jsonrpc": "2.0", "method": "notifications/cancelled", '
            f'"params": {{"requestId": {params}}}}}'.encode("utf-8", "surrogatepass")
        )
    ),
).map(lambda text: Line(text.replace(b"\n", b" "), None))

LINES = st.one_of(_request(), _cut_request(), _NO_ANSWER)
