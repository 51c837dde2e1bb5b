from __future__ import annotations

from pathlib import Path

import pytest
from context_broker.server.parts import build_parts
from context_broker.server.settings import load_config, parse_config

from contextcore.errors import ConfigError
from contextcore.factory import load_items

REPO = Path(__file__).resolve().parents[2]


def test_an_empty_config_is_valid_with_defaults(tmp_path: Path) -> None:
    (tmp_path / "c.toml").write_text("")
    config = load_config(tmp_path / "c.toml", environ={})
    assert config.search.top_n == 5 and config.search.include_score == 0.7
    assert config.persistence.backend == "memory"


def test_unknown_keys_are_rejected_with_their_dotted_name(tmp_path: Path) -> None:
    (tmp_path / "c.toml").write_text("[search]\ntopn = 3\n")
    with pytest.raises(ConfigError, match="unknown key 'search.topn'"):
        load_config(tmp_path / "c.toml", environ={})


def test_bad_values_name_the_key_and_value(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"search.include_score.*1.5"):
        parse_config({"search": {"include_score": 1.5}}, base_dir=tmp_path, environ={})


def test_paths_resolve_relative_to_the_config_file(tmp_path: Path) -> None:
    folder = tmp_path / "conf"
    (folder / "rules").mkdir(parents=True)
    (folder / "rules" / "a.md").write_text("---\ninclude: always\n---\nA")
    (folder / "c.toml").write_text('[sources]\nrule_dirs = ["rules"]\n')
    config = load_config(folder / "c.toml", environ={})
    assert [i.name for i in load_items(config)] == ["a"]


def test_environment_variables_override_single_keys(tmp_path: Path) -> None:
    config = parse_config({}, base_dir=tmp_path, environ={"CONTEXT_BROKER_SEARCH__TOP_N": "8"})
    assert config.search.top_n == 8


def test_invalid_toml_is_reported_with_the_file(tmp_path: Path) -> None:
    (tmp_path / "c.toml").write_text("[search\n")
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_config(tmp_path / "c.toml", environ={})


def test_the_example_config_loads_an_agent_in_every_include_mode() -> None:
    config = load_config(REPO / "config.example.toml", environ={})
    counts = build_parts(config, use_config_embedder=False).catalog.counts()
    assert set(counts) == {"rule", "reference"}
    assert set(counts["rule"]) == {"always", "manual", "agent"}
    assert set(counts["reference"]) == {"manual", "agent"}


def test_the_domain_config_has_no_transport_tables_and_the_server_settings_add_them() -> None:
    from contextcore import config as domain

    data = {"search": {"top_n": 3}, "server": {"http": {"port": 9000}}, "gateway": {}}
    with pytest.raises(ConfigError, match="unknown key 'server'"):
        domain.parse_config(data, base_dir=REPO, environ={})
    settings = parse_config(data, base_dir=REPO, environ={})
    assert settings.search.top_n == 3 and settings.server.http.port == 9000
    core = domain.parse_config({"search": {"top_n": 3}}, base_dir=REPO, environ={})
    assert not hasattr(core, "server") and core.search == settings.search


def test_an_unknown_key_in_a_transport_table_names_that_table() -> None:
    with pytest.raises(ConfigError, match=r"unknown key 'server\.http\.prot'"):
        parse_config({"server": {"http": {"prot": 1}}}, base_dir=REPO, environ={})
    with pytest.raises(ConfigError, match=r"did you mean \[server\.http\] port"):
        parse_config({"port": 1}, base_dir=REPO, environ={})
