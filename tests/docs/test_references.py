"""The generated references (docs/_hooks.py) show every config key, every broker tool and
every command, from the code; config.example.toml names only keys the settings know."""

from __future__ import annotations

import re

import pytest
from context_broker.server.host.gateway_tools import CALL_TOOL, LIST_SERVERS
from context_broker.server.host.mcp_server import MODEL_TOOLS, TOOLS
from context_broker.server.settings import AppConfig

from ._blocks import DOCS, hooks


def test_each_generated_part_has_its_page() -> None:
    pages = {
        "config": DOCS / "reference" / "configuration.md",
        "tools": DOCS / "reference" / "tools.md",
        "cli": DOCS / "reference" / "cli.md",
    }
    assert set(pages) == set(hooks().GENERATORS)
    for name, page in pages.items():
        assert f"<!-- generated: {name} -->" in page.read_text(encoding="utf-8")


def test_the_configuration_reference_has_a_row_for_every_key() -> None:
    text = hooks().config_reference()
    sections = re.split(r"^## ", text, flags=re.M)
    rows = {
        (section.splitlines()[0], key)
        for section in sections[1:]
        for key in re.findall(r"^\| `([a-z_]+)` \|", section, re.M)
    }
    keys = hooks().config_keys()
    assert len(rows) == len(keys) > 100
    for table in ("search", "server.http", "servers.NAME", "servers.NAME.oauth", "profiles.NAME"):
        assert f"## `[{table}]`" in text
    assert "## `[[rules]]`" in text
    for key in AppConfig.model_fields["search"].annotation.model_fields:  # type: ignore[union-attr]
        assert f"search.{key}" in keys


def test_a_keys_comment_in_the_example_config_reaches_the_reference() -> None:
    example = "[search]\n# Chunk matches considered per search, as a test says.\ntop_k = 20\n"
    text = hooks().config_reference(example)
    assert (
        "| `top_k` | integer, ≥ 1 | `20` | Chunk matches considered per search, as a test says. |"
        in text
    )


def test_every_key_the_example_config_names_is_a_key_of_the_settings() -> None:
    module = hooks()
    named = module.example_comments(module.EXAMPLE.read_text(encoding="utf-8"), AppConfig)
    tables = {table for table, *_ in module._tables(AppConfig, "")}
    known = set(module.config_keys()) | tables
    unknown = [k for k in named if not k.startswith("[") and k not in known]
    assert len(named) > 100
    assert unknown == []


def test_the_tool_reference_has_every_tool_the_broker_answers() -> None:
    text = hooks().tool_reference()
    names = [spec.name for spec in TOOLS] + [CALL_TOOL, LIST_SERVERS]
    for name in names:
        assert f"### `{name}` {{#{name}}}" in text
    listed = re.findall(r"^\| \[`(\w+)`\]\(#\w+\) \| yes \|", text, re.M)
    assert sorted(listed) == sorted(MODEL_TOOLS)


@pytest.mark.parametrize("spec", TOOLS, ids=lambda s: s.name)
def test_the_tool_reference_lists_each_argument(spec: object) -> None:
    text = hooks().tool_reference()
    section = text.split(f"### `{spec.name}`", 1)[1].split("\n### ", 1)[0]  # type: ignore[attr-defined]
    for argument in spec.input_schema()["properties"]:  # type: ignore[attr-defined]
        assert f"| `{argument}`" in section


def test_the_command_line_reference_has_every_subcommand() -> None:
    text = hooks().cli_reference()
    for command, _ in hooks().cli_commands():
        assert f"`{command}`" in text
    for sub in ("serve", "check", "install", "tools approve", "auth login", "setup-model"):
        assert f"## `context-broker {sub}`" in text or f"### `context-broker {sub}`" in text


def test_an_unknown_generated_part_fails_the_build() -> None:
    with pytest.raises(ValueError, match="unknown generated part 'nope'"):
        hooks().on_page_markdown("<!-- generated: nope -->\n")
