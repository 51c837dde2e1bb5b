"""Python signatures of tools, as code mode's programs call them, from their schemas."""

from __future__ import annotations

from contextcore.items import Tool
from contextcore.signatures import function_name, python_line, signature, stubs


def test_required_properties_come_first_and_optional_ones_default_to_none_or_their_default() -> (
    None
):
    schema = {
        "type": "object",
        "properties": {
            "limit": {"type": "integer", "default": 10},
            "country": {"type": "string"},
            "status": {"enum": ["open", "paid"]},
            "tags": {"type": "array", "items": {"type": ["string", "integer"]}},
            "note": {"anyOf": [{"type": "string"}, {"type": "null"}]},
        },
        "required": ["country"],
    }
    found = signature("records__list_orders", schema)
    assert found.render() == (
        "async def records__list_orders(*, country: str, limit: int = 10, "
        "status: Literal['open', 'paid'] | None = None, tags: list[str | int] | None = None, "
        "note: str | None = None) -> Any"
    )
    assert found.keywords() == {"country", "limit", "status", "tags", "note"}


def test_an_output_schema_gives_the_return_type_and_odd_names_become_python_names() -> None:
    found = signature(
        "my-server__get",
        {"properties": {"order-id": {"type": "integer"}, "class": {"type": "string"}}},
        {"type": "object", "properties": {"id": {"type": "integer"}}},
    )
    assert found.render() == "async def my_server__get(**extra: Any) -> dict[str, Any]"
    assert function_name("2fa__check") == "_2fa__check" and function_name("class") == "class_"
    assert signature("t", None).render() == "async def t() -> Any"


def test_stubs_declare_call_tool_and_every_signature_and_a_text_line_names_the_call() -> None:
    text = stubs([signature("a__b", {"properties": {"x": {"type": "number"}}})])
    assert "async def call_tool(server: str, tool: str" in text
    assert "async def a__b(*, x: float | None = None) -> Any: ..." in text
    compile(text, "stubs.pyi", "exec")  # the stub is Python
    tool = Tool("a", "b", input_schema={"properties": {"x": {"type": "number"}}})
    assert python_line(tool, "a__b") == (
        "Python (run_code): `async def a__b(*, x: float | None = None) -> Any`"
    )
    assert python_line(tool, None) is None
