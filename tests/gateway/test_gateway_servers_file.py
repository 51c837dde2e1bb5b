from __future__ import annotations

import json
from pathlib import Path

import pytest
from context_broker.server.gateway import (
    ServersFileError,
    load_servers_file,
    parse_servers,
    resolve_servers,
)
from context_broker.server.settings import parse_config


def test_claude_desktop_shape_gives_stdio_servers() -> None:
    servers = parse_servers(
        {
            "mcpServers": {
                "time": {"command": "uvx", "args": ["mcp-server-time"], "env": {"TZ": "UTC"}},
                "off": {"command": "x", "disabled": True, "alwaysAllow": ["a"]},
            }
        }
    )
    assert servers["time"].kind == "stdio"
    assert servers["time"].args == ("mcp-server-time",)
    assert servers["time"].env == {"TZ": "UTC"}
    assert servers["off"].enabled is False


def test_cursor_remote_entries_with_url_and_type() -> None:
    servers = parse_servers(
        {
            "mcpServers": {
                "remote": {"url": "https://example.test/mcp", "headers": {"X-Key": "k"}},
                "legacy": {"url": "https://example.test/sse"},
                "typed": {"type": "streamable-http", "url": "https://example.test/m"},
                "forced": {"type": "sse", "url": "https://example.test/events"},
            }
        }
    )
    assert servers["remote"].kind == "http"
    assert servers["remote"].headers == {"X-Key": "k"}
    assert servers["legacy"].kind == "sse"
    assert servers["typed"].kind == "http"
    assert servers["forced"].kind == "sse"


def test_vscode_shape_with_comments_and_trailing_commas(tmp_path: Path) -> None:
    path = tmp_path / "mcp.json"
    path.write_text(
        """{
          // VS Code allows comments
          "inputs": [],
          "servers": {
            "git": {"type": "stdio", "command": "mcp-server-git", "cwd": "repo",},
            "api": {"type": "http", "url": "http://127.0.0.1:9/mcp", /* inline */},
          },
        }"""
    )
    servers = load_servers_file(path)
    assert servers["git"].kind == "stdio"
    assert servers["git"].cwd == (tmp_path / "repo").resolve()
    assert servers["api"].kind == "http"


def test_config_tables_win_over_the_servers_file_on_a_name_clash(tmp_path: Path) -> None:
    (tmp_path / "claude.json").write_text(
        json.dumps({"mcpServers": {"time": {"command": "old"}, "git": {"command": "git-srv"}}})
    )
    config = parse_config(
        {
            "mcp_servers_file": "claude.json",
            "servers": {"time": {"command": "new", "include": "agent"}},
        },
        base_dir=tmp_path,
        environ={},
    )
    servers = resolve_servers(config)
    assert sorted(servers) == ["git", "time"]
    assert servers["time"].command == "new"
    assert servers["git"].command == "git-srv"


def test_malformed_files_raise_errors_naming_the_problem(tmp_path: Path) -> None:
    with pytest.raises(ServersFileError, match="no 'mcpServers'"):
        parse_servers({"other": {}})
    with pytest.raises(ServersFileError, match="unknown type 'websocket'"):
        parse_servers({"servers": {"x": {"type": "websocket", "url": "ws://a"}}})
    with pytest.raises(ServersFileError, match="server 'both'"):
        parse_servers({"servers": {"both": {"command": "a", "url": "http://b"}}})
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(ServersFileError, match="not valid JSON"):
        load_servers_file(bad)
    with pytest.raises(ServersFileError, match="cannot read"):
        load_servers_file(tmp_path / "missing.json")


def test_a_bad_entry_error_never_echoes_its_values() -> None:
    with pytest.raises(ServersFileError) as info:
        parse_servers({"servers": {"x": {"command": "a", "env": {"TOKEN": 12345678}}}})
    assert "12345678" not in str(info.value)
