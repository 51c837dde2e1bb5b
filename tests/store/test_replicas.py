"""Three ``context-broker serve --transport http`` replicas on one PostgreSQL or Redis store,
driven over Streamable HTTP by a client that sends each call to the next replica in turn."""

from __future__ import annotations

import itertools
import os
import signal
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from servers import PostgresServer, RedisServer

from tests.support.broker_procs import running_broker, server_env, write_config
from tests.support.mcp_calls import call

REPLICAS = 3
pytestmark = pytest.mark.parametrize("backend", ["postgres", "redis"])


class RoundRobin:
    """One MCP client per replica; each call goes to the next replica in turn."""

    def __init__(self, clients: list[Client]) -> None:
        self.clients = clients
        self._next = itertools.cycle(range(len(clients)))

    async def call(self, name: str, /, **arguments: Any) -> dict[str, Any]:
        return await call(self.clients[next(self._next)], name, **arguments)


@pytest.fixture
def store_url(
    backend: str,
    request: pytest.FixtureRequest,
) -> str:
    """A fresh, empty store on the session's server for ``backend``."""
    if backend == "postgres":
        pg: PostgresServer = request.getfixturevalue("postgres_server")
        return pg.create_schema(f"replicas_{os.getpid()}")
    rs: RedisServer = request.getfixturevalue("redis_server")
    rs.flush()
    return rs.url()


@asynccontextmanager
async def replicas(
    folder: Path, backend: str, url: str
) -> AsyncIterator[list[tuple[str, anyio.abc.Process]]]:
    """``REPLICAS`` brokers on one store; the URL reaches them only through the environment."""
    # No summary and no window: get_history returns every stored message.
    whole = "\n[history]\nauto_summarize = false\nwindow_without_summary = 100000\n"
    config = write_config(folder, backend=backend, extra=whole)
    text = config.read_text(encoding="utf-8")
    line = f'backend = "{backend}"'
    config.write_text(text.replace(line, line + '\nurl = "${env:BROKER_STORE_URL}"', 1))
    env = {**server_env(), "BROKER_STORE_URL": url}
    async with AsyncExitStack() as stack:
        yield [
            await stack.enter_async_context(running_broker(config, env=env))
            for _ in range(REPLICAS)
        ]


@asynccontextmanager
async def clients(urls: list[str]) -> AsyncIterator[list[Client]]:
    async with AsyncExitStack() as stack:
        yield [await stack.enter_async_context(Client(f"{u}/mcp")) for u in urls]


def _urls(procs: list[tuple[str, anyio.abc.Process]]) -> list[str]:
    return [url for url, _ in procs]


async def _history_ids(client: Client, session_id: str) -> list[str]:
    out = await call(client, "get_history", session_id=session_id, filters=[])
    return [m["id"] for m in out["messages"]]


async def test_a_session_created_on_one_replica_is_used_on_the_others(
    tmp_path: Path, backend: str, store_url: str
) -> None:
    async with replicas(tmp_path, backend, store_url) as procs, clients(_urls(procs)) as each:
        rr = RoundRobin(each)
        with anyio.fail_after(60):
            sid = (await rr.call("create_session", agent="t"))["session_id"]
            await rr.call("add_context_item", session_id=sid, type="rule", name="commit-messages")
            appended = await rr.call(
                "append_messages",
                session_id=sid,
                messages=[
                    {"role": "user", "content": "How do I write the SQL?"},
                    {"role": "assistant", "content": "Use parameterized queries."},
                ],
            )
            built = await rr.call(
                "build_request_context", session_id=sid, message="parameterized SQL"
            )
            items = await rr.call("list_session_context", session_id=sid)
            turns = await rr.call("list_turns", session_id=sid)
            history = await rr.call("get_history", session_id=sid, filters=[])
            again = await rr.call(
                "get_request_context", session_id=sid, request_id=built["request_id"]
            )
    names = {i["name"] for i in built["items"]}
    assert {"python-style", "commit-messages", "sql-safety"} <= names
    assert "commit-messages" in {i["name"] for i in items["items"]}
    assert [t["request_id"] for t in turns["turns"]] == [built["request_id"]]
    assert [m["id"] for m in history["messages"]] == appended["ids"]
    assert again["request_id"] == built["request_id"]


