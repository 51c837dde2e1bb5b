"""Every ``toml`` block of the documentation is a config the broker loads, with its own loader;
a block marked ``<!-- fragment -->`` is part of one: it parses, and every key in it is a key
the settings know."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

import pytest
from context_broker.server.settings import AppConfig, load_config
from pydantic import ValidationError

from ._blocks import Block, of

WHOLE = [b for b in of("toml") if b.marker is None]
FRAGMENTS = [b for b in of("toml") if b.marker == "fragment"]


def _where(block: Block) -> str:
    return block.where


def test_the_pages_show_configs() -> None:
    assert len(WHOLE) >= 10
    assert all(b.marker in (None, "fragment") for b in of("toml"))


@pytest.mark.parametrize("block", WHOLE, ids=_where)
def test_a_config_shown_loads_with_the_brokers_loader(block: Block, tmp_path: Path) -> None:
    path = tmp_path / "broker.toml"
    path.write_text(block.text + "\n", encoding="utf-8")
    load_config(path, environ={})


def _unknown_keys(data: dict[str, Any], base_dir: Path) -> list[str]:
    try:
        AppConfig.model_validate({**data, "base_dir": base_dir})
    except ValidationError as exc:
        return [
            ".".join(str(p) for p in e["loc"])
            for e in exc.errors()
            if e["type"] == "extra_forbidden"
        ]
    return []


@pytest.mark.parametrize("block", FRAGMENTS, ids=_where)
def test_a_fragment_shown_names_only_known_keys(block: Block, tmp_path: Path) -> None:
    data = tomllib.loads(block.text)
    assert data, f"{block.where}: an empty fragment"
    assert _unknown_keys(data, tmp_path) == [], block.where


def test_a_fragment_with_an_unknown_key_is_caught(tmp_path: Path) -> None:
    data = tomllib.loads('[servers.time]\ncomand = "x"\n')
    assert _unknown_keys(data, tmp_path) == ["servers.time.comand"]
