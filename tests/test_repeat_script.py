"""``scripts/test-repeat.sh``: the suite (here a small part of it) run several times in a row,
a line per run, how many failed, the exit status saying whether any did."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "test-repeat.sh"


def _repeat(*args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "HYPOTHESIS_"))}
    return subprocess.run(
        [str(SCRIPT), *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300
    )


def test_each_run_is_a_line_and_the_status_says_whether_any_failed() -> None:
    passing = "tests/core/test_eval.py::test_metrics_on_a_known_ranking"
    done = _repeat("2", passing, "-n", "0")
    lines = done.stdout.splitlines()
    assert done.returncode == 0, done.stdout + done.stderr
    assert [line.split(" in ")[0] for line in lines[:2]] == ["run 1/2 passed", "run 2/2 passed"]
    assert all(": 1 passed in " in line for line in lines[:2]), lines
    logs = Path(lines[2].split(" is in ")[1])
    assert lines[2].startswith("0 of 2 runs failed") and sorted(os.listdir(logs)) == [
        "run1.log",
        "run2.log",
    ]
    done = _repeat("2", "tests/core/test_eval.py", "-k", "no_test_has_this_name", "-n", "0")
    assert done.returncode == 1
    assert done.stdout.splitlines()[-1].startswith("2 of 2 runs failed")


def test_a_count_that_is_not_a_whole_number_is_refused() -> None:
    for count in ("zero", "0", "-3", "2.5"):
        done = _repeat(count)
        assert done.returncode == 2 and done.stdout == ""
        assert f"got '{count}'" in done.stderr
