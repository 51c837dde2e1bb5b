"""A store backend whose client library is not installed is a one-line error naming the key
and the extra to install, from ``check`` and ``serve``, never a traceback.

The broker runs as a real subprocess with a folder first on its ``PYTHONPATH`` in which the
driver's module fails to import the way a missing package does."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

BROKER = str(Path(sys.executable).parent / "context-broker")
DRIVERS = {"postgres": "psycopg", "redis": "redis"}
URLS = {"postgres": "postgresql://broker@127.0.0.1:9/broker", "redis": "redis://127.0.0.1:9/0"}


@pytest.mark.parametrize("command", ["check", "serve"])
@pytest.mark.parametrize("backend", sorted(DRIVERS))
def test_a_backend_without_its_extra_says_which_extra_to_install(
    tmp_path: Path, backend: str, command: str
) -> None:
    driver = DRIVERS[backend]
    shadow = tmp_path / "without-driver"
    shadow.mkdir()
    (shadow / f"{driver}.py").write_text(
        f"raise ModuleNotFoundError(\"No module named '{driver}'\", name={driver!r})\n",
        encoding="utf-8",
    )
    config = tmp_path / "broker.toml"
    config.write_text(
        f'[search]\nsemantic = false\n\n[persistence]\nbackend = "{backend}"\n'
        f'url = "{URLS[backend]}"\n',
        encoding="utf-8",
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("CONTEXT_BROKER_")}
    env["PYTHONPATH"] = str(shadow)
    out = subprocess.run(
        [BROKER, command, "--config", str(config)],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        stdin=subprocess.DEVNULL,
    )
    said = out.stdout + out.stderr
    assert out.returncode == 1, said
    assert "Traceback" not in said
    assert "persistence.backend" in said and f"No module named '{driver}'" in said, said
    assert f"pip install 'mcp-context-broker[{backend}]'" in said, said
