"""Downstream servers added, changed and removed by a config reload, without a restart:
a real ``context-broker serve`` over stdio (the file watcher) and over Streamable HTTP
(SIGHUP), with real downstream processes; in process, the reload plan and sessions on SQLite."""

from __future__ import annotations

import functools
import json
import os
import signal
import sys
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from context_broker.server.gateway import Gateway
from context_broker.server.gateway.server_state import ServerChanges, diff_servers
from context_broker.server.parts import build_parts
from context_broker.server.reload import ConfigReloader
from context_broker.server.settings import DownstreamConfig, load_config
from mcp import Client, MCPError, StdioServerParameters, stdio_client

from contextcore.items import ItemRef
from tests.gateway.gateway_env import FAST
from tests.support.broker_procs import BROKER, running_broker, server_env
from tests.support.hash_embedder import HashEmbedder
from tests.support.mcp_calls import call
from tests.support.polling import eventually

NAMED = Path(__file__).parent / "fixtures" / "named_tools.py"
LIST_CHANGED = "notifications/tools/list_changed"
TAG_ENV = "SERVERS_RELOAD_TEST_TAG"
# The session items (server/tool/mode) of each server's tools: the fixture adds ``grow``.
ALPHA = {"alpha/grow/always", "alpha/ping/always"}
BETA = {"beta/grow/always", "beta/pong/always"}


def tag_for(server: str) -> str:
    """A marker no other process has, even in a test run beside this one."""
    return f"{server}-{uuid.uuid4().hex}"


def server_table(name: str, *tools: str, tag: str) -> str:
    """A ``[servers.NAME]`` table running the named-tools fixture; ``tag`` marks its process
    (in its environment)."""
    args = ", ".join(f'"{a}"' for a in (str(NAMED), *tools))
    return (
        f'\n[servers.{name}]\ncommand = "{sys.executable}"\nargs = [{args}]\n'
        f'env = {{ {TAG_ENV} = "{tag}" }}\n'
    )


def write_config(folder: Path, servers: str, *, watch: bool = False, top: str = "") -> Path:
    path = folder / "broker.toml"
    server = "\n[server]\nwatch_config = true\n" if watch else ""
    path.write_text(f"{top}[search]\nsemantic = false\n{server}{servers}", encoding="utf-8")
    return path


def write_servers_file(folder: Path, **servers: tuple[list[str], str]) -> Path:
    """A host-style ``mcpServers`` file: name → (tools, tag) of named-tools fixtures, each
    ``"include": "always"`` so its tools are listed directly (imported ones are "agent")."""
    path = folder / "servers.json"
    entries = {
        name: {
            "command": sys.executable,
            "args": [str(NAMED), *tools],
            "env": {TAG_ENV: tag},
            "include": "always",
        }
        for name, (tools, tag) in servers.items()
    }
    path.write_text(json.dumps({"mcpServers": entries}), encoding="utf-8")
    return path


