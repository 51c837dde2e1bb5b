"""Installing the broker shadows nothing: in a fresh virtual environment that already holds
the registry's ``tools`` package, the broker's wheel installs under its own name
(``context_broker``, ``contextcore``), both packages import, and ``context-broker
--version`` runs. The broker's dependencies come from the test setup's .venv (a path entry),
the ``tools`` wheel from the wheelhouse scripts/setup-test.sh keeps, so nothing is fetched."""

from __future__ import annotations

import site
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
WHEELHOUSE = ROOT / ".venv" / "share" / "context-broker" / "wheelhouse"


def _run(*cmd: str | Path, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [str(c) for c in cmd], capture_output=True, text=True, timeout=300, cwd=cwd
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The broker's wheel, built from this checkout."""
    out = tmp_path_factory.mktemp("wheel")
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check"]
    _run(*pip, "wheel", "--quiet", "--no-deps", "--no-build-isolation", "-w", out, ROOT)
    (built,) = out.glob("mcp_context_broker-*.whl")
    return built


def test_the_wheel_holds_no_generic_top_level_name(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as archive:
        tops = {n.split("/")[0] for n in archive.namelist() if not n.startswith("mcp_context")}
        static = [n for n in archive.namelist() if "/ui/static/" in n]
    assert tops == {"context_broker", "contextcore"}, tops
    assert static  # the viewer's files travel with the code


def test_the_registry_tools_package_and_the_broker_work_side_by_side(
    tmp_path: Path, wheel: Path
) -> None:
    registry = sorted(WHEELHOUSE.glob("tools-*.whl"))
    if not registry:
        pytest.fail("the registry's tools wheel is missing; run scripts/setup-test.sh")
    fresh = tmp_path / "fresh"
    _run(sys.executable, "-m", "venv", "--without-pip", fresh)
    python = fresh / "bin" / "python"
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "--python", python]
    _run(*pip, "install", "--quiet", "--no-index", "--no-deps", registry[-1])
    _run(*pip, "install", "--quiet", "--no-index", "--no-deps", wheel)
    # The broker's dependencies, from the test setup's environment (its site-packages only).
    purelib = _run(python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))")
    Path(purelib.stdout.strip(), "deps.pth").write_text(
        "\n".join(site.getsitepackages()) + "\n", encoding="utf-8"
    )
    both = _run(
        python,
        "-c",
        "import tools, context_broker.server.cli, contextcore; "
        "print(tools.__version__, context_broker.server.cli.__name__)",
        cwd=tmp_path,
    )
    assert both.stdout.split() == ["1.0.38", "context_broker.server.cli"], both.stdout
    version = _run(fresh / "bin" / "context-broker", "--version", cwd=tmp_path)
    assert version.stdout.startswith("context-broker "), version.stdout
