"""Profiles are read at startup: a reload that changes them says a restart is needed."""

from __future__ import annotations

from pathlib import Path

from context_broker.server.parts import build_parts
from context_broker.server.reload import ConfigReloader
from context_broker.server.settings import load_config

from tests.support.broker_procs import write_config


def test_a_reload_that_changes_profiles_names_them_as_needing_a_restart(tmp_path: Path) -> None:
    path = write_config(tmp_path, extra='\n[profiles.a]\nrules = ["python-style"]\n')
    parts = build_parts(load_config(path, environ={}), use_config_embedder=False)
    reloader = ConfigReloader(path, parts, None)
    path.write_text(path.read_text().replace('"python-style"]', '"sql-safety"]'))
    report = reloader.reload()
    assert report is not None and report.restart_needed == ("profiles",)
