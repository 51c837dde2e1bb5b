"""``scripts/test-repeat.sh``: the suite (here a small part of it) run several times in a row,
a line per run, how many failed, the exit status saying whether any did."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "test-repeat.sh"


def _repeat(*args: str, logs: Path | None = None) -> subprocess.CompletedProcess[str]:
    """The script run with ``args``; its log folder goes under ``logs`` when given."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "HYPOTHESIS_"))}
    if logs is not None:
        env["TMPDIR"] = str(logs)
    return subprocess.run(
        [str(SCRIPT), *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300
    )


def test_each_run_is_a_line_and_runs_that_all_pass_exit_0(tmp_path: Path) -> None:
    passing = "tests/core/test_eval.py::test_metrics_on_a_known_ranking"
    done = _repeat("2", passing, "-n", "0", logs=tmp_path)
    lines = done.stdout.splitlines()
    assert done.returncode == 0, done.stdout + done.stderr
    assert [line.split(" in ")[0] for line in lines[:2]] == ["run 1/2 passed", "run 2/2 passed"]
    assert all(": 1 passed in " in line for line in lines[:2]), lines
    logs = Path(lines[2].split(" is in ")[1])
    assert logs.parent == tmp_path
    assert lines[2].startswith("0 of 2 runs failed") and sorted(os.listdir(logs)) == [
        "run1.log",
        "run2.log",
    ]


def test_a_test_that_fails_in_one_run_only_fails_that_run_and_the_whole(tmp_path: Path) -> None:
    """The flakiness the script is for: a test that fails on its second run and passes on the
    others gives a FAILED line for run 2 alone, "1 of 3 runs failed" and exit status 1."""
    (tmp_path / "test_flaky.py").write_text(
        "from pathlib import Path\n\n\n"
        "def test_fails_on_its_second_run() -> None:\n"
        "    runs = Path(__file__).with_name('runs')\n"
        "    done = int(runs.read_text()) + 1 if runs.exists() else 1\n"
        "    runs.write_text(str(done))\n"
        "    assert done != 2\n"
    )
    flaky = str(tmp_path / "test_flaky.py")
    done = _repeat("3", flaky, "-c", "pyproject.toml", "-n", "0", logs=tmp_path)
    lines = done.stdout.splitlines()
    assert done.returncode == 1, done.stdout + done.stderr
    assert [line.split(" in ")[0] for line in lines[:3]] == [
        "run 1/3 passed",
        "run 2/3 FAILED",
        "run 3/3 passed",
    ], lines
    assert ": 1 failed in " in lines[1] and ": 1 passed in " in lines[2], lines
    assert lines[3].startswith("1 of 3 runs failed"), lines
    logs = Path(lines[3].split(" is in ")[1])
    assert "assert 2 != 2" in (logs / "run2.log").read_text()
    assert (tmp_path / "runs").read_text() == "3"


def test_a_count_that_is_not_a_whole_number_is_refused() -> None:
    for count in ("zero", "0", "-3", "2.5"):
        done = _repeat(count)
        assert done.returncode == 2 and done.stdout == ""
        assert f"got '{count}'" in done.stderr
