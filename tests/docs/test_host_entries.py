"""Every ``json`` block of the documentation parses, and the host entries the hosts page shows
(marked ``<!-- entry: CLIENT -->``) are what ``context-broker install --client CLIENT
--dry-run`` prints, one for each client ``install`` knows."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from context_broker.server.cli.install import CLIENTS, install

from ._blocks import DOCS, Block, of

ENTRIES = [b for b in of("json") if b.marker == "entry"]
PLACEHOLDER = "/absolute/path/to"


def _where(block: Block) -> str:
    return block.where


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
    printed = json.dumps({result.servers_key: {result.name: result.entry}})
    printed = printed.replace(str(config.parent), PLACEHOLDER)
    assert json.loads(block.text) == json.loads(printed)
