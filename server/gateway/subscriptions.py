"""Which host connections subscribed to which downstream resources (``resources/subscribe``).

A host subscribes to a resource by its exposed URI; the broker subscribes once on the
resource's server, by the server's own URI, for however many hosts want it, and unsubscribes
there when the last one leaves. A downstream's ``notifications/resources/updated`` goes to
each host that subscribed to that resource, naming it by the URI the host used.
"""

from __future__ import annotations

import logging
from typing import Protocol

import anyio

from ..transport.sdk_compat import connection_key

__all__ = ["HostSession", "Subscriptions"]

log = logging.getLogger(__name__)

Target = tuple[str, str]  # (server, original uri)
_SEND_TIMEOUT = 5.0


class HostSession(Protocol):
    """What a subscribed host connection is told with."""

    async def send_resource_updated(self, uri: str) -> None: ...


class Subscriptions:
    """Host connections by exposed resource URI, and the downstream resource each names."""

    def __init__(self) -> None:
        self._hosts: dict[str, dict[int, HostSession]] = {}
        self._targets: dict[str, Target] = {}

    def add(self, uri: str, target: Target, host: HostSession) -> bool:
        """Remember that ``host`` wants updates of ``uri``; True if no host wanted them
        before (the broker then subscribes on the resource's server)."""
        hosts = self._hosts.setdefault(uri, {})
        first = not hosts
        hosts[connection_key(host)] = host
        self._targets[uri] = target
        return first

    def remove(self, uri: str, host: HostSession) -> Target | None:
        """Forget ``host``'s subscription to ``uri``; the downstream resource when no host
        wants its updates any more (the broker then unsubscribes there), else None."""
        hosts = self._hosts.get(uri)
        if hosts is None or hosts.pop(connection_key(host), None) is None:
            return None
        if hosts:
            return None
        del self._hosts[uri]
        return self._targets.pop(uri)

    def targets(self, server: str) -> list[Target]:
        """The resources of ``server`` some host is subscribed to, by their own URIs."""
        return sorted({t for t in self._targets.values() if t[0] == server})

    async def updated(self, server: str, original: str) -> int:
        """Tell every host subscribed to ``server``'s resource ``original`` that it changed,
        by the URI each subscribed with; a host that cannot be told is forgotten. Returns
        how many hosts were told."""
        told = 0
        for uri, target in list(self._targets.items()):
            if target != (server, original):
                continue
            for key, host in list(self._hosts.get(uri, {}).items()):
                try:
                    with anyio.fail_after(_SEND_TIMEOUT):
                        await host.send_resource_updated(uri)
                    told += 1
                except Exception as exc:  # a host that went away must not stop the others
                    log.debug("could not send resources/updated for %s: %s", uri, exc)
                    self._forget(uri, key)
        return told

    def _forget(self, uri: str, key: int) -> None:
        hosts = self._hosts.get(uri, {})
        hosts.pop(key, None)
        if not hosts:
            self._hosts.pop(uri, None)
            self._targets.pop(uri, None)
