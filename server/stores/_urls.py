"""The store URL of ``[persistence] url``: ``${env:NAME}`` expansion, and a form safe to show.

A store address may carry a password (``postgresql://user:secret@host/db``,
``redis://:secret@host``, libpq's ``host=... password=secret``) or one in its query, so errors
and logs name the store by :func:`describe_url` only, and :func:`scrub` takes the address's
secrets out of any driver message before it is shown (both from ``server.redaction``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from context_broker.server.redaction import safe_address as describe_url
from context_broker.server.redaction import scrub

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
