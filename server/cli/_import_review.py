"""What ``install --import`` shows and guards before servers move behind the broker: each
server's full command (what the broker will run), whether the host file belongs to a project
(a cloned repository's file: the host would have asked before starting its servers), and
whether the servers file, which holds their environment and headers, sits in a git working
tree."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Any

__all__ = ["git_tree_of", "is_project_file", "review_lines", "server_line"]


def server_line(name: str, entry: Any) -> str:
    """One server as it will run: its full command line (or address), the folder it starts
    in, and the names (never the values) of its environment variables and headers."""
    if not isinstance(entry, Mapping):
        return f"{name}: {entry!r}"
    if entry.get("command"):
        args = [str(a) for a in entry.get("args") or []]
        what = shlex.join([str(entry["command"]), *args])
    else:
        what = f"{entry.get('url')} ({entry.get('type') or 'http'})"
    extras = [f"in {entry['cwd']}"] if entry.get("cwd") else []
    for key in ("env", "headers"):
        names = sorted(entry.get(key) or {})
        if names:
            extras.append(f"{key} {', '.join(names)}")
    return f"{name}: {what}" + (f" ({'; '.join(extras)})" if extras else "")


def review_lines(entries: Mapping[str, Any]) -> list[str]:
    """Each server of ``entries``, indented, as :func:`server_line` writes it."""
    return [f"  {server_line(name, entry)}" for name, entry in entries.items()]


def is_project_file(path: Path, cwd: Path, home: Path) -> bool:
    """Whether a host file belongs to the project in ``cwd`` rather than to the user: it is
    inside ``cwd`` (``.mcp.json``, ``.vscode/mcp.json``, ...), and ``cwd`` is not the home
    folder (whose files, ``~/.cursor/mcp.json`` say, are the user's own)."""
    path, cwd, home = path.absolute(), cwd.absolute(), home.absolute()
    return path.is_relative_to(cwd) and cwd != home


def git_tree_of(path: Path) -> Path | None:
    """The git working tree ``path`` is in and not ignored by (None: in none, or ignored
    there); without a ``git`` program, any folder above it holding ``.git`` counts."""
    folder = path.absolute().parent
    root = next((p for p in (folder, *folder.parents) if (p / ".git").exists()), None)
    if root is None:
        return None
    git = shutil.which("git")
    if git is None:
        return root
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    ignored = subprocess.run(
        [git, "-C", str(root), "check-ignore", "-q", str(path.absolute())],
        capture_output=True,
        env=env,
        check=False,
        timeout=30,
    )
    return None if ignored.returncode == 0 else root
