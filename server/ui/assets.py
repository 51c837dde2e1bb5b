"""The pages' HTML, scripts and styles, shipped inside the package and inlined into each page
so that every page is one self-contained document (no CDN, works air-gapped)."""

from __future__ import annotations

import functools
from importlib import resources

__all__ = ["app_html", "asset", "web_html"]


@functools.cache
def asset(name: str) -> str:
    """The text of ``static/<name>``."""
    return (resources.files(__package__) / "static" / name).read_text(encoding="utf-8")


def _script(name: str) -> str:
    # Inlined scripts must not close their own <script> element.
    return asset(name).replace("</", "<\\/")


@functools.cache
def app_html() -> str:
    """The MCP App document: the modal and the postMessage bridge, all inline."""
    return (
        asset("app.html")
        .replace("/*MODAL_CSS*/", asset("modal.css"))
        .replace("/*MODAL_JS*/", _script("modal.js"))
        .replace("/*APP_JS*/", _script("app.js"))
    )


@functools.cache
def web_html() -> str:
    """The web pages' single document (sessions, turns, catalog, analytics)."""
    return (
        asset("index.html")
        .replace("/*MODAL_CSS*/", asset("modal.css"))
        .replace("/*WEB_CSS*/", asset("web.css"))
        .replace("/*MODAL_JS*/", _script("modal.js"))
        .replace("/*WEB_JS*/", _script("web.js"))
    )
