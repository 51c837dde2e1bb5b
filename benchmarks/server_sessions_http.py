"""1,000 sessions created over Streamable HTTP by 20 concurrent clients: errors and throughput.

Run: .venv/bin/python benchmarks/server_sessions_http.py [--quick] [--backend memory|sqlite]
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import anyio
from anyio.streams.text import TextReceiveStream
from mcp import Client

BROKER = str(Path(sys.executable).parent / "context-broker")
CONFIG = """
[search]
semantic = false

[persistence]
backend = "{backend}"
path = "sessions.sqlite3"

[[rules]]
name = "house-style"
text = "Keep functions small."
include = "always"
"""


async def _client(url: str, count: int, ids: set[str], errors: list[str]) -> None:
    try:
        async with Client(url) as client:
            for _ in range(count):
                result = await client.call_tool("create_session", {"agent": "bench"})
                if result.is_error or not result.structured_content:
                    errors.append(str(result.content))
                else:
                    ids.add(result.structured_content["session_id"])
    except Exception as exc:  # a benchmark reports failures instead of stopping
        errors.append(f"{type(exc).__name__}: {exc}")


async def run(sessions: int, clients: int, backend: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        config = Path(tmp) / "bench.toml"
        config.write_text(CONFIG.format(backend=backend), encoding="utf-8")
        cmd = [BROKER, "serve", "--config", str(config), "--transport", "http", "--port", "0"]
        async with await anyio.open_process(cmd, stdin=subprocess.DEVNULL) as proc:
            url = await _wait_for_url(proc)
            ids: set[str] = set()
            errors: list[str] = []
            started = time.perf_counter()
            async with anyio.create_task_group() as drain_tg:
                drain_tg.start_soon(_drain, proc)
                async with anyio.create_task_group() as tg:
                    per, extra = divmod(sessions, clients)
                    for i in range(clients):
                        tg.start_soon(_client, url, per + (i < extra), ids, errors)
                elapsed = time.perf_counter() - started
                proc.terminate()
                await proc.wait()
    print(f"backend {backend}: {sessions} sessions by {clients} concurrent clients")
    print(f"created {len(ids)} distinct sessions, {len(errors)} errors in {elapsed:.2f}s")
    print(f"throughput {len(ids) / elapsed:.0f} sessions/s (including {clients} MCP handshakes)")
    for e in errors[:5]:
        print("  error:", e[:200])


async def _drain(proc: anyio.abc.Process) -> None:
    assert proc.stderr is not None
    async for _ in proc.stderr:  # keep the server's log pipe from filling up
        pass


async def _wait_for_url(proc: anyio.abc.Process) -> str:
    assert proc.stderr is not None
    seen = ""
    with anyio.fail_after(30):
        async for chunk in TextReceiveStream(proc.stderr):
            seen += chunk
            match = re.search(r"listening on (http://\S+/mcp)", seen)
            if match:
                break
        else:
            raise RuntimeError("the broker did not start:\n" + seen)
    return match.group(1)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="200 sessions")
    parser.add_argument("--sessions", type=int, default=None)
    parser.add_argument("--clients", type=int, default=20)
    parser.add_argument("--backend", choices=["memory", "sqlite"], default="sqlite")
    args = parser.parse_args()
    sessions = args.sessions or (200 if args.quick else 1000)
    anyio.run(run, sessions, args.clients, args.backend)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
