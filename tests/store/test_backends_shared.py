"""What PostgreSQL and Redis stores add beyond the contract: one embedding cache for every
replica, a versioned schema, and URLs that never reach an error message."""

from __future__ import annotations

from pathlib import Path

import psycopg
import pytest
import redis
from context_broker.server.host.mcp_server import build_server
from context_broker.server.parts import build_parts
from context_broker.server.settings import load_config
from context_broker.server.stores import build_store
from mcp import Client
from servers import PostgresServer, RedisServer

from contextcore.errors import ConfigError
from contextcore.store import StoreError, StoreUnavailable
from tests.support.broker_procs import write_config
from tests.support.hash_embedder import HashEmbedder
from tests.support.mcp_calls import call


def _config(folder: Path, backend: str, url: str) -> Path:
    path = write_config(folder, backend=backend, semantic=True)
    line = f'backend = "{backend}"'
    text = path.read_text(encoding="utf-8")
    path.write_text(text.replace(line, f'{line}\nurl = "{url}"', 1), encoding="utf-8")
    return path


def _url(request: pytest.FixtureRequest, backend: str, name: str) -> str:
    if backend == "postgres":
        pg: PostgresServer = request.getfixturevalue("postgres_server")
        return pg.create_schema(name)
    rs: RedisServer = request.getfixturevalue("redis_server")
    rs.flush()
    return rs.url()


@pytest.mark.parametrize("backend", ["postgres", "redis"])
async def test_a_second_replica_reads_the_first_ones_embeddings_instead_of_embedding_again(
    tmp_path: Path, backend: str, request: pytest.FixtureRequest
) -> None:
    config = load_config(_config(tmp_path, backend, _url(request, backend, "shared_cache")))
    embedded: list[list[int]] = []
    for _replica in range(2):
        embedder = HashEmbedder()
        store = build_store(config)
        try:
            parts = build_parts(config, embedder=embedder, store=store)
            async with Client(build_server(parts.broker)) as client:
                sid = (await call(client, "create_session"))["session_id"]
                built = await call(
                    client,
                    "build_request_context",
                    session_id=sid,
                    message="parameterized SQL queries",
                )
        finally:
            store.close()
        assert built["search_mode"] == "hybrid"
        assert "sql-safety" in {i["name"] for i in built["items"]}
        embedded.append(embedder.calls)
    first, second = embedded
    assert sum(first) > 1, "the first replica embeds the catalog's chunks"
    assert sum(second) <= 1, "the second embeds at most the query"


def test_a_postgres_schema_from_a_newer_broker_is_refused(
    request: pytest.FixtureRequest,
) -> None:
    from context_broker.server.stores.postgres import SCHEMA_VERSION, PostgresSessionStore

    url = _url(request, "postgres", "newer_schema")
    PostgresSessionStore(url).close()
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("INSERT INTO schema_version VALUES (%s)", (SCHEMA_VERSION + 1,))
    with pytest.raises(StoreError, match="newer than this broker"):
        PostgresSessionStore(url)


def test_a_redis_layout_from_a_newer_broker_is_refused(request: pytest.FixtureRequest) -> None:
    from context_broker.server.stores.redis import SCHEMA_VERSION, RedisSessionStore

    url = _url(request, "redis", "")
    with redis.Redis.from_url(url) as client:
        client.set("cb:version", SCHEMA_VERSION + 1)
    with pytest.raises(StoreError, match="newer than this broker"):
        RedisSessionStore(url)


@pytest.mark.parametrize(
    ("backend", "url"),
    [
        ("postgres", "postgresql://broker:hunter2secret@127.0.0.1:{port}/broker"),
        ("redis", "redis://:hunter2secret@127.0.0.1:{port}/0"),
    ],
)
def test_an_unreachable_store_is_named_without_its_password(
    tmp_path: Path, backend: str, url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import socket

    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    monkeypatch.setenv("BROKER_STORE_URL", url.format(port=port))
    config = load_config(_config(tmp_path, backend, "${env:BROKER_STORE_URL}"))
    with pytest.raises(StoreUnavailable) as caught:
        build_store(config)
    text = str(caught.value)
    assert f"127.0.0.1:{port}" in text and "[persistence] url" in text
    assert "hunter2secret" not in text and "broker:" not in text


def test_an_unset_variable_in_the_store_url_is_named(tmp_path: Path) -> None:
    config = load_config(_config(tmp_path, "redis", "redis://${env:NOT_SET_ANYWHERE_42}:6379/0"))
    with pytest.raises(ConfigError, match="'NOT_SET_ANYWHERE_42' is not set"):
        build_store(config)
