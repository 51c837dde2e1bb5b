"""The broker as a gateway: the conformance suite's server scenarios, first against the
project's fixture server (fixture_server.py) directly, then against ``context-broker serve
--transport http`` proxying it with ``prefix = ""``. Every scored scenario of the 2025-11-25
and 2026-07-28 requirement sets passes directly, and what passes directly passes through
the broker: a downstream behaves through it as it does when a host connects to it directly.
"""

from __future__ import annotations

import re
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import anyio.abc

from tests.conformance.test_client_scenarios import (
    NODE_DIR,
    REQUIREMENTS,
    SUITE,
    Runner,
    _node_env,
    run_all,
)
from tests.support.broker_procs import running_broker, running_until, write_config

FIXTURE = Path(__file__).resolve().parent / "fixture_server.py"
REVISIONS = ("2025-11-25", "2026-07-28")
SUITE_TIMEOUT = 150  # seconds for one requirement set's run


def _scored_server_scenarios(revision: str) -> list[str]:
    """The server scenarios a revision's requirement set scores."""
    text = (REQUIREMENTS / f"{revision}.yaml").read_text(encoding="utf-8")
    section = text.split("\nserver:\n", 1)[1].split("\n\n", 1)[0]
    return [line.strip()[2:] for line in section.splitlines() if line.strip().startswith("- ")]


@asynccontextmanager
async def running_fixture() -> AsyncIterator[str]:
    """fixture_server.py over Streamable HTTP on a port the system picks; yields its MCP
    URL once it listens, and stops it when the block exits."""
    cmd = [sys.executable, str(FIXTURE), "--port", "0"]
    ready = r"Uvicorn running on (http://\S+)"
    async with running_until(cmd, ready, what="the fixture server") as (found, _):
        yield f"{found.group(1)}/mcp"


async def _suite(url: str, *args: str) -> str:
    """The suite's ``server`` command against ``url``; its whole output."""
    cmd = ["node", str(SUITE), "server", "--url", url, *args]
    with anyio.fail_after(SUITE_TIMEOUT):
        done = await anyio.run_process(cmd, env=_node_env(), cwd=NODE_DIR, check=False)
    return done.stdout.decode() + done.stderr.decode()


async def _passed(url: str, revision: str) -> set[str]:
    """The scored scenarios of ``revision``'s requirement set that pass against ``url``."""
    out = await _suite(url, "--requirements", revision)
    summary = out.split("=== SUMMARY ===", 1)[-1].split("Not scored", 1)[0]
    passed = {m.group(1) for m in re.finditer(r"^✓ ([\w/-]+):", summary, re.MULTILINE)}
    return passed & set(_scored_server_scenarios(revision))


async def _each_set(url: str) -> dict[str, set[str]]:
    """Both requirement sets run at once against ``url``: the scored scenarios each passes."""
    results: dict[str, set[str]] = {}

    async def one(revision: str) -> None:
        results[revision] = await _passed(url, revision)

    async with anyio.create_task_group() as tg:
        for revision in REVISIONS:
            tg.start_soon(one, revision)
    return results


def _missing(passed: dict[str, set[str]], wanted: dict[str, set[str]]) -> list[tuple[str, str]]:
    """The (scenario, revision) pairs in ``wanted`` that did not pass."""
    return sorted((s, rev) for rev in REVISIONS for s in wanted[rev] - passed[rev])


def _failed_checks(out: str) -> str:
    """The part of a verbose report that says which checks failed and why."""
    out = re.sub(r"\x1b\[[0-9;]*m", "", out)  # colours
    _, marker, rest = out.partition("=== Failed Checks ===")
    if not marker:
        return out[-2500:]
    checks = rest.strip("\n").split("\n\n", 1)[0]  # the list, not the scenario's description
    return f"{marker}\n{checks[:2500]}"


def _verbose_runner(url: str) -> Runner:
    """A runner for :func:`run_all`: one scenario again, verbose; what failed in it."""

    async def run(scenario: str, revision: str) -> str | None:
        args = ["--spec-version", revision, "--scenario", scenario, "--verbose"]
        out = await _suite(url, *args)
        return f"{scenario} at {revision}:\n{_failed_checks(out)}"

    return run


async def test_the_fixture_passes_every_scored_server_scenario_of_both_sets() -> None:
    scored = {rev: set(_scored_server_scenarios(rev)) for rev in REVISIONS}
    assert len(scored["2025-11-25"]) >= 30 and len(scored["2026-07-28"]) >= 37, scored
    async with running_fixture() as url:
        passed = await _each_set(url)
    assert not _missing(passed, scored), _missing(passed, scored)


async def test_what_passes_against_the_fixture_passes_through_the_broker(tmp_path: Path) -> None:
    async with running_fixture() as fixture_url:
        direct = await _each_set(fixture_url)
        assert direct["2025-11-25"] and direct["2026-07-28"], direct
        extra = f'\n[servers.fixture]\nurl = "{fixture_url}"\nprefix = ""\n'
        async with running_broker(write_config(tmp_path, extra=extra)) as (base, _):
            url = f"{base}/mcp"
            failing = _missing(await _each_set(url), direct)
            reports = await run_all(failing, _verbose_runner(url)) if failing else []
    names = ", ".join(f"{s} ({rev})" for s, rev in failing)
    assert not failing, f"failing through the broker: {names}\n\n" + "\n\n".join(reports)
