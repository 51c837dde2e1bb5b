"""The SQLite store's files: a full disk, a write-ahead log the main file still needs, who may
read the files, and a path that is a directory."""

from __future__ import annotations

import logging
import os
import shutil
import stat
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from context_broker.server.stores.sqlite import SqliteSessionStore

from contextcore.errors import ConfigError
from contextcore.sessions import new_session_id
from contextcore.store import MessageRecord, SessionHeader, StoreUnavailable

BROKER = str(Path(sys.executable).parent / "context-broker")


class _SmallDisk:
    """A folder whose disk fills after a few hundred KiB: a real tmpfs where this machine
    lets the tests mount one, else the same limit set by SQLite's ``max_page_count``."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        folder.mkdir()
        mounted = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", "size=400k", "tmpfs", str(folder)],
            capture_output=True,
            check=False,
        )
        self.mounted = mounted.returncode == 0
        self.full = True

    def open(self, path: Path) -> SqliteSessionStore:
        """The store at ``path``, limited like the small disk while it is full."""
        store = SqliteSessionStore(path)
        if not self.mounted and self.full:
            pages = store._db.execute("PRAGMA page_count").fetchone()[0]
            store._db.execute(f"PRAGMA max_page_count = {pages + 90}")
        return store

    def make_room(self, store: SqliteSessionStore) -> None:
        """Give the disk room again, with ``store`` open."""
        self.full = False
        if self.mounted:
            subprocess.run(
                ["mount", "-o", "remount,size=16m", str(self.folder)], check=True, timeout=30
            )
        else:
            store._db.execute("PRAGMA max_page_count = 1073741823")

    def close(self) -> None:
        if self.mounted:
            subprocess.run(["umount", "-l", str(self.folder)], check=False, timeout=30)


@contextmanager
def _small_disk(folder: Path) -> Iterator[_SmallDisk]:
    disk = _SmallDisk(folder)
    try:
        yield disk
    finally:
        disk.close()


def _message(i: int) -> MessageRecord:
    mid = f"m-{i}"
    return MessageRecord(mid, {"id": mid, "role": "user", "content": f"{mid} " + "x" * 2000})


def _fill(store: SqliteSessionStore, sid: str, first: int) -> tuple[list[str], str]:
    """Append until the disk is full; the ids acknowledged and the refusal's text."""
    acknowledged: list[str] = []
    for i in range(first, first + 5000):
        try:
            store.append_messages(sid, [_message(i)])
        except StoreUnavailable as exc:
            return acknowledged, exc.message
        acknowledged.append(f"m-{i}")
    raise AssertionError("the small disk never filled")


def _ids(store: SqliteSessionStore, sid: str) -> list[str]:
    return [m.id for m in store.messages(sid)]


