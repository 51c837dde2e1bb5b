"""Builds the broker's MCP server (low-level ``Server``: exact schemas and error control)
from an already built broker; the broker reaches the handlers through closures."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from typing import Any

from context_broker.tools.all_tools import BROKER_TOOLS, CONTEXT_TOOLS, ToolSpec
from context_broker.tools.catalog import GET_CONTEXT_ITEMS
from context_broker.tools.code import RUN_CODE
from context_broker.tools.requests import BUILD_REQUEST_CONTEXT
from mcp import MCPError, types
from mcp.server import NotificationOptions, Server, ServerRequestContext
from mcp.server.apps import EXTENSION_ID
from mcp.server.models import InitializationOptions
from mcp.server.session import ServerSession

from contextcore.assembly_model import AssemblyModelSpec
from contextcore.config import HistoryConfig, ListedTools
from contextcore.context_text import NoTools, ToolDirectory
from contextcore.errors import ConfigError
from contextcore.profiles import Profile
from contextcore.services.broker import ContextBroker
from contextcore.services.history import HistoryService
from contextcore.sessions import RequestContext

from ..gateway.relay.host import Host, calling_for, set_log_level
from ..observability import Observer
from ..summarizers import SummarizerFactory
from ..ui.app import tool_meta
from ..ui.view import APP_TOOL
from .code_mode import CodeDirectory, CodeRunner
from .downstream import (
    check_shown,
    completion_handler,
    downstream_call,
    downstream_uri,
    listen_handler,
    outside,
    prompt_shown,
    resource_shown,
    subscription_handlers,
    template_shown,
    with_servers,
)
from .gateway_tools import CALL_TOOL, LIST_SERVERS, GatewayTools
from .prompts import CONTEXT_PROMPT, ContextPrompt
from .resources import ResourceReader, resource_templates
from .tool_calls import ContextListener, ToolRunner

__all__ = ["SERVER_NAME", "build_server", "list_tools"]

log = logging.getLogger(__name__)

SERVER_NAME = "context-broker"
TOOLS = (*BROKER_TOOLS, APP_TOOL)
INSTRUCTIONS = (
    "Before answering each user message, call build_request_context(message), with `intents` "
    "(your plan as short steps) for a task of several actions. Its text holds the rules to "
    "follow, the references to use and the tools to call: the best with their input "
    "schemas, more named one line each (get_context_items gives any tool's schema). Call a "
    "tool by the name shown or through call_tool. Later in the same conversation, pass the "
    "session_id the first result named: what earlier texts gave is then named, not repeated. "
    "Leave it out in a new conversation, or once the earlier results were dropped from it."
)
MODEL_TOOLS = (
    BUILD_REQUEST_CONTEXT.name,
    GET_CONTEXT_ITEMS.name,
    CALL_TOOL,
    RUN_CODE,
    APP_TOOL.name,
)
"""What ``tools = "model"`` lists: what a model needs to work (and the request-context view's
app-only tool, which hosts with MCP Apps keep from the model); ``run_code`` while code mode
is on."""
_FIXED = (CALL_TOOL, LIST_SERVERS, RUN_CODE)


def list_tools(
    specs: tuple[ToolSpec, ...] = CONTEXT_TOOLS,  # type: ignore[type-arg]
    *,
    brief: bool = False,
) -> list[types.Tool]:
    """The MCP tool definitions of ``specs``; ``brief``: as a model needs them (the
    arguments a model uses, no output schemas)."""
    return [
        types.Tool(
            name=s.name,
            description=s.description,
            input_schema=s.input_schema(brief),
            output_schema=None if brief else s.output_schema(),
            annotations=types.ToolAnnotations(read_only_hint=s.read_only, open_world_hint=False),
            meta=tool_meta(s.name),  # MCP Apps: the request-context view
        )
        for s in specs
    ]


def listed_names(listed: ListedTools) -> frozenset[str] | None:
    """The broker's own tools (and gateway tools) ``listed`` lists; None: all of them.
    ``ConfigError`` for a name the broker has no tool of."""
    if listed == "all":
        return None
    if listed == "model":
        return frozenset(MODEL_TOOLS)
    known = [*(s.name for s in TOOLS), *_FIXED]
    unknown = [n for n in listed if n not in known]
    if unknown:
        raise ConfigError(
            f'server.tools: unknown tool(s) {", ".join(map(repr, unknown))}; use "model", '
            f'"all" or names from: {", ".join(known)}',
            field="server.tools",
        )
    return frozenset(listed)


def build_server(
    broker: ContextBroker,
    *,
    version: str = "",
    gateway_tools: GatewayTools | None = None,
    history: HistoryService | None = None,
    summarizers: SummarizerFactory | None = None,
    models: Mapping[str, AssemblyModelSpec] | None = None,
    observer: Observer | None = None,
    profile: Profile | None = None,
    tools: ListedTools = "all",
    code: CodeRunner | None = None,
) -> Server[Any]:
    """An MCP server exposing ``broker``'s tools and resources on any transport, its history
    tools, and, with ``gateway_tools``, the gateway's tools, resources and prompts (it
    records proxied calls in its own history service: pass the same one as ``history``).
    With ``profile``, its hosts see only what the profile allows (one server per profile).
    ``tools`` is what ``tools/list`` shows of the broker's own tools (see
    :func:`listed_names`); every one of them answers a call by its name. With ``code``
    (and downstream servers), ``run_code`` runs programs over the downstream tools."""
    name = profile.name if profile is not None else None
    history = history or HistoryService(broker, HistoryConfig())
    directory: ToolDirectory = NoTools()
    if gateway_tools is not None:  # with code mode, tool entries give Python signatures
        directory = CodeDirectory(gateway_tools.directory, code is not None)
    observer = observer or Observer()
    on_context = _context_listener(observer, gateway_tools)
    runner = ToolRunner(
        broker,
        TOOLS,
        history=history,
        summarizers=summarizers,
        models=models,
        directory=directory,
        observer=observer,
        on_context=on_context,
        profile=name,
        directory_for=_directory_for(gateway_tools, code),
        code_mode=code is not None and gateway_tools is not None,
    )
    prompt = ContextPrompt(broker, directory, on_context, name)
    server: Server[Any] = Server(
        SERVER_NAME,
        version=version,
        instructions=INSTRUCTIONS,
        get_tool_input_schema=lambda name: (
            runner.specs[name].input_schema() if name in runner.specs else None
        ),
        **_tool_handlers(runner, gateway_tools, profile, tools, code),
        **_resource_handlers(ResourceReader(broker, name), gateway_tools, profile),
        **_prompt_handlers(prompt, gateway_tools, profile),
    )
    _add_logging(server)
    server.extensions[EXTENSION_ID] = {}  # MCP Apps: tools point at ui:// views
    if gateway_tools is not None:
        server.create_initialization_options = _announcing(server, gateway_tools)  # type: ignore[method-assign]
    return server


def _announcing(
    server: Server[Any], gateway_tools: GatewayTools
) -> Callable[..., InitializationOptions]:
    """``server.create_initialization_options`` declaring to handshake-era hosts what the
    gateway passes on (the SDK's transports ask for the options without passing any): tool
    list changes; with downstream servers, resource and prompt list changes and
    completions; subscriptions to resources while a downstream offers them."""
    plain = server.create_initialization_options

    def options(
        notification_options: NotificationOptions | None = None,
        experimental_capabilities: dict[str, dict[str, Any]] | None = None,
        extensions: dict[str, dict[str, Any]] | None = None,
    ) -> InitializationOptions:
        servers = gateway_tools.gateway.has_servers()
        notify = NotificationOptions(
            tools_changed=True, resources_changed=servers, prompts_changed=servers
        )
        opts = plain(notify, experimental_capabilities, extensions)
        caps = opts.capabilities
        subscribe = servers and gateway_tools.gateway.resources.subscriptions.subscribable()
        changes: dict[str, Any] = {"completions": caps.completions if servers else None}
        if caps.resources is not None:
            changes["resources"] = caps.resources.model_copy(update={"subscribe": subscribe})
        return opts.model_copy(update={"capabilities": caps.model_copy(update=changes)})

    return options


def _tool_handlers(
    runner: ToolRunner,
    gateway_tools: GatewayTools | None,
    profile: Profile | None,
    listed_setting: ListedTools,
    code: CodeRunner | None = None,
) -> dict[str, Any]:
    """``tools/list`` and ``tools/call``: the broker's tools, then the gateway's (and
    ``run_code``); of the broker's and gateway's own tools, those ``listed_setting`` lists."""
    shown = listed_names(listed_setting)
    own = TOOLS if shown is None else tuple(s for s in TOOLS if s.name in shown)
    tool_list = list_tools(own, brief=listed_setting == "model")

    def listed(tool: types.Tool) -> bool:
        return shown is None or tool.name not in _FIXED or tool.name in shown

    async def on_list_tools(
        ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        if gateway_tools is None:
            return types.ListToolsResult(tools=tool_list)
        gateway_tools.notifier.remember(ctx.session)
        downstream = _with_code(await gateway_tools.tools(ctx.session, profile), code)
        return types.ListToolsResult(tools=[*tool_list, *(t for t in downstream if listed(t))])

    async def on_call_tool(
        ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult | types.InputRequiredResult:
        spec = runner.specs.get(params.name)
        if params.name == RUN_CODE and code is not None and with_servers(gateway_tools):
            return await code.call(
                params.arguments or {}, profile, lambda: runner.host_session(ctx)
            )
        if spec is not None:
            if gateway_tools is not None:  # early calls wait for the first gathering (bounded)
                await gateway_tools.startup()
            return await runner.call(spec, params.arguments or {}, ctx)
        if gateway_tools is not None and not gateway_tools.handles(params.name):
            # A host may call a directly listed tool by a name it remembers, before any
            # tools/list: the first gathering may still bring it (bounded by the budget).
            await gateway_tools.startup()
        if gateway_tools is not None and gateway_tools.handles(params.name):
            return await gateway_tools.call(
                params.name,
                params.arguments or {},
                ctx.session,
                params.meta,
                profile,
                request_id=ctx.request_id,
                retry=retry_fields(params),
            )
        if with_servers(gateway_tools):
            raise MCPError(types.INVALID_PARAMS, gateway_tools.gateway.unknown_tool(params.name))
        names = ", ".join(runner.specs)
        raise MCPError(
            types.INVALID_PARAMS, f"unknown tool {params.name[:100]!r}; this server has: {names}"
        )

    return {"on_list_tools": on_list_tools, "on_call_tool": on_call_tool}


def _directory_for(
    gateway_tools: GatewayTools | None, code: CodeRunner | None
) -> Callable[[object], ToolDirectory] | None:
    """The tool directory as one host connection sees it (see
    :meth:`GatewayTools.directory_for`), giving signatures while code mode is on."""
    if gateway_tools is None:
        return None
    tools = gateway_tools
    return lambda session: CodeDirectory(tools.directory_for(session), code is not None)


def _with_code(gateway_listed: list[types.Tool], code: CodeRunner | None) -> list[types.Tool]:
    """The gateway's tools with ``run_code`` beside ``call_tool`` (while code mode is on and
    the gateway lists anything: a server is configured)."""
    if code is None or not gateway_listed:
        return gateway_listed
    return [gateway_listed[0], code.definition, *gateway_listed[1:]]


def _resource_handlers(
    reader: ResourceReader, gateway_tools: GatewayTools | None, profile: Profile | None
) -> dict[str, Any]:
    """The broker's ``context://`` resources and templates, then the downstream servers'
    (exposed as their servers' ``prefix`` says; under ``profile``, only its servers'), and
    subscriptions to downstream resources."""

    async def on_list_resources(
        ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListResourcesResult:
        extra = await gateway_tools.gateway.list_resources() if gateway_tools is not None else []
        if gateway_tools is not None:
            gateway_tools.notifier.remember(ctx.session)  # for resources/list_changed
        extra = [r for r in extra if await resource_shown(str(r.uri), profile, gateway_tools)]
        return types.ListResourcesResult(resources=[*reader.list(), *extra])

    async def on_list_templates(
        ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListResourceTemplatesResult:
        own = resource_templates()
        if not with_servers(gateway_tools):
            return types.ListResourceTemplatesResult(resource_templates=own)
        extra = await gateway_tools.gateway.resources.list_templates()
        extra = [t for t in extra if await template_shown(t.uri_template, profile, gateway_tools)]
        return types.ListResourceTemplatesResult(resource_templates=[*own, *extra])

    async def on_read_resource(
        ctx: ServerRequestContext[Any], params: types.ReadResourceRequestParams
    ) -> types.ReadResourceResult | types.InputRequiredResult:
        uri = str(params.uri)
        if downstream_uri(gateway_tools, uri):
            await check_shown(uri, profile, gateway_tools)
            with _as_host(ctx, params):
                return await downstream_call(
                    gateway_tools.gateway.read_resource(uri, retry_fields(params))
                )
        return await reader.read(uri)

    handlers: dict[str, Any] = {
        "on_list_resources": on_list_resources,
        "on_list_resource_templates": on_list_templates,
        "on_read_resource": on_read_resource,
    }
    if gateway_tools is not None:
        handlers |= subscription_handlers(gateway_tools, profile)
    return handlers


def retry_fields(params: types.InputResponseRequestParams) -> dict[str, Any]:
    """A 2026-07-28 host's answers to a server's ``InputRequiredResult`` (``inputResponses``
    and ``requestState``) in a retried request, as sent: what goes downstream with it."""
    return params.model_dump(
        by_alias=True,
        mode="json",
        exclude_none=True,
        include={"input_responses", "request_state"},
    )


def _as_host(
    ctx: ServerRequestContext[Any], params: types.RequestParams
) -> AbstractContextManager[None]:
    """Mark the downstream request made in the block as this host request's (see
    ``server.gateway.relay.host``): its era, capabilities and ``_meta`` go downstream with it."""
    rid = ctx.request_id
    return calling_for(None if rid is None else Host(ctx.session, rid, params.meta))


def _context_listener(observer: Observer, gateway_tools: GatewayTools | None) -> ContextListener:
    """Where each request context built for a host goes: the metrics and the current trace
    span, then, with downstream servers, the host's own tool list (its selected tools)."""

    async def context_built(session: ServerSession | None, context: RequestContext) -> None:
        observer.context_built(context)
        if gateway_tools is not None:
            await gateway_tools.context_built(session, context)

    return context_built


