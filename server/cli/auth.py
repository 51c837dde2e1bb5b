"""``context-broker auth login|status|logout NAME``: OAuth sign-in to downstream servers.

``login`` forgets the server's stored tokens (its client registration stays), connects to it
as the broker does, which signs in (a browser and the loopback redirect for the
authorization code grant, a token request for client credentials), and lists its tools.
``status`` shows each OAuth server's sign-in without ever showing a token; ``logout`` forgets
everything stored for a server. Tokens live where the broker keeps them (``[gateway]
token_store``): the ``token_file`` (mode 0600), or the shared ``[persistence]`` store, where a
sign-in from any terminal serves every replica.
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import os
import shlex
import time
from collections.abc import Iterator
from contextlib import AsyncExitStack, contextmanager
from typing import Any

import anyio
from context_broker.server.settings import AppConfig, DownstreamConfig, load_config

from ..gateway.errors import GatewayError, UnknownServerError
from ..gateway.links.connection import open_connection
from ..gateway.oauth.client import LOGIN_TIMEOUT, build_auth, paused
from ..gateway.oauth.store import TokenStore, open_tokens
from ..gateway.servers_file import resolve_servers
from ..gateway.trust.secrets import Redactor, expand_server
from ..host.gateway_tools import RESERVED_NAMES
from .install import broker_command

__all__ = ["add_parser", "cmd_auth"]


def add_parser(sub: Any, common: argparse.ArgumentParser, add_config: Any) -> None:
    """The ``auth`` subcommand and its actions."""
    auth = sub.add_parser(
        "auth", help="sign in to downstream servers that use OAuth", parents=[common]
    )
    actions = auth.add_subparsers(dest="auth_command", required=True)
    login = actions.add_parser("login", help="sign in to a server (opens a browser)")
    logout = actions.add_parser("logout", help="forget a server's stored tokens")
    status = actions.add_parser("status", help="show each OAuth server's sign-in")
    for action in (login, logout):
        action.add_argument("name", metavar="NAME", help="the server ([servers.NAME])")
    status.add_argument("name", metavar="NAME", nargs="?", default=None)
    status.add_argument("--json", action="store_true", help="print one JSON object")
    for action in (login, logout, status):
        add_config(action)


def cmd_auth(args: argparse.Namespace) -> int:
    """Run ``auth login``, ``auth status`` or ``auth logout``."""
    config = load_config(args.config)
    servers = {
        n: c
        for n, c in resolve_servers(config, reserved=RESERVED_NAMES).items()
        if c.oauth is not None
    }
    tokens = open_tokens(config)
    if args.auth_command == "status":
        rows = [_status_row(n, c, tokens) for n, c in sorted(servers.items())]
        rows = [row for row in rows if args.name in (None, row["name"])]
        where = f"--config {shlex.quote(str(args.config))}"
        print(json.dumps({"servers": rows}) if args.json else _format_status(rows, where))
        return 0
    name = args.name
    if name not in servers:
        raise UnknownServerError(
            f"no server {name!r} with an [servers.{name}.oauth] table; OAuth servers: "
            f"{', '.join(sorted(servers)) or '(none)'}",
            server=name,
        )
    if args.auth_command == "logout":
        forgot = tokens.forget(name)
        print(f"{name}: {'signed out' if forgot else 'was not signed in'}")
        return 0
    tools = anyio.run(_login, name, config, servers[name], tokens)
    print(f"{name}: signed in; {tools} tool(s) listed")
    return 0


async def _login(name: str, config: AppConfig, server: DownstreamConfig, tokens: TokenStore) -> int:
    """Sign in to ``server`` afresh and list its tools; the number of tools."""
    expanded, secrets = expand_server(name, server, os.environ)
    redactor = Redactor(secrets)
    with _masked_logs(redactor):
        return await _sign_in(name, expanded, tokens, redactor)


@contextmanager
def _masked_logs(redactor: Redactor) -> Iterator[None]:
    """Every log line (the SDK's own included) with the secrets masked, as ``serve`` does;
    the redactor learns tokens and a registered client's secret while signing in."""
    masking = redactor.filter()
    handlers = list(logging.getLogger().handlers)
    for handler in handlers:
        handler.addFilter(masking)
    try:
        yield
    finally:
        for handler in handlers:
            handler.removeFilter(masking)


async def _sign_in(
    name: str, expanded: DownstreamConfig, tokens: TokenStore, redactor: Redactor
) -> int:
    """Sign in to ``expanded`` (references expanded) afresh and list its tools; how many."""
    url = expanded.url or ""
    if tokens.entry(name, url):  # a fresh sign-in: the registration stays, the tokens go
        tokens.update(name, url, tokens=None, expires_at=None)

    async def ignore(_: Any) -> None:
        return None

    with anyio.CancelScope(deadline=anyio.current_time() + expanded.timeout) as scope:
        auth = build_auth(
            name,
            expanded,
            tokens,
            hold=lambda: paused(scope),
            login_timeout=LOGIN_TIMEOUT,
            on_secret=redactor.add,
        )
        try:
            async with AsyncExitStack() as stack:
                conn = await open_connection(
                    stack,
                    name,
                    expanded,
                    stderr=None,
                    on_notification=ignore,
                    on_transport_error=ignore,
                    auth=auth,
                )
                return len(await conn.list_tools())
        except Exception as exc:
            raise GatewayError(redactor.redact(f"{name}: sign-in failed: {_why(exc)}")) from None
    raise GatewayError(f"{name}: no answer within {expanded.timeout:g}s", server=name)


def _why(exc: BaseException) -> str:
    """The innermost exception's type and message (exception groups unwrapped)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


def _status_row(name: str, server: DownstreamConfig, tokens: TokenStore) -> dict[str, Any]:
    """What a person needs to know about a server's sign-in (no token value)."""
    assert server.oauth is not None
    entry = tokens.entry(name, server.url or "")
    stored = entry.get("tokens") if isinstance(entry.get("tokens"), dict) else None
    expires_at = entry.get("expires_at")
    expires_in = None
    if stored is not None and isinstance(expires_at, int | float):
        expires_in = math.floor(expires_at - time.time())
    return {
        "name": name,
        "grant": server.oauth.grant,
        "signed_in": stored is not None,
        "expires_in": expires_in,
        "refreshable": bool(stored and stored.get("refresh_token")),
        "scope": stored.get("scope") if stored else None,
        "registered": "client" in entry or server.oauth.client_id is not None,
    }


def _format_status(rows: list[dict[str, Any]], where: str) -> str:
    """One line per OAuth server; the sign-in command, with ``where`` (the config option), as
    a shell runs it without the venv on ``PATH``."""
    program = shlex.join(broker_command())
    if not rows:
        return "no downstream server uses OAuth ([servers.NAME.oauth])"
    lines = []
    for row in rows:
        if not row["signed_in"]:
            state = f"not signed in ({program} auth login {shlex.quote(row['name'])} {where})"
        elif row["expires_in"] is None:
            state = "signed in"
        elif row["expires_in"] > 0:
            state = f"signed in, token valid for {row['expires_in']}s"
        else:
            state = "signed in, token expired" + (
                " (refreshed on next use)" if row["refreshable"] else ""
            )
        scope = f"; scope {row['scope']}" if row["scope"] else ""
        lines.append(f"{row['name']}: {row['grant']}: {state}{scope}")
    return "\n".join(lines)
