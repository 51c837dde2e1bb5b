"""Starting a config's downstream servers once, outside a running server: for
``context-broker check`` (their status) and ``context-broker eval --config`` (their tools)."""

from __future__ import annotations

from typing import Any

import anyio

from ..parts import AppParts
from ..runtime import build_gateway

__all__ = ["gather_downstream"]


def gather_downstream(parts: AppParts) -> list[dict[str, Any]]:
    """Connect to every configured server (each bounded by its timeout), put their tools in
    ``parts.catalog`` and return each server's status; [] when none is configured. An OAuth
    server that needs a person to sign in is reported, not signed in (no browser opens)."""
    gateway = build_gateway(parts.config, parts.catalog, sign_in=False)
    if gateway is None:
        return []

    async def run() -> list[dict[str, Any]]:
        async with gateway:
            await gateway.wait_ready()
            return [s.row().model_dump(mode="json", by_alias=True) for s in gateway.status()]

    return anyio.run(run)
