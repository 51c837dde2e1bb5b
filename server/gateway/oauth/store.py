"""Where OAuth tokens of downstream servers are kept: a file private to the user, or the
shared session store of broker replicas.

Each server name maps to what its authorization left behind: the tokens with their absolute
expiry, the client registration, and the discovered protected resource and authorization
server metadata, so a restarted broker refreshes an expired token at the right endpoint
instead of asking a person again. Entries are bound to the server's URL: a server whose URL
changed starts over. :class:`TokenStore` keeps those entries in one of two places:

- :class:`TokenFile`, the ``[gateway] token_file``, written atomically with mode 0600 (the
  default with a memory or SQLite session store); unset, ``tokens.json`` in the user's state
  folder (:func:`default_token_file`), never beside the config, which may be in a git tree;
- the shared session store (``server.stores._tokens``; the default with PostgreSQL or Redis),
  one entry per server written in one statement, so every replica uses, refreshes and signs
  in with the same tokens.

Nothing here logs or prints a token; ``context-broker auth status`` shows only what a person
needs.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from context_broker.server.version import broker_program
from mcp.client.auth.oauth2 import OAuthContext
from mcp.shared.auth import (
    OAuthClientInformationFull,
    OAuthMetadata,
    OAuthToken,
    ProtectedResourceMetadata,
)
from pydantic import BaseModel, ValidationError

from contextcore.errors import ConfigError
from contextcore.store import StoreError

from .._files import replace_private
from ..errors import TokenFileError

if TYPE_CHECKING:
    from context_broker.server.settings import AppConfig

__all__ = [
    "ServerTokens",
    "TokenFile",
    "TokenRows",
    "TokenStore",
    "default_token_file",
    "open_tokens",
]

log = logging.getLogger(__name__)

_VERSION = 1
M = TypeVar("M", bound=BaseModel)
_SHARED_BACKENDS = ("postgres", "redis")  # where tokens go to the store unless told otherwise


class TokenRows(Protocol):
    """One JSON object per server name, somewhere; each write replaces one entry whole."""

    def read(self, server: str) -> dict[str, Any] | None:
        """The entry of ``server``, or None."""
        ...

    def write(self, server: str, row: dict[str, Any]) -> None:
        """Replace the entry of ``server`` by ``row``."""
        ...

    def delete(self, server: str) -> bool:
        """Drop the entry of ``server``; whether there was one."""
        ...

    def read_all(self) -> dict[str, dict[str, Any]]:
        """Every entry by server name."""
        ...


class TokenStore:
    """The token entries of every server, bound to each server's URL, over ``rows``."""

    def __init__(self, rows: TokenRows) -> None:
        self.rows = rows

    def entry(self, server: str, url: str) -> dict[str, Any]:
        """What is stored for ``server`` at ``url`` (empty when nothing, or another URL)."""
        with _failures():
            row = self.rows.read(server)
        if not isinstance(row, dict) or row.get("url") != url:
            return {}
        return row

    def update(self, server: str, url: str, **fields: Any) -> None:
        """Merge ``fields`` into the entry of ``server`` (a new entry when its URL changed).

        Between replicas the last write wins: the entry is read, merged and written whole."""
        with _failures():
            row = self.rows.read(server)
            if not isinstance(row, dict) or row.get("url") != url:
                row = {"url": url}
            row.update(fields)
            self.rows.write(server, row)

    def forget(self, server: str) -> bool:
        """Drop everything stored for ``server``; whether there was anything."""
        with _failures():
            return self.rows.delete(server)

    def servers(self) -> dict[str, dict[str, Any]]:
        """Every stored entry by server name."""
        with _failures():
            return self.rows.read_all()


@contextmanager
def _failures() -> Iterator[None]:
    """A store that cannot be used, as the gateway's error (the message names no secret)."""
    try:
        yield
    except StoreError as exc:
        raise TokenFileError(f"OAuth tokens cannot be kept: {exc}") from None


def default_token_file(environ: Mapping[str, str]) -> Path:
    """Where tokens live when ``token_file`` is unset: the user's state folder
    (``$XDG_STATE_HOME``, else ``~/.local/state``; ``%LOCALAPPDATA%`` on Windows)."""
    state = environ.get("XDG_STATE_HOME", "")
    if os.name == "nt" and environ.get("LOCALAPPDATA"):
        state = environ["LOCALAPPDATA"]
    base = Path(state) if Path(state).is_absolute() else Path.home() / ".local" / "state"
    return base / "context-broker" / "tokens.json"


