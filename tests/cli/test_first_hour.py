"""A user's first hour (issue 36): errors that say the fix, in one line, through the real
``context-broker`` command and server."""

from __future__ import annotations

import socket
import subprocess
from pathlib import Path

import anyio
import httpx
from context_broker.server.host.mcp_server import build_server
from context_broker.server.parts import build_parts
from context_broker.server.settings import load_config
from mcp import Client

from tests.support.broker_procs import BROKER, running_broker, server_env, write_config
from tests.support.hash_embedder import HashEmbedder


def _run(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [BROKER, *args], capture_output=True, text=True, timeout=120, env=server_env(), cwd=cwd
    )


def test_a_port_in_use_is_one_line_not_a_traceback(tmp_path: Path) -> None:
    config = write_config(tmp_path)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = _run("serve", "--config", str(config), "--transport", "http", "--port", str(port))
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr and "ExceptionGroup" not in done.stderr, done.stderr
    last = done.stderr.strip().splitlines()[-1]
    assert last == (
        f"context-broker: error: cannot listen on 127.0.0.1:{port}: Address already in use; "
        "choose another --port"
    )


def test_a_missing_downstream_command_says_where_it_was_looked_for(tmp_path: Path) -> None:
    servers = (
        "\n[gateway]\nstartup_budget = 5\n"
        '[servers.ghost]\ncommand = "mcp-server-nowhere-to-be-found"\n'
        '[servers.local]\ncommand = "./bin/mcp-server-local"\n'
    )
    config = write_config(tmp_path, extra=servers)
    done = _run("check", "--config", str(config), cwd=tmp_path)
    assert done.returncode == 2
    assert "OK" not in done.stdout.splitlines()[0], done.stdout  # it fails, it never says OK
    ghost = next(line for line in done.stdout.splitlines() if "server ghost" in line)
    local = next(line for line in done.stdout.splitlines() if "server local" in line)
    assert "'mcp-server-nowhere-to-be-found' is not on the PATH it runs with" in ghost
    assert "give its absolute path" in ghost and "FileNotFoundError" not in ghost
    assert f"'{tmp_path}/bin/mcp-server-local' does not exist; give the right path" in local


def test_a_misspelt_key_or_table_gets_a_suggestion(tmp_path: Path) -> None:
    config = tmp_path / "broker.toml"
    config.write_text(
        '[server.time]\ncommand = "x"\n[serach]\nmode = "dense"\n[search]\ntop_nn = 3\n',
        encoding="utf-8",
    )
    done = _run("check", "--config", str(config))
    assert done.returncode != 0
    said = done.stdout + done.stderr
    assert "unknown key 'server.time'; did you mean [servers.time]?" in said
    assert "unknown key 'serach'; did you mean [search]?" in said
    assert "unknown key 'search.top_nn'; did you mean 'top_n'?" in said


async def test_a_missing_session_id_says_how_to_get_one(tmp_path: Path) -> None:
    config = load_config(write_config(tmp_path), environ={})
    parts = build_parts(config, embedder=HashEmbedder())
    async with Client(build_server(parts.broker)) as client:
        result = await client.call_tool("list_turns", {})
    assert result.is_error
    text = result.content[0].text  # type: ignore[union-attr]
    assert "session_id: required argument is missing; call create_session" in text


async def test_a_refused_request_names_the_variable_the_token_comes_from(
    tmp_path: Path,
) -> None:
    http = '\n[server.http]\nauth_token_env = "TEAM_BROKER_TOKEN"\n'
    config = write_config(tmp_path, extra=http)
    env = server_env() | {"TEAM_BROKER_TOKEN": "s3cret-token-value"}
    async with (
        running_broker(config, "http", env=env) as (url, _),
        httpx.AsyncClient(trust_env=False) as client,
    ):
        with anyio.fail_after(20):
            refused = await client.post(f"{url}/mcp", json={})
    assert refused.status_code == 401
    assert "the environment variable TEAM_BROKER_TOKEN" in refused.text
    assert "s3cret" not in refused.text


