"""The store URL of ``[persistence] url``: ``${env:NAME}`` expansion, and a form safe to show.

A store URL may carry a password (``postgresql://user:secret@host/db``, ``redis://:secret@host``)
or one in its query, so errors and logs name the store by :func:`describe_url` only, and
:func:`scrub` takes the URL's secrets out of any driver message before it is shown.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from urllib.parse import unquote, urlsplit

from contextcore.errors import ConfigError

__all__ = ["describe_url", "expand_url", "scrub"]

_REF = re.compile(r"\$\{env:([A-Za-z_][A-Za-z0-9_]*)\}")


def expand_url(raw: str, environ: Mapping[str, str]) -> str:
    """``raw`` with each ``${env:NAME}`` replaced; ``ConfigError`` names an unset variable."""

    def sub(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in environ:
            raise ConfigError(
                f"persistence.url: environment variable {name!r} is not set; export it before "
                "starting the broker or write the URL without the ${env:...} reference",
                field="persistence.url",
            )
        return environ[name]

    return _REF.sub(sub, raw)


def describe_url(url: str) -> str:
    """``scheme://host:port/path`` without user, password or query: safe in messages."""
    try:
        parts = urlsplit(url)
        host = parts.hostname or "localhost"
        port = f":{parts.port}" if parts.port else ""
    except ValueError:
        return "(unparsable URL)"
    return f"{parts.scheme}://{host}{port}{parts.path}"


def scrub(text: str, url: str) -> str:
    """``text`` without the URL, its password or any ``password=`` value it holds."""
    secrets = {url}
    try:
        parts = urlsplit(url)
        if parts.password:
            secrets |= {parts.password, unquote(parts.password)}
        for pair in parts.query.split("&"):
            key, _, value = pair.partition("=")
            if "pass" in key.lower() and value:
                secrets |= {value, unquote(value)}
    except ValueError:
        pass
    for secret in sorted(secrets, key=len, reverse=True):
        if len(secret) >= 3:
            text = text.replace(secret, "***")
    return text
