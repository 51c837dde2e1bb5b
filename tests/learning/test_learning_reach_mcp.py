"""Usage that reaches every learned item, and tools used together, through the MCP surface:
the broker as a real stdio subprocess with the real embedding model, mcp-server-time and the
filesystem server downstream, the 755 tools of the shared MCP registry catalog as
distractors, and a SQLite session store."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from tests.learning.test_learning_mcp import agent_keys, broker, ok

pytestmark = pytest.mark.model

BIN = Path(sys.executable).parent
ROOT = Path(__file__).resolve().parents[2]
REGISTRY = ROOT.parent / "shared" / "benchmarks" / "mcp-registry" / "catalog.json"
FILESYSTEM = ROOT / "tests" / "downstream" / "node_modules" / ".bin" / "mcp-server-filesystem"

CLOCK = "tool:time/get_current_time"
# Asked as people ask, never naming time: the cold ranking buries the clock tool below a
# hundred registry tools for the paraphrase (checked below, not assumed), though it is close
# enough in meaning to clear the relevance floor once lifted.
LEARNED = [
    ("Would phoning my brother in Wellington right now get him out of bed?", "Pacific/Auckland"),
    ("Will my cousin in Wellington still be asleep if I call her now?", "Pacific/Auckland"),
    ("Would calling my aunt in Perth right now wake her up?", "Australia/Perth"),
]
PARAPHRASE = "If I call my mate in Darwin right now, will he still be sleeping?"

READ = "tool:files/read_text_file"
READ_OLD = "tool:files/read_file"
WRITE = "tool:files/write_file"
# Turns that read a file and then wrote one, asked unlike the request below, which only
# asks to read.
EDITS = [
    "Bump the version number to 1.3",
    "Fix the typo in the project title",
    "Rename the author to Dana in the credits",
]
READ_ONLY = "Open notes/todo.txt and read it to me"


def distractors(tmp_path: Path) -> Path:
    """The registry's tools as a catalog file, every server's tools chosen by search."""
    catalog = json.loads(REGISTRY.read_text(encoding="utf-8"))
    for spec in catalog["servers"].values():
        spec["include"] = "agent"
    path = tmp_path / "distractors.json"
    path.write_text(json.dumps(catalog), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One embedding cache for the module's brokers: the catalog is embedded once."""
    return tmp_path_factory.mktemp("embeddings") / "cache.sqlite3"


def write_config(folder: Path, cache: Path, *, learning: bool = True) -> Path:
    """A broker config in ``folder``: its store, the shared embedding ``cache``, the
    registry's tools as distractors and the time server."""
    folder.mkdir(exist_ok=True)
    catalog = distractors(folder)
    path = folder / "broker.toml"
    path.write_text(
        f"""
[search]
top_n = 3
embedding_cache = "{cache}"

[sources]
catalog_files = ["{catalog}"]

[persistence]
backend = "sqlite"
path = "sessions.db"

[learning]
enabled = {str(learning).lower()}

[servers.time]
command = "{BIN / "mcp-server-time"}"
include = "agent"
""",
        encoding="utf-8",
    )
    return path


async def ranking(client: Client, query: str) -> list[tuple[str, float]]:
    """The best 150 items for ``query`` (the first search of a broker embeds the catalog
    unless the cache has it: up to minutes on a loaded machine)."""
    with anyio.fail_after(600):
        result = await client.call_tool(
            "search_context_items",
            {"query": query, "top_n": 150, "top_k": 5000, "min_score": 0.0},
        )
    assert not result.is_error, result.content
    assert isinstance(result.structured_content, dict)
    return [(h["key"], h["similarity_score"]) for h in result.structured_content["items"]]


async def call(client: Client, sid: str, server: str, tool: str, **arguments: Any) -> None:
    with anyio.fail_after(60):
        result = await client.call_tool(
            "call_tool",
            {"server": server, "tool": tool, "session_id": sid, "arguments": arguments},
        )
    assert not result.is_error, result.content


