"""Every distribution the product (contextcore/, tools/, server/) imports is declared in
pyproject.toml, and every declared one is used: ``deptry .``, configured in ``[tool.deptry]``,
over the repository, and over a copy of the product with undeclared imports added, which it
must catch."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PRODUCT = ("contextcore", "tools", "server")


def deptry(project: Path) -> tuple[int, str]:
    """Run ``deptry .`` in ``project`` with this interpreter; its exit code and output."""
    done = subprocess.run(
        [sys.executable, "-m", "deptry", "--no-ansi", "."],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    return done.returncode, done.stdout + done.stderr


def test_every_distribution_the_product_imports_is_declared() -> None:
    code, output = deptry(ROOT)
    assert code == 0, output


def test_an_undeclared_import_fails_the_check(tmp_path: Path) -> None:
    shutil.copy(ROOT / "pyproject.toml", tmp_path)
    for package in PRODUCT:
        shutil.copytree(
            ROOT / package, tmp_path / package, ignore=shutil.ignore_patterns("__pycache__")
        )
    # certifi arrives only through other packages; httpx is declared for the tests alone.
    (tmp_path / "server" / "undeclared.py").write_text("import certifi\nimport httpx\n")
    code, output = deptry(tmp_path)
    assert code == 1, output
    assert "DEP003 'certifi' imported but it is a transitive dependency" in output
    assert "DEP004 'httpx' imported but declared as a dev dependency" in output
