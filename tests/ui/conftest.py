"""Fixtures for the UI tests: Debian's Chromium driven by Playwright (never a downloaded
browser), and a folder for screenshots."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "server"))

CHROMIUM = "/usr/bin/chromium"
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


# Per module: Playwright's sync API keeps an event loop running in the test thread while it
# is open, which async tests in other modules cannot run beside.
@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing; run scripts/setup-browser.sh (as root) first")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        chromium = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
        yield chromium
        chromium.close()


@pytest.fixture
def artifacts(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where screenshots go: tests/ui/artifacts/ (gitignored)."""
    folder = Path(__file__).parent / "artifacts"
    folder.mkdir(exist_ok=True)
    return folder
