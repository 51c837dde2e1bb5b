"""Config hot reload: SIGHUP, or an edit when ``[server] watch_config = true``.

A reload reads the config and every rule, reference and catalog file again (and the
``mcp_servers_file``), then applies the result in one step: catalog items added, changed or
removed (the search index re-embeds only chunks whose text changed; its cache is keyed by text
hash), the search ranking defaults, and the downstream servers (:meth:`Gateway.reconfigure`:
new ones started, removed ones stopped with their tools, changed ones connected again, tool
settings applied in place). A config that does not load keeps the running one and logs why at
ERROR. Settings that only take effect at startup (transport, ``[server]``, ``[persistence]``,
the embedding model, history, gateway policy, models, profiles) are logged as needing a restart; a
broker that started with no downstream server gets its first one from a reload like any
other. Sessions are untouched in the store: they and their turns refer to items by name.
"""

from __future__ import annotations

import logging
import signal
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import anyio.to_thread
from context_broker.server.parts import AppParts
from context_broker.server.settings import AppConfig, DownstreamConfig, load_config
from watchfiles import Change, awatch

from contextcore.catalog import Catalog
from contextcore.errors import ContextCoreError
from contextcore.factory import load_items, search_settings
from contextcore.items import ContextItem, ItemRef

from .gateway import Gateway, GatewayError, resolve_servers
from .gateway.server_state import ServerChanges

__all__ = ["ConfigReloader", "ReloadReport", "serve_with_reload"]

log = logging.getLogger(__name__)

# Sections read once at startup; a change there is reported, not applied.
_STARTUP_SECTIONS = (
    "agent",
    "persistence",
    "server",
    "history",
    "gateway",
    "models",
    "profiles",
    "code",
)
_LIVE_SEARCH_KEYS = frozenset(
    {
        "top_k",
        "top_n",
        "include_score",
        "mode",
        "lexical_weight",
        "max_query_chars",
        "preset",
        "min_score",
        "min_score_tools",
        "part_share",
        "feedback",
        "query_adapter",
    }
)
_TEXT_SUFFIXES = (".md", ".mdc")


@dataclass(frozen=True)
class ReloadReport:
    """What one reload changed (item keys, downstream server names) and which settings
    still need a restart."""

    added: tuple[str, ...]
    changed: tuple[str, ...]
    removed: tuple[str, ...]
    restart_needed: tuple[str, ...]
    servers: ServerChanges = field(default_factory=ServerChanges)


@dataclass(frozen=True)
class _Plan:
    config: AppConfig
    items: dict[ItemRef, ContextItem]
    servers: Mapping[str, DownstreamConfig]


