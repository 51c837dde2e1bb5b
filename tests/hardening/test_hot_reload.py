"""Config hot reload: SIGHUP and ``[server] watch_config`` against a real ``context-broker
serve`` over stdio, and which chunks a reload re-embeds, in process."""

from __future__ import annotations

import logging
import os
import signal
import sys
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import pytest
from context_broker.server.parts import build_parts
from context_broker.server.reload import ConfigReloader
from context_broker.server.settings import load_config
from mcp import Client, StdioServerParameters, stdio_client

from contextcore.embedding import Vectors
from tests.support.broker_procs import BROKER, server_env
from tests.support.hash_embedder import HashEmbedder
from tests.support.mcp_calls import call, error
from tests.support.polling import eventually

TIME = Path(sys.executable).parent / "mcp-server-time"


def rule(name: str, description: str, text: str, include: str = "always") -> str:
    return f"---\nname: {name}\ndescription: {description}\ninclude: {include}\n---\n{text}\n"


def write_setup(folder: Path, extra: str = "") -> Path:
    """A config reading a rules folder with two rules; returns the config path."""
    rules = folder / "rules"
    rules.mkdir()
    (rules / "style.md").write_text(
        rule("style", "House style", "Use type hints everywhere."), encoding="utf-8"
    )
    (rules / "sql.md").write_text(
        rule("sql", "Database queries", "Always use parameterized SQL.", "agent"),
        encoding="utf-8",
    )
    config = folder / "broker.toml"
    config.write_text(
        f'[search]\nsemantic = false\n\n[sources]\nrule_dirs = ["rules"]\n{extra}',
        encoding="utf-8",
    )
    return config


@asynccontextmanager
async def broker(config: Path) -> AsyncIterator[tuple[Client, int, Path]]:
    """The broker over stdio; yields (client, its pid, its stderr log). A shell writes the
    pid and then becomes the broker (``exec``), so the pid is the broker's own."""
    pid_file = config.parent / "broker.pid"
    log_path = config.parent / "stderr.log"
    script = f'echo $$ > "{pid_file}"; exec "{BROKER}" serve --config "{config}"'
    params = StdioServerParameters(command="/bin/sh", args=["-c", script], env=server_env())
    with log_path.open("w") as errlog:
        async with Client(stdio_client(params, errlog=errlog), mode="legacy") as client:
            await client.list_tools()  # the broker is serving: its pid file is written
            yield client, int(pid_file.read_text()), log_path


async def descriptions(client: Client) -> dict[str, str]:
    catalog = await call(client, "list_catalog")
    return {i["name"]: i["description"] for i in catalog["items"]}


async def test_sighup_reloads_an_edited_rule_and_sessions_keep_working(tmp_path: Path) -> None:
    config = write_setup(tmp_path)
    with anyio.fail_after(60):
        async with broker(config) as (client, pid, _):
            sid = (await call(client, "create_session"))["session_id"]
            first = await call(client, "build_request_context", session_id=sid, message="sql")
            assert {i["name"] for i in first["items"]} == {"style", "sql"}

            (tmp_path / "rules" / "style.md").write_text(
                rule("style", "Edited house style", "Prefer frozen dataclasses."),
                encoding="utf-8",
            )
            (tmp_path / "rules" / "sql.md").unlink()
            os.kill(pid, signal.SIGHUP)

            async def edited() -> bool:
                return (await descriptions(client)).get("style") == "Edited house style"

            await eventually(edited, within=30, every=0.1)
            assert "sql" not in await descriptions(client)
            built = await call(
                client,
                "build_request_context",
                session_id=sid,
                message="sql",
                include_messages=True,
            )
            text = "".join(m["content"] for m in built["messages"])
            assert "Prefer frozen dataclasses." in text and "type hints" not in text
            old = await call(
                client, "get_request_context", session_id=sid, request_id=first["request_id"]
            )
            assert {i["name"] for i in old["items"]} == {"style", "sql"}


async def test_an_invalid_config_after_sighup_keeps_the_old_one_serving(tmp_path: Path) -> None:
    config = write_setup(tmp_path)
    with anyio.fail_after(60):
        async with broker(config) as (client, pid, log_path):
            config.write_text(config.read_text() + "\n[search.bogus]\nx = 1\n", encoding="utf-8")
            (tmp_path / "rules" / "style.md").write_text(
                rule("style", "Never applied", "Never applied."), encoding="utf-8"
            )
            os.kill(pid, signal.SIGHUP)
            await eventually(
                lambda: "config reload failed" in log_path.read_text(), within=30, every=0.1
            )
            line = next(x for x in log_path.read_text().splitlines() if "config reload failed" in x)
            assert "ERROR" in line and "unknown key 'search.bogus'" in line
            assert (await descriptions(client))["style"] == "House style"
            sid = (await call(client, "create_session"))["session_id"]
            built = await call(client, "build_request_context", session_id=sid, message="sql")
            assert {i["name"] for i in built["items"]} == {"style", "sql"}