def _prompt_handlers(
    prompt: ContextPrompt, gateway_tools: GatewayTools | None, profile: Profile | None
) -> dict[str, Any]:
    """The broker's ``context`` prompt, then the downstream servers' prompts (and, with
    downstream servers, the ``subscriptions/listen`` stream)."""

    async def on_list_prompts(
        ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListPromptsResult:
        extra = await gateway_tools.gateway.list_prompts() if gateway_tools is not None else []
        if gateway_tools is not None:
            gateway_tools.notifier.remember(ctx.session)  # for prompts/list_changed
        extra = [
            p for p in extra if gateway_tools and await prompt_shown(p.name, profile, gateway_tools)
        ]
        return types.ListPromptsResult(prompts=[CONTEXT_PROMPT, *extra])

    async def on_get_prompt(
        ctx: ServerRequestContext[Any], params: types.GetPromptRequestParams
    ) -> types.GetPromptResult | types.InputRequiredResult:
        if params.name == CONTEXT_PROMPT.name:
            return await prompt.get(params.arguments, ctx.session)
        if gateway_tools is None or not with_servers(gateway_tools):
            raise MCPError(
                types.INVALID_PARAMS,
                f"unknown prompt {params.name[:100]!r}; this server has: {CONTEXT_PROMPT.name}",
            )
        if not await prompt_shown(params.name, profile, gateway_tools):
            raise MCPError(types.INVALID_PARAMS, outside(f"prompt {params.name[:100]!r}", profile))
        with _as_host(ctx, params):
            return await downstream_call(
                gateway_tools.gateway.get_prompt(
                    params.name, params.arguments, retry_fields(params)
                )
            )

    handlers: dict[str, Any] = {"on_list_prompts": on_list_prompts, "on_get_prompt": on_get_prompt}
    if gateway_tools is not None:  # the 2026-era stream that announces list changes
        handlers["on_subscriptions_listen"] = listen_handler(gateway_tools, profile)
        handlers["on_completion"] = completion_handler(gateway_tools, profile)
    return handlers


def _add_logging(server: Server[Any]) -> None:
    """Accept ``logging/setLevel`` from handshake-era hosts: the level below which a
    downstream's log messages are not passed on to that host (the broker's own log goes to
    stderr, never to hosts). Registered after construction: passing it to
    the constructor warns that the capability is deprecated in 2026-07-28, where the SDK
    does not route it anyway."""

    async def on_set_level(
        ctx: ServerRequestContext[Any], params: types.SetLevelRequestParams
    ) -> types.EmptyResult:
        log.debug("client asked for log level %s", params.level)
        set_log_level(ctx.session, params.level)
        return types.EmptyResult()

    server.add_request_handler("logging/setLevel", types.SetLevelRequestParams, on_set_level)