async def test_concurrent_appends_from_three_replicas_all_land_in_one_order(
    tmp_path: Path, backend: str, store_url: str
) -> None:
    per_replica = 15
    acked: dict[int, list[str]] = {k: [] for k in range(REPLICAS)}
    async with replicas(tmp_path, backend, store_url) as procs, clients(_urls(procs)) as each:
        with anyio.fail_after(120):
            sid = (await call(each[0], "create_session", agent="t"))["session_id"]

            async def writer(k: int) -> None:
                for i in range(per_replica):
                    message = {"role": "user", "content": f"replica {k} message {i}"}
                    out = await call(each[k], "append_messages", session_id=sid, messages=[message])
                    acked[k].extend(out["ids"])

            async with anyio.create_task_group() as tg:
                for k in range(REPLICAS):
                    tg.start_soon(writer, k)
            seen = [await _history_ids(c, sid) for c in each]
    everything = [i for ids in acked.values() for i in ids]
    assert len(set(everything)) == REPLICAS * per_replica
    assert seen[0] == seen[1] == seen[2], "replicas disagree on the order"
    assert sorted(seen[0]) == sorted(everything)
    for ids in acked.values():  # each writer's own messages keep the order it sent them in
        assert [i for i in seen[0] if i in set(ids)] == ids


async def test_every_acknowledged_write_survives_a_replica_killed_mid_load(
    tmp_path: Path, backend: str, store_url: str
) -> None:
    victim = 1
    acked: dict[int, list[str]] = {k: [] for k in range(REPLICAS)}
    failed: list[BaseException] = []
    async with replicas(tmp_path, backend, store_url) as procs:
        urls = _urls(procs)
        with anyio.fail_after(120):
            async with Client(f"{urls[0]}/mcp") as first:
                sid = (await call(first, "create_session", agent="t"))["session_id"]
            loaded = anyio.Event()
            killed = anyio.Event()
            after_kill = [0]

            def stop(k: int) -> bool:
                if k == victim:
                    return killed.is_set()
                after_kill[0] += killed.is_set()  # survivors write 20 more times after the kill
                return after_kill[0] > 20

            async def writer(k: int) -> None:
                # Each writer owns its client: the killed replica's breaks only its own writer.
                try:
                    async with Client(f"{urls[k]}/mcp") as client:
                        while not stop(k):
                            message = {"role": "user", "content": f"replica {k} #{len(acked[k])}"}
                            out = await call(
                                client, "append_messages", session_id=sid, messages=[message]
                            )
                            acked[k].extend(out["ids"])
                            if k == victim and len(acked[k]) == 10:
                                loaded.set()
                except Exception as exc:
                    assert k == victim, exc  # only the killed replica may fail
                    failed.append(exc)

            async def killer() -> None:
                await loaded.wait()
                os.kill(procs[victim][1].pid, signal.SIGKILL)
                await procs[victim][1].wait()
                killed.set()

            async with anyio.create_task_group() as tg:
                tg.start_soon(killer)
                for k in range(REPLICAS):
                    tg.start_soon(writer, k)
            assert procs[victim][1].returncode == -signal.SIGKILL
            survivors = [u for k, u in enumerate(urls) if k != victim]
            async with clients(survivors) as each:
                seen = [await _history_ids(c, sid) for c in each]
    assert len(acked[victim]) >= 10 and len(acked[0]) > 0 and len(acked[2]) > 0
    assert seen[0] == seen[1]
    stored = set(seen[0])
    assert len(stored) == len(seen[0]), "a message is stored twice"
    for k, ids in acked.items():
        assert set(ids) <= stored, f"acknowledged writes of replica {k} are missing"
        assert [i for i in seen[0] if i in set(ids)] == ids
