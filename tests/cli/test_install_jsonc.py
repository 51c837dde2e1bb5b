"""``context-broker install`` on the JSONC files of VS Code and Gemini CLI, as a person runs it:
comments and trailing commas are read, the entry is added by an edit in place that keeps every
other character, and when comments cannot all be kept the output says so and names the backup
that has them."""

from __future__ import annotations

import difflib
import json
from pathlib import Path
from typing import Any

import anyio
import json5
import pytest

from tests.support.broker_procs import BROKER, server_env

VSCODE = """\
// Workspace MCP servers (https://code.visualstudio.com/docs/copilot/chat/mcp-servers)
{
\t"servers": {
\t\t/* the memory server, shared by the team */
\t\t"memory": {
\t\t\t"type": "stdio",
\t\t\t"command": "npx",
\t\t\t"args": ["-y", "@modelcontextprotocol/server-memory",], // pinned later
\t\t},
\t\t// "old": {"command": "old-server"},
\t},
\t"inputs": [{"id": "token", "type": "promptString", "password": true,},],
}
"""

GEMINI = """\
{
  // my Gemini CLI settings
  "ui": {"theme": "GitHub"},
  "general": {"vimMode": true}, /* keep vim */
}
"""


def _config(folder: Path) -> None:
    (folder / "broker.toml").write_text("[search]\nsemantic = false\n", encoding="utf-8")


async def _install(cwd: Path, *args: str) -> tuple[int, str, str]:
    """``context-broker install ARGS`` run in ``cwd`` with a home of its own: (exit code,
    stdout, stderr)."""
    env = server_env()
    env["HOME"] = str(cwd / "home")
    env["XDG_CONFIG_HOME"] = str(cwd / "home" / ".config")
    with anyio.fail_after(60):
        done = await anyio.run_process([BROKER, "install", *args], cwd=cwd, env=env, check=False)
    return done.returncode, done.stdout.decode(), done.stderr.decode()


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def _only_inserted(before: str, after: str) -> bool:
    """Whether ``after`` is ``before`` with text inserted and nothing removed or changed."""
    matcher = difflib.SequenceMatcher(None, before, after, autojunk=False)
    return all(op in ("equal", "insert") for op, *_ in matcher.get_opcodes())


def _backups(path: Path) -> list[Path]:
    return sorted(path.parent.glob(f"{path.name}.*.bak"))


def _entry(tmp_path: Path, **extra: Any) -> dict[str, Any]:
    args = ["serve", "--config", str(tmp_path / "broker.toml")]
    return {**extra, "command": BROKER, "args": args}


async def test_a_vscode_file_with_comments_and_trailing_commas_keeps_them(tmp_path: Path) -> None:
    _config(tmp_path)
    target = _write(tmp_path / ".vscode" / "mcp.json", VSCODE)

    code, out, err = await _install(
        tmp_path, "--client", "vscode", "--config", "broker.toml", "--env", "TOKEN=t"
    )

    assert code == 0, err
    text = target.read_text(encoding="utf-8")
    assert _only_inserted(VSCODE, text)
    data = json5.loads(text)
    assert data["servers"]["context-broker"] == _entry(tmp_path, type="stdio", env={"TOKEN": "t"})
    assert data["servers"]["memory"]["command"] == "npx"
    assert data["inputs"][0]["id"] == "token"
    assert '\t\t"context-broker": {\n\t\t\t"type": "stdio",' in text  # the file's own tabs
    [backup] = _backups(target)
    assert backup.read_text(encoding="utf-8") == VSCODE
    assert out.startswith(f"added 'context-broker' in {target}; the previous file is kept as")
    assert "comments" not in out


async def test_a_gemini_cli_settings_file_with_comments_keeps_them(tmp_path: Path) -> None:
    _config(tmp_path)
    target = _write(tmp_path / "home" / ".gemini" / "settings.json", GEMINI)

    code, out, err = await _install(tmp_path, "--client", "gemini-cli", "--config", "broker.toml")

    assert code == 0, err
    text = target.read_text(encoding="utf-8")
    assert _only_inserted(GEMINI, text)
    data = json5.loads(text)
    assert data["mcpServers"] == {"context-broker": _entry(tmp_path)}
    assert data["ui"] == {"theme": "GitHub"} and data["general"] == {"vimMode": True}
    assert "restart Gemini CLI" in out


async def test_a_second_run_on_a_jsonc_file_changes_nothing(tmp_path: Path) -> None:
    _config(tmp_path)
    target = _write(tmp_path / ".vscode" / "mcp.json", VSCODE)
    code, _, err = await _install(tmp_path, "--client", "vscode", "--config", "broker.toml")
    assert code == 0, err
    first = target.read_text(encoding="utf-8")

    code, out, _ = await _install(tmp_path, "--client", "vscode", "--config", "broker.toml")

    assert code == 0 and "already up to date; nothing was written" in out
    assert target.read_text(encoding="utf-8") == first
    assert len(_backups(target)) == 1