def open_tokens(config: AppConfig, environ: Mapping[str, str] | None = None) -> TokenStore:
    """The token storage ``[gateway] token_store`` chooses: ``"file"`` (the 0600
    ``token_file``, by default in the user's state folder) or ``"store"`` (the shared
    ``[persistence]`` store); unset, the store when it is PostgreSQL or Redis, else the file."""
    backend = config.persistence.backend
    kind = config.gateway.token_store or ("store" if backend in _SHARED_BACKENDS else "file")
    if kind == "file":
        path = config.gateway.token_file
        where = config.resolve(path) if path else default_token_file(environ or os.environ)
        return TokenStore(TokenFile(where))
    if backend == "memory":
        raise ConfigError(
            'gateway.token_store = "store" needs a [persistence] backend that keeps data '
            '("sqlite", "postgres" or "redis"); the memory store keeps nothing, so use '
            '"file"',
            field="gateway.token_store",
        )
    from context_broker.server.stores._tokens import shared_token_rows

    return TokenStore(shared_token_rows(config))


class TokenFile:
    """Token entries in the file at ``path`` (mode 0600), or in memory when ``path`` is None."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self._memory: dict[str, Any] = {}

    def read(self, server: str) -> dict[str, Any] | None:
        """The entry of ``server``, or None."""
        row = self._read().get(server)
        return row if isinstance(row, dict) else None

    def write(self, server: str, row: dict[str, Any]) -> None:
        """Replace the entry of ``server`` (the whole file is rewritten atomically)."""
        data = self._read()
        data[server] = row
        self._write(data)

    def delete(self, server: str) -> bool:
        """Drop the entry of ``server``; whether there was one."""
        data = self._read()
        if server not in data:
            return False
        del data[server]
        self._write(data)
        return True

    def read_all(self) -> dict[str, dict[str, Any]]:
        """Every entry by server name."""
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
                f"sign in again with `{broker_program()} auth login NAME`"
            ) from None
        servers = data.get("servers") if isinstance(data, dict) else None
        return servers if isinstance(servers, dict) else {}

    def _write(self, servers: dict[str, Any]) -> None:
        if self.path is None:
            self._memory = servers
            return
        text = json.dumps({"version": _VERSION, "servers": servers}, indent=2, sort_keys=True)
        try:
            self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)  # a new folder: ours
            replace_private(self.path, text + "\n")  # 0600: never readable by others
        except OSError as exc:
            raise self._error("cannot write", exc) from exc

    def _error(self, what: str, exc: OSError) -> TokenFileError:
        return TokenFileError(
            f"{what} token file {str(self.path)!r}: {exc.strerror or exc}; choose a writable "
            "place with [gateway] token_file"
        )


class ServerTokens:
    """One server's entry of the token storage, as the SDK's ``TokenStorage``.

    Bound to the provider's :class:`OAuthContext` (:meth:`bind`), it also keeps what the SDK
    holds only in memory: the token's absolute expiry and the discovered metadata, restored
    when the tokens are loaded so a refresh after a restart goes to the right endpoint.
    ``fixed_client`` is a pre-registered client (from the config), never stored.
    """

    def __init__(
        self,
        store: TokenStore,
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
        self._seen: str | None = None  # the access token this provider last read or wrote

    def bind(self, context: OAuthContext) -> None:
        """Restore into and capture from ``context`` (the provider's)."""
        self._context = context

    async def get_tokens(self) -> OAuthToken | None:
        row = self.store.entry(self.server, self.url)
        tokens = _load(OAuthToken, row.get("tokens"))
        if tokens is not None:
            self._seen = tokens.access_token
            self._reveal(tokens)
            if self._context is not None:
                self._restore(self._context, row)
        return tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self._seen = tokens.access_token
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

    def stored_by_another(self) -> bool:
        """Whether the storage holds a token this provider neither read nor wrote (another
        broker sharing the store signed in or refreshed since)."""
        raw = self.store.entry(self.server, self.url).get("tokens")
        tokens = _load(OAuthToken, raw)
        return tokens is not None and tokens.access_token != self._seen

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        if self.fixed_client is not None:
            return self.fixed_client
        client = _load(
            OAuthClientInformationFull, self.store.entry(self.server, self.url).get("client")
        )
        if client is not None:
            self._reveal_client(client)
        return client

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self._reveal_client(client_info)  # a secret the registration issued, before any use
        if self.fixed_client is not None:
            return
        dumped = client_info.model_dump(mode="json", exclude_none=True)
        self.store.update(self.server, self.url, client=dumped)

    def _reveal(self, tokens: OAuthToken) -> None:
        """Hand the token values to the redactor, so no log line or error can show them."""
        if self.on_secret is not None:
            self.on_secret(t for t in (tokens.access_token, tokens.refresh_token) if t)

    def _reveal_client(self, client: OAuthClientInformationFull) -> None:
        """Hand a registered client's secret to the redactor, as a configured one is."""
        if self.on_secret is not None and client.client_secret:
            self.on_secret([client.client_secret])

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
