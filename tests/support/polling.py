"""Waiting in tests for something that happens elsewhere (in a subprocess, a file, a log):
poll it, bounded, and fail naming what did not happen."""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TypeVar

import anyio

__all__ = ["eventually", "marks", "wait_for_mark"]

T = TypeVar("T")


async def eventually(
    check: Callable[[], T | Awaitable[T]],
    *,
    within: float = 10.0,
    every: float = 0.05,
    what: str | Callable[[], str] = "",
) -> T:
    """Call ``check`` (sync or async) every ``every`` seconds until it returns a true value,
    and return that value.

    Fails the test with an ``AssertionError`` after ``within`` seconds, saying ``what`` was
    awaited (a callable is asked only then, so it can describe the state that was reached)
    and the last value ``check`` returned."""
    last: object = None
    try:
        with anyio.fail_after(within):
            while True:
                outcome = check()
                if inspect.isawaitable(outcome):
                    outcome = await outcome
                if outcome:
                    return outcome
                last = outcome
                await anyio.sleep(every)
    except TimeoutError:
        said = what() if callable(what) else what
        name = said or getattr(check, "__qualname__", repr(check))
        raise AssertionError(f"not within {within:g}s: {name} (last: {last!r})") from None


def marks(path: Path) -> list[str]:
    """The lines a fixture server appended to ``path`` (none while it does not exist)."""
    return path.read_text(encoding="utf-8").splitlines() if path.exists() else []


async def wait_for_mark(path: Path, mark: str, *, within: float = 10.0) -> None:
    """Wait until a fixture server has written the line ``mark`` to ``path``."""
    await eventually(
        lambda: mark in marks(path),
        within=within,
        what=lambda: f"the mark {mark!r} in {path} (marks: {marks(path)})",
    )
