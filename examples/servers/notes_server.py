"""A small MCP server for the two-server example (examples/two-servers.toml): notes kept in a
JSON file beside it (``NOTES_FILE``, default ``notes.json`` in the working folder).

Run by the broker as ``.venv/bin/python examples/servers/notes_server.py``; needs only what
``scripts/setup.sh`` installs.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from mcp.server.mcpserver import MCPServer

server = MCPServer("notes")
NOTES = Path(os.environ.get("NOTES_FILE", "notes.json"))


def _load() -> list[dict[str, str]]:
    if not NOTES.exists():
        return []
    return list(json.loads(NOTES.read_text(encoding="utf-8")))


@server.tool()
def add_note(title: str, text: str) -> str:
    """Save a note with a title and text, to read or search later."""
    notes = [n for n in _load() if n["title"] != title] + [{"title": title, "text": text}]
    NOTES.write_text(json.dumps(notes, indent=1), encoding="utf-8")
    return f"saved note {title!r} ({len(notes)} notes)"


@server.tool()
def list_notes() -> str:
    """List the titles of every saved note."""
    return "\n".join(n["title"] for n in _load()) or "no notes yet"


@server.tool()
def search_notes(words: str) -> str:
    """Find saved notes whose title or text contains the given words."""
    wanted = words.lower().split()
    found = [n for n in _load() if all(w in (n["title"] + " " + n["text"]).lower() for w in wanted)]
    return "\n\n".join(f"{n['title']}: {n['text']}" for n in found) or "no note matches"


if __name__ == "__main__":
    server.run("stdio")
