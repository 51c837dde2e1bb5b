"""OAuth to downstream HTTP servers, as the MCP authorization specification asks of clients.

The MCP SDK's client auth does the protocol: protected resource metadata discovery (from
``WWW-Authenticate`` and the well-known paths), authorization server metadata (OAuth and
OpenID discovery with the spec's fallbacks), pre-registration, Client ID Metadata Documents or
dynamic registration, PKCE, resource indicators, scope selection and one step-up on
``insufficient_scope``, the token endpoint auth methods, ``iss`` checks, refresh tokens and
``offline_access``, and the client credentials grant (client secret or a private key JWT).
This module builds the SDK provider a ``[servers.NAME.oauth]`` table asks for, with the
token storage of :mod:`.oauth_store` (re-read before every refresh and sign-in, so replicas
sharing it see each other's tokens) and, for the authorization code grant, the
browser and loopback redirect of :mod:`.oauth_loopback`. The provider is an ``httpx2.Auth``
the connection puts on its HTTP client.
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable, Iterable, Iterator
from contextlib import contextmanager, nullcontext
from typing import Any
from urllib.parse import urlsplit

import anyio
import httpx2
from context_broker.server.settings import DownstreamConfig, OAuthConfig
from context_broker.server.version import broker_program
from mcp.client.auth import OAuthClientProvider, OAuthFlowError
from mcp.client.auth.extensions.client_credentials import (
    ClientCredentialsOAuthProvider,
    PrivateKeyJWTOAuthProvider,
    SignedJWTParameters,
)
from mcp.client.auth.oauth2 import OAuthContext
from mcp.client.auth.utils import issuers_match, union_scopes
from mcp.shared.auth import OAuthClientInformationFull, OAuthClientMetadata

from .loopback import BrowserPolicy, HoldFn, LoopbackReceiver, free_port
from .store import ServerTokens, TokenStore

__all__ = ["LOGIN_TIMEOUT", "build_auth", "paused"]

LOGIN_TIMEOUT = 300.0
"""Seconds a person has to finish signing in at the browser."""

_CLIENT_NAME = "context-broker"
SecretFn = Callable[[Iterable[str]], None]
_CODE_GRANTS = ["authorization_code", "refresh_token"]


@contextmanager
def paused(scope: anyio.CancelScope) -> Iterator[None]:
    """Stop ``scope``'s deadline while the block runs (a person is signing in)."""
    remaining = scope.deadline - anyio.current_time()
    scope.deadline = math.inf
    try:
        yield
    finally:
        scope.deadline = anyio.current_time() + remaining if math.isfinite(remaining) else math.inf


def build_auth(
    name: str,
    config: DownstreamConfig,
    tokens: TokenStore,
    *,
    hold: HoldFn = nullcontext,
    login_timeout: float = LOGIN_TIMEOUT,
    on_secret: SecretFn | None = None,
    browser: BrowserPolicy | None = None,
    sign_in: bool = True,
) -> httpx2.Auth:
    """The ``httpx2.Auth`` for server ``name`` (its ``oauth`` table, secrets expanded).

    ``hold`` suspends the caller's deadline while a person signs in (at most
    ``login_timeout`` seconds); ``on_secret`` receives every token value, for the redactor;
    ``browser`` remembers, across reconnects, whether a browser may be opened. Without
    ``sign_in``, a sign-in that needs a person fails at once, naming ``auth login``.
    """
    oauth = config.oauth
    assert oauth is not None and config.url is not None
    if oauth.grant == "client_credentials":
        storage = ServerTokens(tokens, name, config.url, on_secret=on_secret)
        provider: OAuthClientProvider = _machine_provider(config.url, oauth, storage)
    else:
        receiver = LoopbackReceiver(
            name,
            _port(name, config.url, oauth, tokens),
            timeout=login_timeout,
            hold=hold,
            browser=browser,
        )
        fixed = _pre_registered(oauth, receiver.redirect_uri)
        storage = ServerTokens(tokens, name, config.url, fixed_client=fixed, on_secret=on_secret)
        provider = _person_provider(name, config.url, oauth, storage, receiver)
        if not sign_in:
            provider.context.redirect_handler = _needs_person(name)
    storage.bind(provider.context)
    return provider


def _scope(oauth: OAuthConfig) -> str | None:
    return " ".join(oauth.scopes) or None


def _machine_provider(url: str, oauth: OAuthConfig, storage: ServerTokens) -> OAuthClientProvider:
    """The client credentials grant, with a private key JWT or the client secret; both go
    only to ``issuer`` (the config requires it), which the SDK enforces."""
    assert oauth.client_id is not None and oauth.issuer is not None
    if oauth.private_key_pem is not None:
        signer = SignedJWTParameters(
            issuer=oauth.client_id,
            subject=oauth.client_id,
            signing_key=oauth.private_key_pem,
            signing_algorithm=oauth.signing_algorithm,
        )
        return _PrivateKeyJWT(
            url,
            storage,
            oauth.client_id,
            signer.create_assertion_provider(),
            scope=_scope(oauth),
            issuer=oauth.issuer,
        )
    assert oauth.client_secret is not None
    return _ClientSecret(
        url,
        storage,
        oauth.client_id,
        oauth.client_secret,
        scope=_scope(oauth),
        issuer=oauth.issuer,
    )


def _port(name: str, url: str, oauth: OAuthConfig, tokens: TokenStore) -> int:
    """The loopback redirect's port: configured, else the stored registration's (its redirect
    URI must stay the same), else a free one."""
    return oauth.redirect_port or _registered_port(tokens.entry(name, url)) or free_port()


