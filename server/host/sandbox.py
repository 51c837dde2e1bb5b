"""The sandbox code mode runs programs in: a pool of ``pydantic-monty`` worker processes (a
Python interpreter written in Rust, with no filesystem, network, environment or
subprocess), started on first use, with the limits of the ``[code]`` table.

A program that runs past its limits gets an exception inside the sandbox; a worker that
crashes, or does not answer within ``run_timeout``, is killed and replaced by the pool. The
variables a run defines come back as opaque bytes (``Outcome.state``), which the next run
of the same session loads again; a run that fails leaves no state (the session keeps the one
before it).
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import anyio
import pydantic_monty as monty

from ..settings import CodeConfig

__all__ = ["Outcome", "Sandbox", "SandboxFailure"]

log = logging.getLogger(__name__)


class SandboxFailure(Exception):
    """A program did not finish: its syntax, a type error, an exception it raised, a limit,
    or a worker that was lost. ``message`` is what the model reads (with line numbers)."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


@dataclass(frozen=True)
class Outcome:
    """A finished run: its last expression's value, what it printed, and the session state
    it leaves (None: nothing to keep)."""

    value: Any
    printed: str
    state: bytes | None
    checked_with: str


class _Printed:
    """What a program prints, kept up to ``limit`` characters (the rest is counted, not
    kept: a program that prints without end runs into its time limit, not the host's
    memory)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.parts: list[str] = []
        self.kept = 0
        self.dropped = 0

    def __call__(self, stream: str, text: str) -> None:
        room = self.limit - self.kept
        if room > 0:
            self.parts.append(text[:room])
            self.kept += min(len(text), room)
        self.dropped += max(0, len(text) - max(room, 0))

    @property
    def text(self) -> str:
        out = "".join(self.parts)
        if self.dropped:
            out += f"\n[printed output cut at {self.limit} characters; {self.dropped} more]"
        return out


class Sandbox:
    """One pool of sandbox workers for the broker's whole life (see :meth:`aclose`)."""

    def __init__(self, config: CodeConfig) -> None:
        self.config = config
        self._pool: monty.AsyncMonty | None = None
        self._lock = anyio.Lock()

    async def _started(self) -> monty.AsyncMonty:
        async with self._lock:
            if self._pool is None:
                pool = monty.AsyncMonty(
                    min_processes=1,
                    max_processes=self.config.workers,
                    request_timeout=self.config.run_timeout,
                    checkout_timeout=self.config.run_timeout,
                )
                try:
                    await pool.__aenter__()
                except (OSError, monty.MontyError) as exc:
                    log.error("the code sandbox could not start: %s", exc)
                    raise SandboxFailure(
                        f"the sandbox could not start ({exc}); the broker's log has the "
                        "details (scripts/setup.sh installs pydantic-monty's worker)"
                    ) from None
                self._pool = pool
            return self._pool

    async def aclose(self) -> None:
        """Stop the workers (started again on the next run)."""
        async with self._lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            await pool.__aexit__(None, None, None)

    def _limits(self) -> monty.ResourceLimits:
        c = self.config
        return {
            "max_feed_duration_secs": c.timeout,
            "max_memory": c.max_memory_mb * 1024 * 1024,
            "max_recursion_depth": c.max_recursion_depth,
            # Every call suspends the program, and so does each result of calls awaited
            # together: the runner counts the calls, this bounds whatever else suspends.
            "max_suspensions": 2 * c.max_calls + 10,
        }

    async def run(
        self,
        code: str,
        stubs: str,
        functions: Mapping[str, Callable[..., Any]],
        state: bytes | None = None,
        checked_with: str = "",
    ) -> Outcome:
        """Run ``code`` with ``functions`` callable by name, after loading ``state``. The
        program is type-checked against ``stubs``, except on a state made under other stubs
        (``checked_with``: their digest), which keeps the checker it was made with."""
        pool = await self._started()
        digest = hashlib.sha256(stubs.encode()).hexdigest()[:16]
        printed = _Printed(self.config.max_output_chars)
        session = pool.checkout(
            script_name="run_code.py",
            limits=self._limits(),
            type_check=True,
            type_check_stubs=stubs,
            type_check_format="concise",
            os_policy={"sleep": "zero"},
        )
        try:
            with anyio.fail_after(self.config.run_timeout):
                async with session:
                    if state is not None:
                        await session.load_session(state)
                    value = await session.feed_run(
                        code,
                        external_lookup=dict(functions),
                        print_callback=printed,
                        skip_type_check=state is not None and checked_with != digest,
                    )
                    kept = await session.dump()
        except monty.MontyError as exc:
            raise _failure(exc) from None
        except TimeoutError:
            raise SandboxFailure(
                f"the run took longer than {self.config.run_timeout:g} s (code.run_timeout) "
                "and was stopped; make fewer or faster tool calls"
            ) from None
        kept_with = digest if state is None else checked_with
        return Outcome(value, printed.text, kept, kept_with)


def _failure(exc: monty.MontyError) -> SandboxFailure:
    """What the model reads of a program that did not finish."""
    if isinstance(exc, monty.MontySyntaxError):
        return SandboxFailure(f"nothing ran: {exc.display('traceback').strip()}")
    if isinstance(exc, monty.MontyTypingError):
        return SandboxFailure(f"nothing ran: {exc.display().strip()}")
    if isinstance(exc, monty.MontyRuntimeError):
        return SandboxFailure(exc.display("traceback"))
    if isinstance(exc, monty.MontyCrashedError):
        log.warning("a sandbox worker was lost (%s); the pool replaces it", exc)
        return SandboxFailure(f"the sandbox worker stopped ({exc}); it was replaced")
    return SandboxFailure(f"the sandbox failed: {exc}")
