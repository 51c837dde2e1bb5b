"""What a host reaches of the downstream servers besides their tools, for the handlers of
:mod:`.mcp_server`: whether a resource, template or prompt is a downstream's and in the
host's profile, gateway calls whose failures become protocol errors, subscriptions to
downstream resources (``resources/subscribe`` and, for 2026-07-28 hosts, the resource URIs of
a ``subscriptions/listen`` stream) and completions of downstream prompts and templates."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any, TypeGuard, TypeVar

import anyio
from mcp import MCPError, types
from mcp.server import ServerRequestContext
from mcp.server.subscriptions import InMemorySubscriptionBus, ListenHandler, SubscriptionBus
from mcp.shared.subscriptions import ResourceUpdated, ServerEvent

from contextcore.profiles import Profile

from ..gateway.errors import GatewayError
from ..gateway.relay.host import Host, calling_for
from ..ui.app import APP_URI
from .gateway_tools import GatewayTools
from .prompts import CONTEXT_PROMPT
from .resources import resource_templates

__all__ = [
    "check_shown",
    "completion_handler",
    "downstream_call",
    "downstream_uri",
    "listen_handler",
    "outside",
    "prompt_shown",
    "resource_shown",
    "subscription_handlers",
    "template_shown",
    "with_servers",
]

T = TypeVar("T")
log = logging.getLogger(__name__)

MAX_LISTEN_RESOURCES = 256
"""Resource URIs one ``subscriptions/listen`` stream may name (each may cost a downstream
subscription, made before the stream is acknowledged)."""


def with_servers(gateway_tools: GatewayTools | None) -> TypeGuard[GatewayTools]:
    """Whether a gateway with at least one downstream server is behind ``gateway_tools``: without
    one, hosts see the broker alone (a reload may add the first server later)."""
    return gateway_tools is not None and gateway_tools.gateway.has_servers()


async def resource_shown(
    uri: str, profile: Profile | None, gateway_tools: GatewayTools | None
) -> bool:
    """Whether a downstream resource (by its exposed URI) is in ``profile``: its server's
    (see :meth:`Profile.allows_server`)."""
    if profile is None or profile.every_server or gateway_tools is None:
        return True
    server = await gateway_tools.gateway.resource_server(uri)
    return server is not None and profile.allows_server(server)


async def template_shown(
    exposed: str, profile: Profile | None, gateway_tools: GatewayTools
) -> bool:
    """Whether a downstream resource template (as exposed) is in ``profile``: its server's."""
    if profile is None or profile.every_server:
        return True
    server = await gateway_tools.gateway.resources.template_server(exposed)
    return server is not None and profile.allows_server(server)


async def prompt_shown(name: str, profile: Profile | None, gateway_tools: GatewayTools) -> bool:
    """Whether a downstream prompt (by its exposed name) is in ``profile``: its server's."""
    if profile is None or profile.every_server:
        return True
    server = await gateway_tools.gateway.prompt_server(name)
    return server is not None and profile.allows_server(server)


def outside(what: str, profile: Profile | None) -> str:
    assert profile is not None
    return f"{what} is not in profile {profile.name!r}; this connection shows only its servers"


def downstream_uri(gateway_tools: GatewayTools | None, uri: str) -> TypeGuard[GatewayTools]:
    """Whether a resource URI goes to the gateway: a downstream's resource keeps its own URI
    under prefix = "" (and a ui:// one always), so whatever is not the broker's own does."""
    own = uri.startswith("context://") or uri == APP_URI
    return with_servers(gateway_tools) and not own


async def check_shown(uri: str, profile: Profile | None, gateway_tools: GatewayTools) -> None:
    """Refuse a downstream resource outside ``profile``."""
    if not await resource_shown(uri, profile, gateway_tools):
        raise MCPError(types.INVALID_PARAMS, outside(f"resource {uri[:200]!r}", profile))


async def downstream_call(awaitable: Awaitable[T]) -> T:
    """Await a gateway call; a JSON-RPC error the server answered with reaches the host as
    it was sent, other failures become protocol errors naming the server."""
    from ..gateway import GatewayError

    try:
        return await awaitable
    except GatewayError as exc:
        if exc.error is not None:
            raise MCPError.from_error_data(exc.error) from None
        raise MCPError(types.INVALID_PARAMS, str(exc)) from None


