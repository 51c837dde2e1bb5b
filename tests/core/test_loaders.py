from __future__ import annotations

import json
from pathlib import Path

import pytest

from contextcore.errors import CatalogError
from contextcore.loaders import load_catalog_json, load_markdown_dir, load_markdown_file


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def test_markdown_front_matter_sets_name_description_include_and_priority(tmp_path: Path) -> None:
    path = write(
        tmp_path / "r.md",
        "---\nname: style\ndescription: Code style\ninclude: always\npriority: 3\n---\n"
        "Use types.\n",
    )
    rule = load_markdown_file(path, "rule")
    assert (rule.name, rule.description, rule.include, rule.priority) == (
        "style",
        "Code style",
        "always",
        3,
    )
    assert rule.text == "Use types."


def test_markdown_without_front_matter_is_named_after_the_file(tmp_path: Path) -> None:
    ref = load_markdown_file(write(tmp_path / "guide.md", "# Guide\nBody"), "reference")
    assert ref.name == "guide" and ref.include == "agent" and ref.text.startswith("# Guide")


@pytest.mark.parametrize(
    ("front", "mode"),
    [
        ("description: x\nalwaysApply: true", "always"),
        ("description: Use for SQL\nalwaysApply: false", "agent"),
        ("description:\nglobs: '*.py'\nalwaysApply: false", "manual"),
    ],
)
def test_cursor_rules_map_always_apply_and_description_to_modes(
    tmp_path: Path, front: str, mode: str
) -> None:
    rule = load_markdown_file(write(tmp_path / "x.mdc", f"---\n{front}\n---\nBody"), "rule")
    assert rule.include == mode


def test_agents_md_is_read_whole_even_with_dashes(tmp_path: Path) -> None:
    text = "---\nnot: front matter\n---\n# Agents\n"
    ref = load_markdown_file(write(tmp_path / "AGENTS.md", text), "reference")
    assert ref.name == "AGENTS" and ref.text == text.strip()


def test_bad_front_matter_names_the_file(tmp_path: Path) -> None:
    path = write(tmp_path / "bad.md", "---\ninclude: sometimes\n---\nx")
    with pytest.raises(CatalogError, match="bad.md: include"):
        load_markdown_file(path, "rule")
    with pytest.raises(CatalogError, match="never closed"):
        load_markdown_file(write(tmp_path / "open.md", "---\nname: x\n"), "rule")


def test_a_folder_is_read_recursively_in_path_order(tmp_path: Path) -> None:
    write(tmp_path / "b.md", "B")
    write(tmp_path / "sub" / "a.mdc", "---\ndescription: d\n---\nA")
    write(tmp_path / "ignored.txt", "x")
    assert [i.name for i in load_markdown_dir(tmp_path, "rule")] == ["b", "a"]
    with pytest.raises(CatalogError, match="does not exist"):
        load_markdown_dir(tmp_path / "missing", "rule")


def test_catalog_json_keeps_messy_real_world_tool_names(tmp_path: Path) -> None:
    data = {
        "servers": {"m": {"tools": [{"name": "PDF&URLTool", "description": ""}]}},
        "rules": [{"name": "r", "text": "t", "include": "always"}],
    }
    items = load_catalog_json(write(tmp_path / "c.json", json.dumps(data)))
    assert [i.ref.key for i in items] == ["tool:m/PDF&URLTool", "rule:r"]


def test_the_shared_catalogs_load() -> None:
    shared = Path(__file__).resolve().parents[3] / "shared" / "benchmarks"
    assert len(load_catalog_json(shared / "mcp-registry" / "catalog.json")) == 755
    assert len(load_catalog_json(shared / "metatool" / "catalog.json")) == 199