def _check(config: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CONTEXT_BROKER_")}
    return subprocess.run(
        [BROKER, "check", "--config", str(config)],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )


def _config(folder: Path, path: str) -> Path:
    config = folder / "broker.toml"
    config.write_text(
        f'[search]\nsemantic = false\n\n[persistence]\nbackend = "sqlite"\npath = "{path}"\n',
        encoding="utf-8",
    )
    return config


def test_a_full_disk_keeps_every_acknowledged_write_and_takes_writes_again_after_room_is_made(
    tmp_path: Path,
) -> None:
    with _small_disk(tmp_path / "disk") as disk:
        path = disk.folder / "sessions.sqlite3"
        store = disk.open(path)
        sid = new_session_id()
        store.create_session(SessionHeader(sid, None, "2026-01-01T00:00:00.000Z"), ())
        acknowledged, refusal = _fill(store, sid, 0)
        assert len(acknowledged) >= 5
        assert repr(str(path)) in refusal and "full" in refusal and "without a restart" in refusal
        store.close()  # the restart: the checkpoint on close cannot finish on the full disk

        copy = tmp_path / "copy"
        copy.mkdir()
        for name in os.listdir(disk.folder):
            shutil.copy2(disk.folder / name, copy / name)
        checked = _check(_config(copy, "sessions.sqlite3"))
        assert checked.returncode == 0, checked.stdout + checked.stderr
        assert "truncated" not in checked.stdout

        store = disk.open(path)  # still full
        assert _ids(store, sid) == acknowledged
        more, refusal = _fill(store, sid, len(acknowledged))
        assert repr(str(path)) in refusal and "full" in refusal
        disk.make_room(store)
        later = [_message(i) for i in range(len(acknowledged) + len(more), 5000)][:20]
        for message in later:  # the same store, no restart
            store.append_messages(sid, [message])
        store.close()

        store = SqliteSessionStore(path)
        assert _ids(store, sid) == [*acknowledged, *more, *(m.id for m in later)]
        store.close()


def _db_with_log(path: Path) -> list[str]:
    """A store whose pages are all in its write-ahead log, beside a main file holding only
    its first page, whose header promises all of them (as a checkpoint cut short by a full
    disk leaves it)."""
    source = path.parent / "source"
    source.mkdir()
    store = SqliteSessionStore(source / path.name)
    sid = new_session_id()
    store.create_session(SessionHeader(sid, None, "2026-01-01T00:00:00.000Z"), ())
    for i in range(30):
        store.append_messages(sid, [_message(i)])
    log = Path(f"{source / path.name}-wal").read_bytes()  # every frame since creation
    store.close()  # the checkpoint: the main file is whole, its header counts every page
    main = (source / path.name).read_bytes()
    page = int.from_bytes(main[16:18], "big")
    assert int.from_bytes(main[28:32], "big") > 1
    path.write_bytes(main[:page])
    Path(f"{path}-wal").write_bytes(log)
    return [f"m-{i}" for i in range(30)]


def test_a_store_whose_pages_are_in_its_write_ahead_log_opens_with_every_record(
    tmp_path: Path,
) -> None:
    path = tmp_path / "sessions.sqlite3"
    written = _db_with_log(path)
    store = SqliteSessionStore(path)
    (sid,) = store.list_session_ids()
    assert _ids(store, sid) == written
    store.close()


def test_a_damaged_store_is_refused_saying_what_was_found_and_never_advising_to_move_it_away(
    tmp_path: Path,
) -> None:
    path = tmp_path / "sessions.sqlite3"
    store = SqliteSessionStore(path)
    sid = new_session_id()
    store.create_session(SessionHeader(sid, None, "2026-01-01T00:00:00.000Z"), ())
    for i in range(40):
        store.append_messages(sid, [_message(i)])
    store._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    store.close()
    data = bytearray(path.read_bytes())
    page = int.from_bytes(data[16:18], "big")
    data[3 * page + 8 : 3 * page + 400] = b"\xff" * 392  # scribble over a page's cells
    path.write_bytes(bytes(data))
    with pytest.raises(ConfigError) as info:
        SqliteSessionStore(path)
    message = info.value.message
    assert repr(str(path)) in message and "damaged" in message, message
    assert "move it away" not in message and "-wal" in message
    assert path.read_bytes() == bytes(data)


def _modes(path: Path) -> dict[str, int]:
    return {name: stat.S_IMODE(os.stat(f"{path}{name}").st_mode) for name in ("", "-wal", "-shm")}


def test_a_new_store_and_its_log_files_are_readable_by_their_owner_only(tmp_path: Path) -> None:
    path = tmp_path / "sessions.sqlite3"
    old = os.umask(0o022)
    try:
        store = SqliteSessionStore(path)
        sid = new_session_id()
        store.create_session(SessionHeader(sid, None, "2026-01-01T00:00:00.000Z"), ())
        store.append_messages(sid, [_message(0)])
        assert _modes(path) == {"": 0o600, "-wal": 0o600, "-shm": 0o600}
        store.close()
    finally:
        os.umask(old)


def test_an_existing_store_open_to_others_is_made_private_and_the_log_says_so(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "sessions.sqlite3"
    store = SqliteSessionStore(path)
    sid = new_session_id()
    store.create_session(SessionHeader(sid, None, "2026-01-01T00:00:00.000Z"), ())
    store.close()
    path.chmod(0o644)
    with caplog.at_level(logging.WARNING):
        store = SqliteSessionStore(path)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert str(path) in caplog.text and "644" in caplog.text
    assert store.list_session_ids() == [sid]
    store.close()


@pytest.mark.parametrize("command", ["check", "serve"])
def test_a_store_path_naming_a_directory_is_a_one_line_error_naming_the_key(
    tmp_path: Path, command: str
) -> None:
    (tmp_path / "sessions").mkdir()
    config = _config(tmp_path, "sessions")
    env = {k: v for k, v in os.environ.items() if not k.startswith("CONTEXT_BROKER_")}
    out = subprocess.run(
        [BROKER, command, "--config", str(config)],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        stdin=subprocess.DEVNULL,
    )
    assert out.returncode == 1, out.stdout + out.stderr
    assert "Traceback" not in out.stderr + out.stdout
    said = out.stdout + out.stderr
    assert "persistence.path" in said and "is a directory" in said, said