class ConfigReloader:
    """Re-reads ``config_path`` and applies it to the running broker's parts.

    Build it before the gateway connects: the catalog then holds only the items the config
    loads, which is how a reload tells them from downstream tools.
    """

    def __init__(self, config_path: Path, parts: AppParts, gateway: Gateway | None) -> None:
        self.path = config_path
        self.parts = parts
        self.gateway = gateway
        self.config = parts.config
        self._started = parts.config
        self._loaded = {item.ref for item in parts.catalog}
        self._lock = anyio.Lock()

    def prepare(self) -> _Plan:
        """Read and validate everything a reload needs, changing nothing; raises
        ``ContextCoreError`` or ``GatewayError`` for a config that does not load."""
        config = load_config(self.path)
        items = load_items(config)
        Catalog(items)  # rejects duplicate names as at startup
        gateway = self.gateway
        reserved = gateway.settings.reserved if gateway is not None else frozenset()
        servers = resolve_servers(config, reserved=reserved) if gateway is not None else {}
        return _Plan(config, {item.ref: item for item in items}, servers)

    def apply(self, plan: _Plan) -> ReloadReport:
        """Swap the catalog items, search settings and downstream tool settings to ``plan``;
        call it on the event loop's thread when there is a gateway."""
        catalog = self.parts.catalog
        upserts = [item for ref, item in plan.items.items() if catalog.get(ref) != item]
        removals = sorted(ref for ref in self._loaded if ref not in plan.items)
        known = {i.ref for i in upserts if catalog.get(i.ref) is not None}
        catalog.apply(upserts, removals)
        self.parts.search.settings = search_settings(plan.config)
        later = self._restart_needed(plan.config)
        servers = ServerChanges()
        if self.gateway is not None:  # None: a reloader of the catalog alone (no serving)
            servers = self.gateway.reconfigure(plan.servers)
        self._loaded = set(plan.items)
        self.config = plan.config
        return ReloadReport(
            added=tuple(i.ref.key for i in upserts if i.ref not in known),
            changed=tuple(i.ref.key for i in upserts if i.ref in known),
            removed=tuple(ref.key for ref in removals),
            restart_needed=tuple(later),
            servers=servers,
        )

    def reload(self) -> ReloadReport | None:
        """Read and apply the config now (no gateway work off the loop thread: use
        :meth:`reload_async` when serving); None when the new config does not load."""
        plan = self._prepare_logged()
        return self._apply_logged(plan) if plan is not None else None

    async def reload_async(self) -> ReloadReport | None:
        """:meth:`reload` with the files read in a worker thread; one reload at a time."""
        async with self._lock:
            plan = await anyio.to_thread.run_sync(self._prepare_logged)
            return self._apply_logged(plan) if plan is not None else None

    async def watch_signals(
        self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        """Reload on every SIGHUP until cancelled."""
        with anyio.open_signal_receiver(signal.SIGHUP) as signals:
            task_status.started()
            async for _ in signals:
                log.info("SIGHUP: reloading the config from %s", self.path)
                await self._reload_guarded()

    async def watch_files(self) -> None:
        """Reload whenever the config file or a file it loads changes, until cancelled."""
        while True:
            files, folders = self._watched()
            roots = sorted({p.parent for p in files} | folders)
            roots = [p for p in roots if p.is_dir()]
            log.info("watching %d folders for config changes", len(roots))

            relevant = _watch_filter(files, folders)
            async for _ in awatch(*roots, watch_filter=relevant, recursive=False, debounce=300):
                log.info("config files changed: reloading the config from %s", self.path)
                await self._reload_guarded()
                if self._watched() != (files, folders):
                    break  # the config names other files now: watch those

    # -- internals -------------------------------------------------------------------------

    def _prepare_logged(self) -> _Plan | None:
        try:
            return self.prepare()
        except (ContextCoreError, GatewayError) as exc:
            log.error("config reload failed, the running config stays in force: %s", exc)
            return None

    def _apply_logged(self, plan: _Plan) -> ReloadReport:
        report = self.apply(plan)
        log.info(
            "config reloaded: %d items added, %d changed, %d removed",
            len(report.added),
            len(report.changed),
            len(report.removed),
        )
        servers = report.servers
        for verb, names in (
            ("started", servers.added),
            ("stopped", servers.removed),
            ("restarted with its new definition", servers.restarted),
        ):
            for name in names:
                log.info("config reload: downstream server %r %s", name, verb)
        for setting in report.restart_needed:
            log.warning("config reload: %s changed; it takes effect only after a restart", setting)
        return report

    async def _reload_guarded(self) -> None:
        try:
            await self.reload_async()
        except Exception:  # a reload must never stop the server
            log.exception("config reload failed, the running config stays in force")

    def _restart_needed(self, new: AppConfig) -> list[str]:
        old = self._started
        later = [s for s in _STARTUP_SECTIONS if getattr(old, s) != getattr(new, s)]
        later += [
            f"search.{key}"
            for key in type(new.search).model_fields
            if key not in _LIVE_SEARCH_KEYS and getattr(old.search, key) != getattr(new.search, key)
        ]
        return later

    def _watched(self) -> tuple[set[Path], set[Path]]:
        """(files, folders) a reload reads: the config itself and what it names."""
        config = self.config
        src = config.sources
        files = {self.path.resolve()}
        files |= {config.resolve(p) for p in (*src.rule_files, *src.reference_files)}
        files |= {config.resolve(p) for p in src.catalog_files}
        if config.mcp_servers_file is not None:
            files.add(config.resolve(config.mcp_servers_file))
        folders: set[Path] = set()
        for root in (*src.rule_dirs, *src.reference_dirs):
            top = config.resolve(root)
            folders.add(top)
            if top.is_dir():
                folders |= {p for p in top.rglob("*") if p.is_dir()}
        return files, folders


def _watch_filter(files: set[Path], folders: set[Path]) -> Callable[[Change, str], bool]:
    """Changes to the watched files, and to Markdown rules anywhere in the watched folders."""

    def relevant(change: Change, raw: str) -> bool:
        path = Path(raw)
        if path in files:
            return True
        return path.suffix in _TEXT_SUFFIXES and any(p in folders for p in path.parents)

    return relevant


async def serve_with_reload(
    reloader: ConfigReloader, main: Callable[..., Awaitable[Any]], *args: Any
) -> None:
    """Run ``main(*args)`` with SIGHUP (and, if configured, file changes) reloading the
    config; the handler is in place before ``main`` starts."""
    async with anyio.create_task_group() as tg:
        if hasattr(signal, "SIGHUP"):
            await tg.start(reloader.watch_signals)
        if reloader.config.server.watch_config:
            tg.start_soon(reloader.watch_files)
        await main(*args)
        tg.cancel_scope.cancel()
