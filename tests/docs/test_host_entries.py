"""Every ``json`` block of the documentation parses, and the host entries the hosts page shows
(marked ``<!-- entry: CLIENT -->``) are what ``context-broker install --client CLIENT
--dry-run`` prints, one for each client ``install`` knows: JSON, or for Codex TOML (shown as a
``text`` block: the pages' ``toml`` blocks are broker configs, see test_configs.py)."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path
from typing import Any

import pytest
from context_broker.server.cli.install import CLIENTS, install

from ._blocks import DOCS, Block, of

ENTRIES = [b for b in of("json", "text") if b.marker == "entry"]
PLACEHOLDER = "/absolute/path/to"


def _where(block: Block) -> str:
    return block.where


def _value(client: str, text: str) -> Any:
    """An entry as its host reads it: TOML for Codex, JSON for the others."""
    return tomllib.loads(text) if client == "codex" else json.loads(text)


@pytest.mark.parametrize("block", of("json"), ids=_where)
def test_a_json_block_shown_parses(block: Block) -> None:
    json.loads(block.text)


def test_the_hosts_page_shows_the_entry_of_each_client_install_knows() -> None:
    shown = sorted(b.marker_value or "" for b in ENTRIES)
    assert shown == sorted(CLIENTS)
    assert all(b.page == DOCS / "hosts.md" for b in ENTRIES)


@pytest.mark.parametrize("block", ENTRIES, ids=_where)
def test_an_entry_shown_is_what_install_writes(block: Block, tmp_path: Path) -> None:
    config = tmp_path / "broker.toml"
    config.write_text("", encoding="utf-8")
    result = install(
        block.marker_value,  # type: ignore[arg-type]
        config,
        path=tmp_path / "host.json",
        dry_run=True,
        command=[f"{PLACEHOLDER}/.venv/bin/context-broker"],
    )
    client = block.marker_value or ""
    assert block.lang == ("text" if client == "codex" else "json"), block.where
    printed = result.snippet().replace(str(config.parent), PLACEHOLDER)
    assert _value(client, block.text) == _value(client, printed)