def test_an_unreachable_postgresql_store_is_said_on_one_line(tmp_path: Path) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]  # closed again: nothing listens there
    store = (
        f'\n[persistence]\nbackend = "postgres"\nurl = "postgresql://u:pw@127.0.0.1:{port}/db"\n'
    )
    config = tmp_path / "broker.toml"
    config.write_text("[search]\nsemantic = false\n" + store, encoding="utf-8")
    done = _run("check", "--config", str(config))
    said = done.stdout + done.stderr
    line = next(x for x in said.splitlines() if "PostgreSQL session store" in x)
    assert "\\n" not in line and "\\t" not in line and "pw" not in line, line
    assert "Is the server running" in line or "Connection refused" in line, line


def test_the_gateway_pages_example_server_runs_after_the_serving_setup(tmp_path: Path) -> None:
    """docs/gateway.md's first example starts ``.venv/bin/mcp-server-time``, which
    scripts/setup.sh installs: in a config beside the checkout's .venv, ``check`` started in
    any folder connects to it (a relative command is read from the config's folder)."""
    root = Path(__file__).resolve().parents[2]
    page = (root / "docs" / "gateway.md").read_text(encoding="utf-8")
    example = page.split("```toml\n", 1)[1].split("```", 1)[0]
    assert 'command = ".venv/bin/mcp-server-time"' in example
    remote = example.index("[servers.remote]")
    (tmp_path / ".venv").symlink_to(root / ".venv")  # the config is read beside a checkout
    config = tmp_path / "broker.toml"
    config.write_text("[search]\nsemantic = false\n" + example[:remote], encoding="utf-8")
    assert "mcp-server-time" in (root / "scripts" / "setup.sh").read_text(encoding="utf-8")
    done = _run("check", "--config", str(config), cwd=Path("/"))
    line = next(x for x in done.stdout.splitlines() if x.startswith("server time"))
    assert "connected, 2 tools" in line, done.stdout + done.stderr


async def test_the_two_server_example_selects_per_request(tmp_path: Path) -> None:
    """examples/two-servers.toml runs on the serving setup alone, started in another folder
    than the repository (as a host starts it): each request gets the tools of its own
    server, small talk none."""
    from mcp import StdioServerParameters

    from tests.support.mcp_calls import call

    root = Path(__file__).resolve().parents[2]
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    params = StdioServerParameters(
        command=BROKER,
        args=["serve", "--config", str(root / "examples" / "two-servers.toml")],
        env=server_env() | {"HOME": str(tmp_path)},
        cwd=str(elsewhere),
    )

    async def chosen(client: Client, message: str) -> set[str]:
        built = await call(client, "build_request_context", message=message)
        return {i["name"] for i in built["items"] if i["include_mode"] == "agent"}

    async with Client(params) as client:
        with anyio.fail_after(60):
            while len((await call(client, "list_servers"))["servers"]) < 2 or not all(
                s["state"] == "connected" for s in (await call(client, "list_servers"))["servers"]
            ):
                await anyio.sleep(0.2)
            time = await chosen(client, "What time is it in Tokyo right now?")
            notes = await chosen(client, "Save a note titled groceries: eggs and milk")
            talk = await chosen(client, "thanks, that's all")
    assert "get_current_time" in time and not time & {"add_note", "list_notes"}
    assert "add_note" in notes and "get_current_time" not in notes
    assert talk == set()


def test_the_hosts_pages_inspector_line_runs_as_printed_without_the_venv_on_path() -> None:
    """docs/hosts.md's MCP Inspector CLI line, run by a shell from the repository after the
    line that names the test setup's Node 24, with neither the venv nor that Node on PATH
    (the machine's own Node first), lists the broker's tools."""
    from tests.docs.test_commands import bare_path

    root = Path(__file__).resolve().parents[2]
    page = (root / "docs" / "hosts.md").read_text(encoding="utf-8")
    section = page.split("## MCP Inspector", 1)[1].split("```sh\n", 1)[1].split("```", 1)[0]
    (node,) = [x for x in section.splitlines() if x.startswith("NODE=")]
    (line,) = [x for x in section.splitlines() if "--cli .venv/bin/context-broker" in x]
    env = {"PATH": bare_path(), "HOME": server_env().get("HOME", "/root"), "LANG": "C.UTF-8"}
    done = subprocess.run(
        ["/bin/sh", "-c", f"{node}\n{line}"],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        cwd=root,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert '"build_request_context"' in done.stdout, done.stdout[-2000:]