def subscription_handlers(gateway_tools: GatewayTools, profile: Profile | None) -> dict[str, Any]:
    """``resources/subscribe`` and ``unsubscribe`` for downstream resources, remembered per
    host connection (the broker's own resources send no updates): at most
    ``[gateway] max_subscriptions_per_host`` per connection, all released when it closes."""

    async def on_subscribe(
        ctx: ServerRequestContext[Any], params: types.SubscribeRequestParams
    ) -> types.EmptyResult:
        uri = str(params.uri)
        if not downstream_uri(gateway_tools, uri):
            raise MCPError(
                types.INVALID_PARAMS,
                f"resource {uri[:200]!r} sends no updates: subscriptions are for downstream "
                "servers' resources",
            )
        await check_shown(uri, profile, gateway_tools)
        subscriptions = gateway_tools.gateway.resources.subscriptions
        limit = gateway_tools.gateway.settings.max_subscriptions_per_host
        rid = ctx.request_id  # what the server says while subscribing is this host's
        with calling_for(None if rid is None else Host(ctx.session, rid, params.meta)):
            await downstream_call(subscriptions.subscribe(uri, ctx.session, limit=limit))
        return types.EmptyResult()

    async def on_unsubscribe(
        ctx: ServerRequestContext[Any], params: types.UnsubscribeRequestParams
    ) -> types.EmptyResult:
        await gateway_tools.gateway.resources.subscriptions.unsubscribe(
            str(params.uri), ctx.session
        )
        return types.EmptyResult()

    return {"on_subscribe_resource": on_subscribe, "on_unsubscribe_resource": on_unsubscribe}


def completion_handler(gateway_tools: GatewayTools, profile: Profile | None) -> Any:
    """``completion/complete``: a downstream prompt's or resource template's arguments are
    completed by its server; the broker's own prompt and templates offer no completions."""
    own_templates = {t.uri_template for t in resource_templates()}

    async def on_completion(
        ctx: ServerRequestContext[Any], params: types.CompleteRequestParams
    ) -> types.CompleteResult:
        ref = params.ref
        if isinstance(ref, types.PromptReference):
            what, own = f"prompt {ref.name[:100]!r}", ref.name == CONTEXT_PROMPT.name
        else:
            what, own = f"resource template {ref.uri[:200]!r}", ref.uri in own_templates
        if own:
            return types.CompleteResult(completion=types.Completion(values=[]))
        if not with_servers(gateway_tools):
            raise MCPError(
                types.INVALID_PARAMS, f"no {what}: see prompts/list and resources/templates/list"
            )
        if isinstance(ref, types.PromptReference):
            shown = await prompt_shown(ref.name, profile, gateway_tools)
        else:
            shown = await template_shown(ref.uri, profile, gateway_tools)
        if not shown:
            raise MCPError(types.INVALID_PARAMS, outside(what, profile))
        return await downstream_call(gateway_tools.gateway.resources.complete(params))

    return on_completion


class _StreamBus:
    """The events of one ``subscriptions/listen`` stream: the broker's (list changes, on the
    shared bus) and the updates of the downstream resources this stream asked for, told to
    it alone (its ``send_resource_updated`` is how the subscriptions tell it)."""

    def __init__(self, shared: SubscriptionBus) -> None:
        self._shared = shared
        self._own = InMemorySubscriptionBus()

    async def publish(self, event: ServerEvent) -> None:
        await self._own.publish(event)

    def subscribe(self, listener: Callable[[ServerEvent], None]) -> Callable[[], None]:
        shared, own = self._shared.subscribe(listener), self._own.subscribe(listener)

        def unsubscribe() -> None:
            shared()
            own()

        return unsubscribe

    async def send_resource_updated(self, uri: str) -> None:
        await self._own.publish(ResourceUpdated(uri=uri))


def listen_handler(gateway_tools: GatewayTools, profile: Profile | None) -> Any:
    """``subscriptions/listen`` (2026-07-28): the broker's list changes, and for each
    downstream resource URI the stream names (one of its profile's servers' that offers
    subscriptions), the server's updates while the stream is open: the broker subscribes
    there for the stream and unsubscribes when it ends."""
    shared = gateway_tools.notifier.bus
    subscriptions = gateway_tools.gateway.resources.subscriptions

    async def on_listen(
        ctx: ServerRequestContext[Any], params: types.SubscriptionsListenRequestParams
    ) -> types.SubscriptionsListenResult:
        uris = list(params.notifications.resource_subscriptions or ())
        if len(uris) > MAX_LISTEN_RESOURCES:
            raise MCPError(
                types.INVALID_PARAMS,
                f"subscriptions/listen names {len(uris)} resources; at most "
                f"{MAX_LISTEN_RESOURCES} per stream (open several streams for more)",
            )
        bus = _StreamBus(shared)
        done: list[str] = []
        try:
            for uri in uris:
                if downstream_uri(gateway_tools, uri) and await resource_shown(
                    uri, profile, gateway_tools
                ):
                    try:
                        await subscriptions.subscribe(uri, bus)
                        done.append(uri)
                    except GatewayError as exc:  # honored, never fires, as an unknown URI
                        log.info("listen stream: no updates of %r: %s", uri[:200], exc)
            return await ListenHandler(bus)(ctx, params)
        finally:
            with anyio.CancelScope(shield=True):
                for uri in done:
                    await subscriptions.unsubscribe(uri, bus)

    return on_listen
