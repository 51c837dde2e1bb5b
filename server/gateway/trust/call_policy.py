"""Which downstream calls the broker forwards: per-tool ``enabled`` and a server's
``call_policy``.

``call_policy = "any"`` (the default) forwards every enabled tool. ``"selected"`` forwards a
tool only when it is in the calling session's context: its session items or the items of its
latest request context, so a model can call only what the broker chose for the turn.
"""

from __future__ import annotations

from context_broker.server.settings import DownstreamConfig

from contextcore.errors import ContextCoreError
from contextcore.items import ItemRef
from contextcore.services.broker import ContextBroker

__all__ = ["call_refusal"]


def _original(config: DownstreamConfig, server: str, tool: str) -> str:
    """The downstream name of ``tool``, which a caller may give as ``<server>__<tool>``."""
    prefix = f"{server}__"
    if tool not in config.tools and tool.startswith(prefix):
        return tool[len(prefix) :]
    return tool


def _selected(broker: ContextBroker, session_id: str, ref: ItemRef) -> bool:
    session = broker.session(session_id)
    if session.has(ref):
        return True
    last = broker.last_turn(session_id)
    return last is not None and any(i.ref == ref for i in last.items)


def call_refusal(
    broker: ContextBroker,
    session_id: str | None,
    server: str,
    tool: str,
    config: DownstreamConfig | None,
) -> str | None:
    """Why a call of ``tool`` on ``server`` must not be forwarded, or None to forward it.

    ``config`` is the server's settings in force (None for a server the gateway does not
    know, which the gateway itself then reports).
    """
    if config is None:
        return None
    name = _original(config, server, tool)
    tool_cfg = config.tools.get(name)
    if tool_cfg is not None and not tool_cfg.enabled:
        return (
            f"tool {name!r} of server {server!r} is disabled in the config "
            f"(servers.{server}.tools.{name}.enabled = false); enable it there and reload "
            "the config to call it"
        )
    if config.call_policy == "any":
        return None
    if session_id is None:
        return (
            f'server {server!r} has call_policy = "selected": pass the session_id of the '
            f"conversation, so the broker can check that {name!r} was selected for it"
        )
    try:
        allowed = _selected(broker, session_id, ItemRef("tool", name, server))
    except ContextCoreError as exc:
        return f"{exc.field}: {exc.message}" if exc.field else str(exc)
    if allowed:
        return None
    return (
        f"tool {name!r} of server {server!r} is not in the context of session "
        f'{session_id!r} (servers.{server}.call_policy = "selected"); build a request '
        "context that selects it, or add it with add_context_item, then call it"
    )
