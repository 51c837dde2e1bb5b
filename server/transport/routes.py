"""The routes the HTTP transport serves beside ``/mcp``: ``/healthz``, ``/readyz`` (whether
the broker can answer well now: its model, its store, its downstream servers), ``/metrics``
and the request-context view under ``/ui/``."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import anyio.to_thread
from prometheus_client import CONTENT_TYPE_LATEST
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from contextcore.embedding import Embedder

from ..gateway import Gateway
from ..observability import Observer, StatusRow
from ..parts import AppParts
from ..ui.web import ui_routes
from .http_guard import AUTHENTICATED

__all__ = ["Readiness", "health_routes", "http_routes", "readiness"]


@dataclass
class Readiness:
    """``/readyz``: ready, or the reasons it is not; ``checks`` says what was looked at."""

    reasons: list[str] = field(default_factory=list)
    checks: dict[str, Any] = field(default_factory=dict)

    @property
    def ready(self) -> bool:
        return not self.reasons

    def to_dict(self) -> dict[str, Any]:
        return {"ready": self.ready, "reasons": self.reasons, "checks": self.checks}


def readiness(
    model: Callable[[], tuple[str, str | None]],
    store: Callable[[], object],
    downstream: Callable[[], Iterable[StatusRow]] | None,
    downstream_gathered: bool = True,
) -> Readiness:
    """Whether the broker can answer well now. ``model()`` gives (state, reason) with state
    ``loaded``, ``lexical-only`` (semantic off by choice), ``loading`` or ``failed``;
    ``store()`` touches the session store. Downstream states are reported; the broker is not
    ready until the first gathering of downstream servers is over."""
    out = Readiness()
    state, why = model()
    out.checks["model"] = {"state": state, **({"reason": why} if why else {})}
    if state not in ("loaded", "lexical-only"):
        out.reasons.append(f"embedding model {state}" + (f": {why}" if why else ""))
    try:
        store()
    except Exception as exc:  # any backend failure means "not reachable"
        out.checks["store"] = {"state": "unreachable", "reason": f"{type(exc).__name__}: {exc}"}
        out.reasons.append(f"session store unreachable: {type(exc).__name__}: {exc}")
    else:
        out.checks["store"] = {"state": "reachable"}
    if downstream is not None:
        out.checks["downstream"] = dict(downstream())
        if not downstream_gathered:
            out.reasons.append("downstream servers still connecting")
    return out


def health_routes(observer: Observer, ready: Callable[[], Readiness]) -> list[BaseRoute]:
    """``/healthz`` (alive), ``/readyz`` (503 when not ready; the reasons and checks only for
    a request with the bearer token), ``/metrics``."""

    async def healthz(request: Request) -> Response:
        return JSONResponse({"status": "alive"})

    async def readyz(request: Request) -> Response:
        state = await anyio.to_thread.run_sync(ready)
        # Reasons and checks name servers, files and store addresses: only for the token.
        body = state.to_dict() if request.scope.get(AUTHENTICATED) else {"ready": state.ready}
        return JSONResponse(body, status_code=200 if state.ready else 503)

    async def metrics(request: Request) -> Response:
        return Response(observer.metrics(), media_type=CONTENT_TYPE_LATEST)

    return [
        Route("/healthz", endpoint=healthz, methods=["GET"]),
        Route("/readyz", endpoint=readyz, methods=["GET"]),
        Route("/metrics", endpoint=metrics, methods=["GET"]),
    ]


def _model_state(embedder: Embedder | None) -> tuple[str, str | None]:
    if embedder is None:
        return "lexical-only", "search.semantic = false"
    status = embedder.status()
    if status.loaded:
        return "loaded", None
    if status.error:
        return "failed", status.error
    return "loading", f"{status.model} is still loading"


def http_routes(parts: AppParts, observer: Observer, gateway: Gateway | None) -> list[BaseRoute]:
    """The routes the HTTP transport serves beside ``/mcp``: health, metrics and ``/ui/``."""

    def states() -> list[StatusRow]:
        return [(s.name, s.state) for s in gateway.status()] if gateway is not None else []

    if gateway is not None:
        observer.watch_downstream(states)

    def ready() -> Readiness:
        rows = states()
        return readiness(
            lambda: _model_state(parts.embedder),
            lambda: parts.broker.store.header("s_readiness-probe"),
            states if gateway is not None else None,
            downstream_gathered=all(state != "starting" for _, state in rows),
        )

    return [*health_routes(observer, ready), *ui_routes(parts.broker)]
