"""The read-only web pages under ``/ui/`` (sessions, a session's turns, the "View Context"
modal, the catalog, analytics) and the JSON they read, for the HTTP transport. Every page
is one self-contained document; the guard in front checks Host, Origin and the bearer token
as for ``/mcp``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import anyio.to_thread
from context_broker.tools.analytics import usage_payload
from context_broker.tools.catalog import catalog_rows
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.routing import BaseRoute, Route

from contextcore.errors import ContextCoreError
from contextcore.services.broker import ContextBroker

from .assets import web_html
from .charts import analytics_html
from .view import SESSIONS_PAGE, SESSIONS_PAGE_MAX, request_view, session_page, turn_rows

__all__ = ["PAGE_CSP", "ui_routes"]

T = TypeVar("T")

# Inline scripts and styles only; the page talks to its own origin and nothing else.
PAGE_CSP = (
    "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; "
    "img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'none'; "
    "frame-ancestors 'none'"
)
_HEADERS = {"Content-Security-Policy": PAGE_CSP, "Cache-Control": "no-store"}


class _Pages:
    def __init__(self, broker: ContextBroker) -> None:
        self.broker = broker

    async def _json(self, fn: Callable[[], Any]) -> Response:
        try:
            data = await anyio.to_thread.run_sync(fn)
        except ContextCoreError as exc:
            return JSONResponse({"error": exc.message}, status_code=404, headers=_HEADERS)
        return JSONResponse(data, headers=_HEADERS)

    async def page(self, request: Request) -> Response:
        return HTMLResponse(web_html(), headers=_HEADERS)

    async def sessions(self, request: Request) -> Response:
        """``?limit=`` (default 50, at most 200) sessions after ``?offset=``, newest first."""
        try:
            limit = _int_param(request, "limit", SESSIONS_PAGE, 1, SESSIONS_PAGE_MAX)
            offset = _int_param(request, "offset", 0, 0, None)
        except ValueError as exc:
            return JSONResponse({"error": str(exc)}, status_code=400, headers=_HEADERS)
        return await self._json(
            lambda: session_page(self.broker, offset, limit).model_dump(mode="json")
        )

    async def turns(self, request: Request) -> Response:
        session_id = request.path_params["session_id"]
        return await self._json(
            lambda: [r.model_dump(mode="json") for r in turn_rows(self.broker, session_id)]
        )

    async def request_context(self, request: Request) -> Response:
        p = request.path_params
        return await self._json(
            lambda: request_view(self.broker, p["session_id"], p["request_id"]).model_dump(
                mode="json"
            )
        )

    async def catalog(self, request: Request) -> Response:
        return await self._json(lambda: catalog_rows(self.broker).model_dump(mode="json"))

    async def analytics(self, request: Request) -> Response:
        def build() -> dict[str, Any]:
            usage = usage_payload(self.broker).model_dump(mode="json", exclude={"report"})
            return {"stats": usage, "html": analytics_html(usage)}

        return await self._json(build)


def _int_param(request: Request, name: str, default: int, low: int, high: int | None) -> int:
    """A query parameter as an integer in ``[low, high]``; ``ValueError`` says what is wrong."""
    raw = request.query_params.get(name)
    if raw is None:
        return default
    value = int(raw) if raw.isdigit() and len(raw) <= 9 else -1
    if value < low or (high is not None and value > high):
        limit = f"from {low} to {high}" if high is not None else f"{low} or more"
        raise ValueError(f"{name} must be a whole number {limit}, got {raw[:20]!r}")
    return value


def ui_routes(broker: ContextBroker) -> list[BaseRoute]:
    """The ``/ui/`` routes of one broker."""
    pages = _Pages(broker)
    get = ["GET"]
    return [
        Route("/ui", endpoint=lambda r: RedirectResponse("/ui/"), methods=get),
        Route("/ui/", endpoint=pages.page, methods=get),
        Route("/ui/api/sessions", endpoint=pages.sessions, methods=get),
        Route("/ui/api/sessions/{session_id}/turns", endpoint=pages.turns, methods=get),
        Route(
            "/ui/api/sessions/{session_id}/requests/{request_id}",
            endpoint=pages.request_context,
            methods=get,
        ),
        Route("/ui/api/catalog", endpoint=pages.catalog, methods=get),
        Route("/ui/api/analytics", endpoint=pages.analytics, methods=get),
    ]