async def test_with_watch_config_an_edit_is_picked_up_without_a_signal(tmp_path: Path) -> None:
    config = write_setup(tmp_path, "\n[server]\nwatch_config = true\n")
    style = tmp_path / "rules" / "style.md"

    with anyio.fail_after(60):
        async with broker(config) as (client, _, log_path):

            async def edited() -> bool:
                # rewritten on every poll: the watcher may start after the first
                style.write_text(rule("style", "Watched edit", "Watched."), encoding="utf-8")
                return (await descriptions(client)).get("style") == "Watched edit"

            await eventually(edited, within=30, every=0.1)
    assert "SIGHUP" not in log_path.read_text()


async def test_sighup_applies_a_downstream_tools_new_enabled_setting(tmp_path: Path) -> None:
    tools = f'[servers.time]\ncommand = "{TIME}"\n\n[servers.time.tools.convert_time]\n'
    config = write_setup(tmp_path, tools + "enabled = true\n")
    args = {"source_timezone": "UTC", "time": "12:00", "target_timezone": "Asia/Tokyo"}
    with anyio.fail_after(60):
        async with broker(config) as (client, pid, _):
            names = {t.name for t in (await client.list_tools()).tools}
            assert "time__convert_time" in names
            config.write_text(
                config.read_text().replace("enabled = true", "enabled = false"), encoding="utf-8"
            )
            os.kill(pid, signal.SIGHUP)

            async def hidden() -> bool:
                listed = await client.list_tools()
                return "time__convert_time" not in {t.name for t in listed.tools}

            await eventually(hidden, within=30, every=0.1)
            refused = await error(
                client, "call_tool", server="time", tool="convert_time", arguments=args
            )
            assert "servers.time.tools.convert_time.enabled = false" in refused
            catalog = await call(client, "list_catalog", types=["tool"])
            assert {i["name"]: i["enabled"] for i in catalog["items"]} == {
                "get_current_time": True,
                "convert_time": False,
            }


class CountingEmbedder(HashEmbedder):
    """The hash embedder, remembering every text it embedded."""

    def __init__(self) -> None:
        super().__init__()
        self.texts: list[str] = []

    def embed(self, texts: Sequence[str]) -> Vectors:
        self.texts += texts
        return super().embed(texts)


def test_a_reload_re_embeds_only_the_changed_items(tmp_path: Path) -> None:
    config_path = write_setup(tmp_path)
    (tmp_path / "rules" / "deploy.md").write_text(
        rule("deploy", "Deploying", "Roll out with the release script.", "agent"),
        encoding="utf-8",
    )
    embedder = CountingEmbedder()
    parts = build_parts(load_config(config_path, environ={}), embedder=embedder)
    reloader = ConfigReloader(config_path, parts, None)
    parts.search.index()
    assert len(embedder.texts) == 3
    embedder.texts.clear()

    (tmp_path / "rules" / "sql.md").write_text(
        rule("sql", "Database queries", "Never format SQL strings by hand.", "agent"),
        encoding="utf-8",
    )
    report = reloader.reload()
    assert report is not None and report.changed == ("rule:sql",)
    assert report.added == () and report.removed == () and report.restart_needed == ()
    parts.search.index()
    assert len(embedder.texts) == 1 and "Never format SQL strings by hand." in embedder.texts[0]

    embedder.texts.clear()
    assert reloader.reload() == type(report)((), (), (), ())
    parts.search.index()
    assert embedder.texts == []


def test_a_reload_swaps_search_settings_and_names_what_needs_a_restart(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    config_path = write_setup(tmp_path)
    parts = build_parts(load_config(config_path, environ={}), embedder=HashEmbedder())
    reloader = ConfigReloader(config_path, parts, None)
    text = config_path.read_text().replace("semantic = false", "semantic = false\ntop_n = 2")
    config_path.write_text(text + '\n[persistence]\nbackend = "sqlite"\npath = "s.db"\n')
    with caplog.at_level(logging.INFO, logger="context_broker.server.reload"):
        report = reloader.reload()
    assert report is not None and report.restart_needed == ("persistence",)
    assert parts.search.settings.top_n == 2
    assert "persistence changed; it takes effect only after a restart" in caplog.text
