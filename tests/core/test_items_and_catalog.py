from __future__ import annotations

import pytest

from contextcore.catalog import Catalog
from contextcore.errors import CatalogError
from contextcore.items import ItemRef, Reference, Rule, Tool


def test_item_keys_follow_the_external_format() -> None:
    assert ItemRef("tool", "get_current_time", "time").key == "tool:time/get_current_time"
    assert ItemRef("rule", "tone").key == "rule:tone"
    assert ItemRef("reference", "api").key == "reference:api"


def test_item_keys_parse_back_including_names_outside_the_mcp_pattern() -> None:
    assert ItemRef.parse("tool:metatool/PDF&URLTool") == ItemRef("tool", "PDF&URLTool", "metatool")
    assert ItemRef.parse("tool:m/Summarize Detection").name == "Summarize Detection"
    assert ItemRef.parse("reference:AGENTS") == ItemRef("reference", "AGENTS")


@pytest.mark.parametrize("key", ["rule", "rule:", "tool:noslash", "widget:x", "tool:/x"])
def test_malformed_item_keys_are_rejected(key: str) -> None:
    with pytest.raises(CatalogError):
        ItemRef.parse(key)


def test_tool_mode_falls_back_from_tool_to_server_default_to_always() -> None:
    assert Tool("s", "t", include="manual", server_include="agent").effective_include == "manual"
    assert Tool("s", "t", server_include="agent").effective_include == "agent"
    assert Tool("s", "t").effective_include == "always"


def test_duplicate_names_in_the_catalog_are_an_error_naming_the_item() -> None:
    with pytest.raises(CatalogError, match="duplicate rule name 'tone'") as err:
        Catalog([Rule("tone", "a"), Rule("tone", "b")])
    assert err.value.field == "name"


def test_same_name_of_different_types_or_servers_is_allowed() -> None:
    catalog = Catalog([Rule("x", ""), Reference("x", ""), Tool("a", "x"), Tool("b", "x")])
    assert len(catalog) == 4


def test_disabled_items_are_listed_but_not_used() -> None:
    catalog = Catalog(
        [Rule("on", "", include="always"), Rule("off", "", include="always", enabled=False)]
    )
    assert [i.name for i in catalog.with_mode("always")] == ["on"]
    assert len(catalog.entries()) == 2


def test_unknown_item_names_give_a_clear_error() -> None:
    with pytest.raises(CatalogError, match="no tool named 'x' on server 'y'"):
        Catalog().require(ItemRef("tool", "x", "y"))


def test_counts_group_enabled_items_by_type_and_mode(catalog: Catalog) -> None:
    assert catalog.counts() == {
        "rule": {"always": 2, "agent": 2, "manual": 1},
        "reference": {"agent": 1, "manual": 1},
        "tool": {"agent": 1, "manual": 1, "always": 1},
    }


def test_upsert_and_server_tool_replacement_bump_the_version() -> None:
    catalog = Catalog([Tool("s", "a")])
    v = catalog.version
    catalog.replace_server_tools("s", [Tool("s", "b")])
    assert [i.name for i in catalog] == ["b"] and catalog.version > v
