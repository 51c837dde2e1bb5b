"""The broker as an MCP client: every client scenario besides ``auth/*`` that the conformance
suite's 2025-11-25 and 2026-07-28 requirement sets score, each at its revision, plus
``json-schema-2020-12-preservation``, through ``context-broker serve`` (client_driver.py
plays the suite's client command; test_client_scenarios.py runs the OAuth ones)."""

from __future__ import annotations

import shlex
import sys

import anyio
import pytest

from tests.conformance.test_client_scenarios import (
    DRIVER,
    NODE_DIR,
    REQUIREMENTS,
    SUITE,
    _node_env,
    run_all,
)

REVISIONS = ("2025-11-25", "2026-07-28")
EXTRA = [("json-schema-2020-12-preservation", revision) for revision in REVISIONS]


def _scored(revision: str) -> list[str]:
    """The client scenarios a revision's requirement set scores, ``auth/*`` left out."""
    path = REQUIREMENTS / f"{revision}.yaml"
    if not path.exists():
        pytest.fail("conformance-2026 is not installed; run scripts/setup-node.sh")
    section = path.read_text(encoding="utf-8").split("\nclient:\n", 1)[1].split("\n\n", 1)[0]
    names = [line.strip()[2:] for line in section.splitlines() if line.strip().startswith("- ")]
    return [name for name in names if not name.startswith("auth/")]


async def _run(scenario: str, revision: str, host: str = "handshake") -> str | None:
    """None when the scenario passed at ``revision``, else the end of its report; ``host``:
    the era the driver's host speaks ("handshake", or "2026-07-28")."""
    command = f"{shlex.quote(sys.executable)} {shlex.quote(str(DRIVER))}"
    cmd = ["node", str(SUITE), "client", "--command", command, "--scenario", scenario]
    cmd += ["--spec-version", revision, "--timeout", "90000"]
    env = _node_env() | {"CONFORMANCE_HOST": host}
    with anyio.fail_after(150):
        done = await anyio.run_process(cmd, env=env, cwd=NODE_DIR, check=False)
    out = done.stdout.decode() + done.stderr.decode()
    if done.returncode == 0 and "OVERALL: PASSED" in out:
        return None
    return f"{scenario} ({revision}, {host} host):\n{out[-3000:]}"


async def test_every_scored_client_scenario_besides_oauth_passes_through_the_broker() -> None:
    runs = [(s, revision) for revision in REVISIONS for s in _scored(revision)] + EXTRA
    assert len(runs) >= 12, runs
    failures = await run_all(runs, _run)
    assert not failures, "\n\n".join(failures)


async def test_every_scored_client_scenario_besides_oauth_passes_for_a_2026_07_28_host() -> None:
    """The same scenarios with the host on the 2026-07-28 wire: a downstream's questions
    reach it in ``InputRequiredResult`` answers."""
    runs = [(s, revision) for revision in REVISIONS for s in _scored(revision)] + EXTRA

    async def modern(scenario: str, revision: str) -> str | None:
        return await _run(scenario, revision, "2026-07-28")

    failures = await run_all(runs, modern)
    assert not failures, "\n\n".join(failures)