async def test_a_dry_run_on_a_jsonc_file_prints_the_entry_and_writes_nothing(
    tmp_path: Path,
) -> None:
    _config(tmp_path)
    target = _write(tmp_path / ".vscode" / "mcp.json", VSCODE)

    code, out, err = await _install(
        tmp_path, "--client", "vscode", "--config", "broker.toml", "--dry-run"
    )

    assert code == 0, err
    assert json.loads(out) == {"servers": {"context-broker": _entry(tmp_path, type="stdio")}}
    assert "nothing was written" in err and "comments" not in err
    assert target.read_text(encoding="utf-8") == VSCODE
    assert _backups(target) == []


async def test_replacing_an_entry_keeps_the_comments_outside_it_and_says_what_went(
    tmp_path: Path,
) -> None:
    _config(tmp_path)
    original = (
        '{\n  // servers\n  "servers": {\n    "context-broker": {\n'
        '      // the old install\n      "command": "/old/context-broker",\n    },\n  },\n}\n'
    )
    target = _write(tmp_path / "mcp.json", original)

    code, out, err = await _install(
        tmp_path, "--client", "vscode", "--config", "broker.toml", "--path", "mcp.json"
    )

    assert code == 0, err
    text = target.read_text(encoding="utf-8")
    assert "// servers" in text and "the old install" not in text
    assert json5.loads(text) == {"servers": {"context-broker": _entry(tmp_path, type="stdio")}}
    [backup] = _backups(target)
    assert out.startswith(f"replaced 'context-broker' in {target}; some of its comments are not")
    assert f"the previous file, with them, is kept as {backup}" in out
    assert backup.read_text(encoding="utf-8") == original


async def test_a_jsonc_file_that_cannot_be_edited_in_place_is_rewritten_and_says_so(
    tmp_path: Path,
) -> None:
    _config(tmp_path)
    original = (
        "{\n  // JSON5 beyond JSONC: an unquoted key\n  servers: {'memory': {command: 'npx'}},\n}\n"
    )
    target = _write(tmp_path / "mcp.json", original)
    args = ("--client", "vscode", "--config", "broker.toml", "--path", "mcp.json")

    code, _, err = await _install(tmp_path, *args, "--dry-run")
    assert code == 0 and "some of its comments would not be kept" in err
    assert target.read_text(encoding="utf-8") == original

    code, out, err = await _install(tmp_path, *args)

    assert code == 0, err
    data = json.loads(target.read_text(encoding="utf-8"))  # plain JSON now
    assert data["servers"]["memory"] == {"command": "npx"}
    assert data["servers"]["context-broker"] == _entry(tmp_path, type="stdio")
    [backup] = _backups(target)
    said = "some of its comments are not in the new file: the previous file, with them, is kept"
    assert f"{said} as {backup}" in out
    assert backup.read_text(encoding="utf-8") == original


async def test_a_jsonc_file_of_only_comments_gets_the_entry_after_them(tmp_path: Path) -> None:
    _config(tmp_path)
    original = "// servers for this workspace go here\n"
    target = _write(tmp_path / ".vscode" / "mcp.json", original)

    code, out, err = await _install(tmp_path, "--client", "vscode", "--config", "broker.toml")

    assert code == 0, err
    text = target.read_text(encoding="utf-8")
    assert text.startswith(original)
    assert json5.loads(text) == {"servers": {"context-broker": _entry(tmp_path, type="stdio")}}
    assert "comments" not in out


async def test_a_broken_jsonc_file_is_refused_with_where_and_left_untouched(
    tmp_path: Path,
) -> None:
    _config(tmp_path)
    original = '{\n  // mine\n  "servers": {\n    "memory": {"command": "npx"}\n'
    target = _write(tmp_path / "home" / ".gemini" / "settings.json", original)

    code, out, err = await _install(tmp_path, "--client", "gemini-cli", "--config", "broker.toml")

    assert code == 2 and out == ""
    assert f"{str(target)!r} is not valid JSONC (line 5, column 1" in err
    assert "nothing was written" in err
    assert target.read_text(encoding="utf-8") == original
    assert _backups(target) == []


@pytest.mark.parametrize("client", ["claude-desktop", "cursor", "claude-code", "generic"])
async def test_a_host_that_reads_plain_json_refuses_comments_untouched(
    tmp_path: Path, client: str
) -> None:
    _config(tmp_path)
    original = '{\n  // mine\n  "mcpServers": {},\n}\n'
    target = _write(tmp_path / "host.json", original)

    code, out, err = await _install(
        tmp_path, "--client", client, "--config", "broker.toml", "--path", "host.json"
    )

    assert code == 2 and out == ""
    assert "is not valid JSON (line 2" in err and "has comments or trailing commas" in err
    assert target.read_text(encoding="utf-8") == original
    assert _backups(target) == []