def _pre_registered(oauth: OAuthConfig, redirect_uri: str) -> OAuthClientInformationFull | None:
    """The client the config names with ``client_id`` (never registered, never stored)."""
    if oauth.client_id is None:
        return None
    return OAuthClientInformationFull(
        client_id=oauth.client_id,
        client_secret=oauth.client_secret,
        redirect_uris=[redirect_uri],
        grant_types=_CODE_GRANTS,
        token_endpoint_auth_method="client_secret_basic" if oauth.client_secret else "none",
        issuer=oauth.issuer,
    )


def _person_provider(
    name: str, url: str, oauth: OAuthConfig, storage: ServerTokens, receiver: LoopbackReceiver
) -> OAuthClientProvider:
    """The authorization code grant: a browser, a loopback redirect, PKCE."""
    metadata = OAuthClientMetadata(
        client_name=_CLIENT_NAME,
        redirect_uris=[receiver.redirect_uri],
        grant_types=_CODE_GRANTS,
        scope=_scope(oauth),
    )
    provider = _AuthorizationCode(
        url,
        metadata,
        storage,
        redirect_handler=receiver.open,
        callback_handler=receiver.wait,
        client_metadata_url=oauth.client_metadata_url,
    )
    provider.wanted_scope = _scope(oauth)
    provider.server_name = name
    provider.issuer = oauth.issuer
    return provider


def _needs_person(name: str) -> Callable[[str], Awaitable[None]]:
    async def refuse(_url: str) -> None:
        raise OAuthFlowError(
            f"server {name!r} needs a sign-in: run `{broker_program()} auth login {name}`"
        )

    return refuse


def _registered_port(entry: dict[str, object]) -> int | None:
    """The loopback port of the stored registration: its redirect URI must stay the same."""
    client = entry.get("client")
    uris = client.get("redirect_uris") if isinstance(client, dict) else None
    if not isinstance(uris, list) or not uris or not isinstance(uris[0], str):
        return None
    parts = urlsplit(uris[0])
    return parts.port if parts.hostname == "127.0.0.1" else None


def _want(context: OAuthContext, scope: str | None) -> None:
    """Add the configured scopes to those the spec's selection chose for this request."""
    if scope:
        context.client_metadata.scope = union_scopes(context.client_metadata.scope, scope)


class _ReloadWhenStale:
    """A provider's ``_initialized``: false again as soon as the token it holds is no longer
    valid, so the SDK re-reads the storage before it refreshes or signs in. Replicas sharing
    a token store then use the token another one already refreshed or signed in for."""

    def __get__(self, provider: OAuthClientProvider | None, owner: type) -> Any:
        if provider is None:
            return self
        return provider.__dict__.get("_loaded", False) and provider.context.is_token_valid()

    def __set__(self, provider: OAuthClientProvider, value: bool) -> None:
        provider.__dict__["_loaded"] = value


async def _adopt_stored(context: OAuthContext, name: str) -> None:
    """Before a person is asked to sign in: when the storage holds a valid token this provider
    neither read nor wrote (another replica signed in meanwhile), take it and end this attempt,
    so the connection is retried with it instead of opening a second browser."""
    storage = context.storage
    if not isinstance(storage, ServerTokens) or not storage.stored_by_another():
        return
    context.current_tokens = await storage.get_tokens()
    if context.is_token_valid():
        raise OAuthFlowError(
            f"server {name!r} was signed in meanwhile by another broker sharing the token "
            "store; retrying with its token"
        )


# The SDK picks the scope from the server's challenge and metadata right before it asks for a
# token; these subclasses add the configured ``scopes`` to that choice, and re-read the
# storage whenever the token held is no longer valid.


class _AuthorizationCode(OAuthClientProvider):
    """With ``issuer`` configured (required with a client secret), only that authorization
    server is used: picked among those the server advertises, and no sign-in, registration or
    token request goes to another one."""

    wanted_scope: str | None = None
    server_name: str = ""
    issuer: str | None = None
    _initialized = _ReloadWhenStale()

    def _select_authorization_server(self, advertised: list[str]) -> str:
        if self.issuer is None:
            return super()._select_authorization_server(advertised)
        for server in advertised:
            if issuers_match(server, self.issuer):
                return server
        raise _elsewhere(self.server_name, self.issuer, advertised[0])

    async def _perform_authorization(self) -> httpx2.Request:
        metadata = self.context.oauth_metadata
        if self.issuer is not None and (
            metadata is None or not issuers_match(str(metadata.issuer), self.issuer)
        ):
            found = self.context.auth_server_url if metadata is None else str(metadata.issuer)
            raise _elsewhere(self.server_name, self.issuer, found)
        await _adopt_stored(self.context, self.server_name)
        _want(self.context, self.wanted_scope)
        return await super()._perform_authorization()


def _elsewhere(name: str, issuer: str, found: str | None) -> OAuthFlowError:
    return OAuthFlowError(
        f"server {name!r} sends the broker to the authorization server {found or '(unknown)'!r}, "
        f"not to its configured issuer {issuer!r}; nothing was sent there. Correct 'issuer' "
        f"in [servers.{name}.oauth] if the server really moved"
    )


class _ClientSecret(ClientCredentialsOAuthProvider):
    _initialized = _ReloadWhenStale()

    async def _perform_authorization(self) -> httpx2.Request:
        _want(self.context, self._fixed_client_info.scope)
        return await super()._perform_authorization()


class _PrivateKeyJWT(PrivateKeyJWTOAuthProvider):
    _initialized = _ReloadWhenStale()

    async def _perform_authorization(self) -> httpx2.Request:
        _want(self.context, self._fixed_client_info.scope)
        return await super()._perform_authorization()
