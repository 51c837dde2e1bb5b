"""The Hypothesis profiles: random for developers, derandomized under CI."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.support.broker_procs import ROOT

SHOW = "import tests.conftest; from hypothesis import settings; d = settings.default; " + (
    "print(d.derandomize, d.database is None)"
)


@pytest.mark.parametrize(
    ("profile", "expected"), [("ci", "True True"), (None, "False False")], ids=["ci", "default"]
)
def test_the_ci_profile_derandomizes_property_tests(profile: str | None, expected: str) -> None:
    env = {k: v for k, v in os.environ.items() if k != "HYPOTHESIS_PROFILE"}
    if profile is not None:
        env["HYPOTHESIS_PROFILE"] = profile
    shown = subprocess.run(
        [sys.executable, "-c", SHOW], cwd=ROOT, env=env, capture_output=True, text=True, check=True
    )
    assert shown.stdout.split() == expected.split()


def test_ci_runs_the_suite_under_the_ci_profile() -> None:
    assert "export HYPOTHESIS_PROFILE=ci" in (ROOT / ".ci" / "run").read_text(encoding="utf-8")
