"""Sanitized, collision-free exposed names against small real servers; list_changed refresh."""

from __future__ import annotations

import re

from context_broker.server.gateway import ExposedTool
from context_broker.server.settings import DownstreamToolConfig
from gateway_env import fixture_server, running, status_of

from contextcore.catalog import Catalog
from contextcore.items import ItemRef
from tests.support.polling import eventually

VALID = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
LONG = "describe_the_entire_repository_history_with_every_commit_message_in_full"


async def test_read_file_and_read_dash_file_are_exposed_distinctly_and_routed_back() -> None:
    servers = {
        "files-a": fixture_server("named_tools.py", "read-file"),
        "files-b": fixture_server("named_tools.py", "read_file", "read.file", LONG),
        "files.c": fixture_server("named_tools.py", "read-file"),
        "files_c": fixture_server("named_tools.py", "read-file"),
    }
    async with running(servers) as gw:
        assert all(s.connected for s in gw.status()), [s.row() for s in gw.status()]
        names = {(t.server, t.tool): t.name for t in gw.tools()}
        assert names[("files-a", "read-file")] == "files-a__read-file"
        assert names[("files-b", "read_file")] == "files-b__read_file"
        assert names[("files-b", "read.file")].startswith("files-b__read_file_")
        assert names[("files_c", "read-file")] == "files_c__read-file"
        assert names[("files.c", "read-file")].startswith("files_c__read-file_")
        assert len(names[("files-b", LONG)]) <= 64
        assert all(VALID.match(n) for n in names.values())
        assert len(set(names.values())) == len(names)
        for (server, tool), exposed in names.items():
            target = gw.resolve(exposed)
            assert target == (server, tool)
            if tool == "grow":
                continue
            result = await gw.call_tool(*target, {"text": "hi"})  # as the host's call is routed
            assert result.content[0].text == f"{tool}:hi"  # type: ignore[union-attr]


async def test_list_changed_refreshes_the_catalog_and_the_exposed_list() -> None:
    catalog = Catalog()
    changes: list[list[ExposedTool]] = []
    config = fixture_server(
        "named_tools.py",
        "alpha",
        include="agent",
        tools={"alpha": DownstreamToolConfig(include="always")},
        hold_new_tools=False,  # a server that adds tools as it runs, trusted to
    )
    async with running({"grow": config}, catalog, on_exposed_change=changes.append) as gw:
        assert [t.name for t in gw.exposed_tools()] == ["grow__alpha"]  # grow itself is "agent"
        await eventually(lambda: len(changes) == 1, within=10)
        version = catalog.version
        await gw.call_tool("grow", "grow", {"name": "beta"})
        await eventually(lambda: ItemRef("tool", "beta", "grow") in catalog, within=10)
        assert catalog.version > version
        assert status_of(gw, "grow").tool_count == 3
        assert catalog.require(ItemRef("tool", "beta", "grow")).effective_include == "agent"
        # beta is "agent": the directly exposed list did not change, so no callback
        assert len(changes) == 1
