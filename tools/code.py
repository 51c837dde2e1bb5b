"""Argument model and description of ``run_code``, code mode's tool: a program the model
writes runs over the downstream tools in a sandbox and only its answer comes back.

The run itself is asynchronous and lives in ``server/host/code_mode.py``; this module only
describes what hosts see."""

from __future__ import annotations

from pydantic import Field

from ._spec import Args

__all__ = ["RUN_CODE", "RUN_CODE_DESCRIPTION", "RunCodeArgs"]

RUN_CODE = "run_code"
RUN_CODE_DESCRIPTION = (
    "Run a short Python program over the downstream tools; only what it prints and the value "
    "of its last expression come back, not the tools' results. Each tool is an async "
    "function named as build_request_context names it, called with keyword arguments "
    '(`orders = await records__list_orders(country="NO")`); `await call_tool(server, tool, '
    "arguments)` reaches any. A call returns the tool's structured content, else its text; a "
    "failed call raises. Variables stay for the next run with the same session_id. No files, "
    "network or environment."
)


class RunCodeArgs(Args):
    code: str = Field(
        min_length=1,
        max_length=100_000,
        description="Python (top-level await allowed); the last expression is the answer.",
    )
    session_id: str | None = Field(
        None,
        description="The session whose variables the program sees and keeps (default: this "
        "connection's session).",
    )
    reset: bool = Field(False, description="Forget the session's variables before running.")