def pids_with(tag: str) -> list[int]:
    """Live processes started with ``tag`` in their environment: a fixture server's."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            environ = (entry / "environ").read_bytes().split(b"\0")
        except OSError:
            continue  # gone meanwhile, or not ours to read
        if f"{TAG_ENV}={tag}".encode() in environ and not ended(int(entry.name)):
            found.append(int(entry.name))
    return found


def ended(pid: int) -> bool:
    """Whether process ``pid`` is gone or only waits to be reaped (a zombie)."""
    try:
        return (Path(f"/proc/{pid}") / "stat").read_text().split(") ")[1].startswith("Z")
    except OSError:
        return True


def all_ended(pids: list[int]) -> bool:
    return all(ended(pid) for pid in pids)


class Host:
    """A handshake-era host: its client, and how many ``tools/list_changed`` it heard."""

    def __init__(self) -> None:
        self.client: Client | None = None
        self.heard = 0

    async def on_message(self, message: Any) -> None:
        if getattr(message, "method", None) == LIST_CHANGED:
            self.heard += 1

    async def names(self) -> set[str]:
        assert self.client is not None
        return {t.name for t in (await self.client.list_tools()).tools}

    async def listed_after_notice(
        self,
        since: int,
        present: str,
        absent: str = "",
        *,
        write: Callable[[], object] | None = None,
    ) -> None:
        """Wait for a ``tools/list_changed`` after ``since`` notices, then for a tool list
        that has ``present`` (if given) and not ``absent`` (if given). ``write`` (the config
        edit) is made again while no notice came: a watcher that logged its start may not be
        watching yet."""

        def noticed() -> bool:
            if self.heard > since:
                return True
            if write is not None:
                write()
            return False

        async def shown() -> bool:
            names = await self.names()
            return (not present or present in names) and absent not in names

        await eventually(noticed, within=30, every=0.5, what="tools/list_changed")
        await eventually(shown, within=30, what=f"{present or absent!r} (un)listed")


async def session_tools(client: Client, sid: str) -> set[str]:
    session = await call(client, "list_session_context", session_id=sid)
    return {
        f"{i['server']}/{i['name']}/{i['include_mode']}"
        for i in session["items"]
        if i["type"] == "tool"
    }


@asynccontextmanager
async def stdio_broker(config: Path, host: Host) -> AsyncIterator[Path]:
    """The broker over stdio for ``host``; yields its stderr log."""
    log_path = config.parent / "stderr.log"
    params = StdioServerParameters(
        command=BROKER, args=["serve", "--config", str(config)], env=server_env()
    )
    with log_path.open("w") as errlog:
        async with Client(
            stdio_client(params, errlog=errlog), mode="legacy", message_handler=host.on_message
        ) as client:
            host.client = client
            yield log_path


async def test_a_watched_config_adds_and_removes_a_server_without_a_restart(
    tmp_path: Path,
) -> None:
    alpha = server_table("alpha", "ping", tag=tag_for("alpha"))
    beta_tag = tag_for("beta")
    config = write_config(tmp_path, alpha, watch=True)
    host = Host()
    with anyio.fail_after(120):
        async with stdio_broker(config, host) as log_path:
            client = host.client
            assert client is not None

            async def alpha_listed() -> bool:  # on a busy machine, past the startup budget
                return "alpha__ping" in await host.names()

            await eventually(alpha_listed, within=30)
            sid = (await call(client, "create_session"))["session_id"]
            assert await session_tools(client, sid) == ALPHA
            await eventually(lambda: "watching" in log_path.read_text(), within=30)

            with_beta = alpha + server_table("beta", "pong", tag=beta_tag)
            edit = functools.partial(write_config, tmp_path, with_beta, watch=True)
            await host.listed_after_notice(host.heard, "beta__pong", write=edit)
            direct = await client.call_tool("beta__pong", {"text": "hi"})
            assert not direct.is_error and direct.content[0].text == "pong:hi"  # type: ignore[union-attr]
            proxied = await client.call_tool(
                "call_tool", {"server": "beta", "tool": "pong", "arguments": {"text": "yo"}}
            )
            assert not proxied.is_error and "pong:yo" in proxied.content[0].text  # type: ignore[union-attr]
            assert await session_tools(client, sid) == ALPHA | BETA
            by_hand = (await call(client, "create_session"))["session_id"]
            pong = {"session_id": by_hand, "type": "tool", "name": "pong", "server": "beta"}
            await call(client, "remove_context_item", **pong)
            await call(client, "add_context_item", **pong)
            by_hand_items = ALPHA | {"beta/grow/always", "beta/pong/manual"}
            assert await session_tools(client, by_hand) == by_hand_items
            (beta_pid,) = pids_with(beta_tag)

            edit = functools.partial(write_config, tmp_path, alpha, watch=True)
            await host.listed_after_notice(
                host.heard, "alpha__ping", absent="beta__pong", write=edit
            )
            # Called directly by the name the host listed, or through call_tool: a tool error.
            removed = "no downstream server named 'beta' any more (removed from the config)"
            gone = await client.call_tool("beta__pong", {"text": "hi"})
            refused = await client.call_tool("call_tool", {"server": "beta", "tool": "pong"})
            for result in (gone, refused):
                assert result.is_error and removed in result.content[0].text  # type: ignore[union-attr]
            await eventually(lambda: ended(beta_pid), within=30, what="beta's process ended")
            assert await session_tools(client, sid) == ALPHA
            assert await session_tools(client, by_hand) == ALPHA
            servers = await call(client, "list_servers")
            assert [s["name"] for s in servers["servers"]] == ["alpha"]
            catalog = await call(client, "list_catalog", types=["tool"])
            assert {i["server"] for i in catalog["items"]} == {"alpha"}
    log = log_path.read_text()
    assert "downstream server 'beta' started" in log and "'beta' stopped" in log
    assert "takes effect only after a restart" not in log


async def test_a_broker_started_without_servers_gets_its_first_and_loses_its_last_by_reload(
    tmp_path: Path,
) -> None:
    tag = tag_for("beta")
    config = write_config(tmp_path, "", watch=True)
    host = Host()
    with anyio.fail_after(120):
        async with stdio_broker(config, host) as log_path:
            client = host.client
            assert client is not None
            alone = await host.names()  # the broker's own tools only, as ever without servers
            assert not alone & {"call_tool", "list_servers"} and "beta__pong" not in alone
            caps = client.server_capabilities.tools
            assert caps is not None and caps.list_changed  # so hosts heed what follows
            await eventually(lambda: "watching" in log_path.read_text(), within=30)

            edit = functools.partial(
                write_config, tmp_path, server_table("beta", "pong", tag=tag), watch=True
            )
            await host.listed_after_notice(host.heard, "beta__pong", write=edit)
            assert "call_tool" in await host.names()  # list_servers answers by name
            direct = await client.call_tool("beta__pong", {"text": "hi"})
            assert not direct.is_error and direct.content[0].text == "pong:hi"  # type: ignore[union-attr]
            proxied = await client.call_tool(
                "call_tool", {"server": "beta", "tool": "pong", "arguments": {"text": "yo"}}
            )
            assert not proxied.is_error and "pong:yo" in proxied.content[0].text  # type: ignore[union-attr]
            servers = await call(client, "list_servers")
            assert [s["name"] for s in servers["servers"]] == ["beta"]
            (beta_pid,) = pids_with(tag)

            edit = functools.partial(write_config, tmp_path, "", watch=True)
            await host.listed_after_notice(host.heard, "", absent="beta__pong", write=edit)
            await eventually(lambda: ended(beta_pid), within=30, what="beta's process ended")
            assert await host.names() == alone  # the fixed tools went with the last server
            with pytest.raises(MCPError, match="unknown tool 'call_tool'"):  # as without servers
                await client.call_tool("call_tool", {"server": "beta", "tool": "pong"})
    log = log_path.read_text()
    assert "downstream server 'beta' started" in log and "'beta' stopped" in log
    assert "takes effect only after a restart" not in log


async def test_sighup_over_http_restarts_a_changed_server_keeps_its_pins_and_reads_the_servers_file(
    tmp_path: Path,
) -> None:
    tag = tag_for("beta")
    alpha = server_table("alpha", "ping", tag=tag_for("alpha"))
    config = write_config(tmp_path, alpha)
    host = Host()
    async with running_broker(config) as (url, proc):
        with anyio.fail_after(120):
            async with Client(
                f"{url}/mcp", mode="legacy", message_handler=host.on_message
            ) as client:
                host.client = client
                assert "beta__pong" not in await host.names()

                async def reload(servers: str, top: str = "") -> None:
                    write_config(tmp_path, servers, top=top)
                    os.kill(proc.pid, signal.SIGHUP)

                heard = host.heard
                await reload(alpha + server_table("beta", "pong", tag=tag))
                await host.listed_after_notice(heard, "beta__pong")
                first = await eventually(lambda: pids_with(tag), within=30)

                # Defined differently: connected again (a new process); a tool it did not
                # have before is held by the pins its name already has, as after a restart.
                await reload(alpha + server_table("beta", "pong", "extra", tag=tag))
                await eventually(lambda: all_ended(first), within=30, what="old beta ended")
                second = await eventually(lambda: pids_with(tag), within=30)
                status = await eventually(lambda: _beta_held(client), within=30)
                assert status["state"] == "connected"
                assert "beta__extra" not in await host.names()
                answer = await client.call_tool("beta__pong", {"text": "again"})
                assert answer.content[0].text == "pong:again"  # type: ignore[union-attr]

                heard = host.heard
                await reload(alpha)
                await host.listed_after_notice(heard, "alpha__ping", absent="beta__pong")
                await eventually(lambda: all_ended(second), within=30, what="beta ended")

                heard = host.heard
                await reload(alpha + server_table("beta", "pong", tag=tag))
                await host.listed_after_notice(heard, "beta__pong")
                third = await eventually(lambda: pids_with(tag), within=30)
                again = await client.call_tool("beta__pong", {"text": "back"})
                assert again.content[0].text == "pong:back"  # type: ignore[union-attr]

                # A server of the mcp_servers_file comes and goes with that file.
                gamma = tag_for("gamma")
                write_servers_file(tmp_path, gamma=(["zap"], gamma))
                heard = host.heard
                await reload(alpha, top='mcp_servers_file = "servers.json"\n')
                await host.listed_after_notice(heard, "gamma__zap", absent="beta__pong")
                zap = await client.call_tool("gamma__zap", {"text": "z"})
                assert zap.content[0].text == "zap:z"  # type: ignore[union-attr]
                await eventually(lambda: all_ended(third), within=30, what="beta ended")
                zapper = await eventually(lambda: pids_with(gamma), within=30)
                heard = host.heard
                write_servers_file(tmp_path)
                os.kill(proc.pid, signal.SIGHUP)
                await host.listed_after_notice(heard, "alpha__ping", absent="gamma__zap")
                await eventually(lambda: all_ended(zapper), within=30, what="gamma ended")


async def _beta_held(client: Client) -> dict[str, Any] | None:
    servers = (await call(client, "list_servers"))["servers"]
    beta = next((s for s in servers if s["name"] == "beta"), None)
    trust = (beta or {}).get("trust") or {}
    held = [h["tool"] for h in trust.get("held", [])]
    return beta if beta and beta["state"] == "connected" and held == ["extra"] else None


def test_a_reload_plan_tells_live_tool_settings_from_a_new_definition() -> None:
    time = DownstreamConfig(command="mcp-server-time")
    running = {"time": time, "git": DownstreamConfig(command="mcp-server-git")}
    wanted = {
        "time": time.model_copy(update={"include": "agent", "record_calls": False}),
        "git": DownstreamConfig(command="mcp-server-git", args=("--repository", ".")),
        "fetch": DownstreamConfig(url="http://127.0.0.1:9/mcp"),
    }
    changes = diff_servers(running, wanted)
    assert changes == ServerChanges(added=("fetch",), restarted=("git",), retuned=("time",))
    assert not diff_servers(wanted, wanted)
    assert diff_servers(wanted, {}).removed == ("fetch", "git", "time")


async def test_a_server_added_back_brings_back_the_items_sessions_hold_of_it(
    tmp_path: Path,
) -> None:
    alpha = server_table("alpha", "ping", tag=tag_for("alpha"))
    beta = server_table("beta", "pong", tag=tag_for("beta"))
    store = '\n[persistence]\nbackend = "sqlite"\npath = "sessions.db"\n'
    path = write_config(tmp_path, alpha + beta + store)
    parts = build_parts(load_config(path, environ={}), embedder=HashEmbedder())
    gateway = Gateway.from_config(parts.config, parts.catalog, settings=FAST)
    reloader = ConfigReloader(path, parts, gateway)
    broker = parts.broker
    pong = ItemRef("tool", "pong", "beta")

    def beta_items(sid: str) -> set[tuple[str, str]]:
        return {
            (i.ref.name, i.include_mode)
            for i in broker.session(sid).items
            if i.ref.server == "beta"
        }

    with anyio.fail_after(60):
        async with gateway:
            await eventually(lambda: parts.catalog.get(pong), within=30)
            sid = broker.create_session().session_id
            broker.remove_item(sid, "tool", "pong", "beta")
            broker.add_item(sid, "tool", "pong", "beta")
            held = {("grow", "always"), ("pong", "manual")}
            assert beta_items(sid) == held

            write_config(tmp_path, alpha + store)
            report = reloader.reload()
            assert report is not None and report.servers.removed == ("beta",)
            assert parts.catalog.get(pong) is None and beta_items(sid) == set()
            assert all(i.ref.server != "beta" for i in broker.create_session().items)

            write_config(tmp_path, alpha + beta + store)
            report = reloader.reload()
            assert report is not None and report.servers.added == ("beta",)
            await eventually(lambda: parts.catalog.get(pong), within=30)
            assert beta_items(sid) == held
