"""Where OAuth tokens of downstream servers are kept: one JSON file, private to the user.

The file (``[gateway] token_file``) maps each server name to what its authorization left
behind: the tokens with their absolute expiry, the client registration, and the discovered
protected resource and authorization server metadata, so a restarted broker refreshes an
expired token at the right endpoint instead of asking a person again. Entries are bound to
the server's URL: a server whose URL changed starts over. The file is written atomically with
mode 0600 and never printed; ``context-broker auth status`` shows only what a person needs.
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, TypeVar

from mcp.client.auth.oauth2 import OAuthContext
from mcp.shared.auth import (
    OAuthClientInformationFull,
    OAuthMetadata,
    OAuthToken,
    ProtectedResourceMetadata,
)
from pydantic import BaseModel, ValidationError

from .errors import TokenFileError

__all__ = ["ServerTokens", "TokenFile"]

log = logging.getLogger(__name__)

_VERSION = 1
M = TypeVar("M", bound=BaseModel)


class TokenFile:
    """The token file at ``path``, or tokens kept in memory only when ``path`` is None."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self._memory: dict[str, Any] = {}

    def entry(self, server: str, url: str) -> dict[str, Any]:
        """What is stored for ``server`` at ``url`` (empty when nothing, or another URL)."""
        row = self._read().get(server)
        if not isinstance(row, dict) or row.get("url") != url:
            return {}
        return row

    def update(self, server: str, url: str, **fields: Any) -> None:
        """Merge ``fields`` into the entry of ``server`` (a new entry when its URL changed)."""
        data = self._read()
        row = data.get(server)
        if not isinstance(row, dict) or row.get("url") != url:
            row = {"url": url}
        row.update(fields)
        data[server] = row
        self._write(data)

    def forget(self, server: str) -> bool:
        """Drop everything stored for ``server``; whether there was anything."""
        data = self._read()
        if server not in data:
            return False
        del data[server]
        self._write(data)
        return True

    def servers(self) -> dict[str, dict[str, Any]]:
        """Every stored entry by server name."""
        return {k: v for k, v in self._read().items() if isinstance(v, dict)}

    def _read(self) -> dict[str, Any]:
        if self.path is None:  # a copy, as a read of the file would give
            copy: dict[str, Any] = json.loads(json.dumps(self._memory))
            return copy
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return {}
        except OSError as exc:
            raise self._error("cannot read", exc) from exc
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise TokenFileError(
                f"token file {str(self.path)!r} is not valid JSON ({exc.msg}); delete it and "
                "sign in again with `context-broker auth login NAME`"
            ) from None
        servers = data.get("servers") if isinstance(data, dict) else None
        return servers if isinstance(servers, dict) else {}

    def _write(self, servers: dict[str, Any]) -> None:
        if self.path is None:
            self._memory = servers
            return
        text = json.dumps({"version": _VERSION, "servers": servers}, indent=2, sort_keys=True)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            # mkstemp creates the file 0600, so the tokens are never readable by others.
            fd, tmp = tempfile.mkstemp(prefix=f".{self.path.name}.", dir=self.path.parent)
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                handle.write(text + "\n")
            os.replace(tmp, self.path)
        except OSError as exc:
            raise self._error("cannot write", exc) from exc

    def _error(self, what: str, exc: OSError) -> TokenFileError:
        return TokenFileError(
            f"{what} token file {str(self.path)!r}: {exc.strerror or exc}; choose a writable "
            "place with [gateway] token_file"
        )


class ServerTokens:
    """One server's slice of the token file, as the SDK's ``TokenStorage``.

    Bound to the provider's :class:`OAuthContext` (:meth:`bind`), it also keeps what the SDK
    holds only in memory: the token's absolute expiry and the discovered metadata, restored
    when the tokens are loaded so a refresh after a restart goes to the right endpoint.
    ``fixed_client`` is a pre-registered client (from the config), never stored.
    """

    def __init__(
        self,
        store: TokenFile,
        server: str,
        url: str,
        fixed_client: OAuthClientInformationFull | None = None,
        on_secret: Callable[[Iterable[str]], None] | None = None,
    ) -> None:
        self.store = store
        self.server = server
        self.url = url
        self.fixed_client = fixed_client
        self.on_secret = on_secret
        self._context: OAuthContext | None = None

    def bind(self, context: OAuthContext) -> None:
        """Restore into and capture from ``context`` (the provider's)."""
        self._context = context

    async def get_tokens(self) -> OAuthToken | None:
        row = self.store.entry(self.server, self.url)
        tokens = _load(OAuthToken, row.get("tokens"))
        if tokens is not None:
            self._reveal(tokens)
            if self._context is not None:
                self._restore(self._context, row)
        return tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self._reveal(tokens)
        fields: dict[str, Any] = {"tokens": tokens.model_dump(mode="json", exclude_none=True)}
        context = self._context
        if context is not None:
            fields["expires_at"] = context.token_expiry_time
            fields["auth_server_url"] = context.auth_server_url
            for key, model in (
                ("resource_metadata", context.protected_resource_metadata),
                ("server_metadata", context.oauth_metadata),
            ):
                fields[key] = None if model is None else model.model_dump(mode="json")
        fields["saved_at"] = time.time()
        self.store.update(self.server, self.url, **fields)

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        if self.fixed_client is not None:
            return self.fixed_client
        return _load(
            OAuthClientInformationFull, self.store.entry(self.server, self.url).get("client")
        )

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        if self.fixed_client is not None:
            return
        dumped = client_info.model_dump(mode="json", exclude_none=True)
        self.store.update(self.server, self.url, client=dumped)

    def _reveal(self, tokens: OAuthToken) -> None:
        """Hand the token values to the redactor, so no log line or error can show them."""
        if self.on_secret is not None:
            self.on_secret(t for t in (tokens.access_token, tokens.refresh_token) if t)

    def _restore(self, context: OAuthContext, row: dict[str, Any]) -> None:
        expires_at = row.get("expires_at")
        if isinstance(expires_at, int | float):
            context.token_expiry_time = float(expires_at)
        if context.oauth_metadata is None:
            context.oauth_metadata = _load(OAuthMetadata, row.get("server_metadata"))
        if context.protected_resource_metadata is None:
            prm = _load(ProtectedResourceMetadata, row.get("resource_metadata"))
            context.protected_resource_metadata = prm
        if context.auth_server_url is None and isinstance(row.get("auth_server_url"), str):
            context.auth_server_url = row["auth_server_url"]


def _load(model: type[M], raw: Any) -> M | None:
    """``raw`` as ``model``; None when absent or no longer valid (then the flow starts over)."""
    if raw is None:
        return None
    try:
        return model.model_validate(raw)
    except ValidationError:
        log.warning("ignoring a stored OAuth record that is no longer valid (%s)", model.__name__)
        return None