async def test_a_tool_the_cold_ranking_buries_is_selected_after_three_uses_and_forgetting_restores(
    tmp_path: Path, cache: Path
) -> None:
    path = write_config(tmp_path / "on", cache)
    async with Client(broker(path), mode="legacy") as client:
        cold = await ranking(client, PARAPHRASE)
        assert len(cold) > 100 and CLOCK not in [key for key, _ in cold[:100]]
        # A session per request, so nothing comes from the conversation, only from usage.
        sessions = []
        for message, zone in LEARNED:
            sid = (await ok(client, "create_session"))["session_id"]
            await ok(client, "build_request_context", session_id=sid, message=message)
            await call(client, sid, "time", "get_current_time", timezone=zone)
            sessions.append(sid)
        # Ranked first by search, and selected for a fourth request: the requests that led to
        # it are what it means, so the floor's cosine share does not drop it.
        learned = await ranking(client, PARAPHRASE)
        assert learned[0][0] == CLOCK, learned[:3]
        fresh = (await ok(client, "create_session"))["session_id"]
        built = await ok(client, "build_request_context", session_id=fresh, message=PARAPHRASE)
        chosen = [f"tool:{i['server']}/{i['name']}" for i in built["items"]]
        assert CLOCK in chosen, chosen
        for sid in sessions:
            forgot = await ok(client, "forget_usage", session_id=sid)
            assert forgot["events_deleted"] == 1
        assert await ranking(client, PARAPHRASE) == cold


async def test_with_nothing_learned_the_ranking_equals_one_without_a_learner(
    tmp_path: Path, cache: Path
) -> None:
    async with Client(broker(write_config(tmp_path / "on", cache)), mode="legacy") as client:
        learning = [await ranking(client, q) for q, _ in [*LEARNED, (PARAPHRASE, "")]]
    off = write_config(tmp_path / "off", cache, learning=False)
    async with Client(broker(off), mode="legacy") as client:
        assert [await ranking(client, q) for q, _ in [*LEARNED, (PARAPHRASE, "")]] == learning


def files_config(folder: Path, files: Path, **learning: float) -> Path:
    """A broker over the filesystem server alone, two tools per request; ``learning`` sets
    keys of ``[learning]``. Every such broker shares one store."""
    folder.mkdir(exist_ok=True)
    path = folder / "broker.toml"
    keys = "\n".join(f"{key} = {value}" for key, value in learning.items())
    path.write_text(
        f"""
[search]
top_n = 2

[persistence]
backend = "sqlite"
path = "{files.parent / "sessions.db"}"

[learning]
{keys}

[servers.files]
command = "{FILESYSTEM}"
args = ["{files}"]
include = "agent"
""",
        encoding="utf-8",
    )
    return path


async def selected(path: Path, message: str) -> list[str]:
    """The agent items a fresh session of a broker with config ``path`` selects."""
    async with Client(broker(path), mode="legacy") as client:
        sid = (await ok(client, "create_session"))["session_id"]
        turn = await ok(client, "build_request_context", session_id=sid, message=message)
        return agent_keys(turn)


async def test_a_tool_used_after_another_in_the_same_turns_comes_with_it_until_forgotten(
    tmp_path: Path,
) -> None:
    files = tmp_path / "files"
    files.mkdir()
    journal = files / "journal.txt"
    journal.write_text("monday: nothing\n", encoding="utf-8")
    # A full companion lift (the default, 0.25, was tuned on MetaTool, where the usage score
    # already brings most pairs).
    full = files_config(tmp_path / "full", files, companion_weight=1.0)
    assert await selected(full, READ_ONLY) == [READ, READ_OLD]
    async with Client(broker(full), mode="legacy") as client:
        sid = (await ok(client, "create_session"))["session_id"]
        for i, message in enumerate(EDITS):
            await ok(client, "build_request_context", session_id=sid, message=message)
            await call(client, sid, "files", "read_text_file", path=str(journal))
            text = f"monday: nothing\nday {i}: done\n"
            await call(client, sid, "files", "write_file", path=str(journal), content=text)
    assert await selected(full, READ_ONLY) == [READ, WRITE]
    # Without the usage score, only having been used together brings the writing tool.
    alone = files_config(tmp_path / "alone", files, weight=0, companion_weight=1.0)
    assert await selected(alone, READ_ONLY) == [READ, WRITE]
    neither = files_config(tmp_path / "neither", files, weight=0, companion_weight=0)
    assert await selected(neither, READ_ONLY) == [READ, READ_OLD]
    async with Client(broker(full), mode="legacy") as client:
        await ok(client, "forget_usage", session_id=sid)
    assert await selected(alone, READ_ONLY) == [READ, READ_OLD]
