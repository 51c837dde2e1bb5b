"""What a host's model reads: a scripted host that, like Claude Desktop, sees only tool lists
and the text content of tool results, driving the broker over stdio in front of the real
downstream servers (mcp-server-time, mcp-server-git, server-everything, server-filesystem,
server-memory) with the real embedding model."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client, StdioServerParameters

from tests.support.polling import eventually

pytestmark = pytest.mark.model

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
BROKER = str(BIN / "context-broker")
NODE_BIN = ROOT / "tests" / "downstream" / "node_modules" / ".bin"
LATE = Path(__file__).parent / "fixtures" / "late_tools.py"

HANDBOOK = "\n\n".join(
    f"Section {i}. The orders service keeps invoices for seven years; refunds go through "
    f"the payments queue and are reconciled nightly (paragraph {i})."
    for i in range(400)
)


def five_servers(tmp: Path) -> str:
    (tmp / "files").mkdir()
    return f"""
[servers.time]
command = "{BIN / "mcp-server-time"}"
include = "agent"

[servers.git]
command = "{BIN / "mcp-server-git"}"
args = ["--repository", "{ROOT}"]
include = "agent"

[servers.everything]
command = "{NODE_BIN / "mcp-server-everything"}"
include = "agent"

[servers.filesystem]
command = "{NODE_BIN / "mcp-server-filesystem"}"
args = ["{tmp / "files"}"]
include = "agent"

[servers.memory]
command = "{NODE_BIN / "mcp-server-memory"}"
env = {{ MEMORY_FILE_PATH = "{tmp / "memory.jsonl"}" }}
include = "agent"
"""


def write_config(tmp: Path, servers: str, *, budget: float = 20.0) -> Path:
    (tmp / "handbook.md").write_text(HANDBOOK, encoding="utf-8")
    text = f"""
[server]
relist_selected = true

[search]
semantic = true

[gateway]
startup_budget = {budget}

[[rules]]
name = "timezones"
description = "Answering questions about the current time or time zones"
text = "Always state the IANA time zone you used, such as Asia/Tokyo."
include = "agent"

[[rules]]
name = "house-style"
description = "How to write answers"
text = "Answer in British English and keep answers under 200 words."
include = "always"
priority = 10

[[references]]
name = "orders-handbook"
description = "The orders service handbook"
text = '''{HANDBOOK}'''
include = "always"
{servers}
"""
    path = tmp / "broker.toml"
    path.write_text(text, encoding="utf-8")
    return path


def host(config: Path, **kwargs: Any) -> Client:
    params = StdioServerParameters(command=BROKER, args=["serve", "--config", str(config)])
    return Client(params, mode="legacy", **kwargs)


def text_of(result: Any) -> str:
    """All a host like Claude Desktop shows its model of a tool result."""
    return "".join(getattr(block, "text", "") for block in result.content)


async def call_text(client: Client, name: str, **arguments: Any) -> tuple[str, bool]:
    with anyio.fail_after(60):
        result = await client.call_tool(name, arguments)
    return text_of(result), bool(result.is_error)


async def new_session(client: Client) -> str:
    text, failed = await call_text(client, "create_session")
    assert not failed, text
    match = re.search(r"(?<![A-Za-z0-9_-])s_[A-Za-z0-9_-]{32}", text)
    assert match, text
    return match.group(0)


def tool_block(text: str, tool: str) -> tuple[str, str, dict[str, Any]]:
    """From the text alone: the name to call, the server and the input schema of ``tool``."""
    pattern = rf"### (\S+) \(server (\S+), tool {re.escape(tool)}\).*?\nInput schema: (\{{.*\}})\n?"
    match = re.search(pattern, text, flags=re.S)
    assert match, f"no block for {tool!r} in:\n{text}"
    schema_line = match.group(3).split("\n", 1)[0]
    return match.group(1), match.group(2), json.loads(schema_line)


def arguments_for(schema: dict[str, Any]) -> dict[str, Any]:
    """What a model would fill in for the time question, guided only by the schema."""
    values: dict[str, Any] = {}
    for name in schema.get("required", []):
        kind = schema["properties"][name].get("type")
        if "timezone" in name:
            values[name] = "Asia/Tokyo"
        elif kind == "string":
            values[name] = "x"
        elif kind in ("integer", "number"):
            values[name] = 1
    return values


def agent_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if "— agent" in line]


async def test_the_time_question_gives_the_model_a_tool_it_can_call_from_the_text_alone(
    tmp_path: Path,
) -> None:
    heard: list[anyio.Event] = [anyio.Event()]

    async def on_message(message: Any) -> None:
        if getattr(message, "method", None) == "notifications/tools/list_changed":
            heard[-1].set()

    config = write_config(tmp_path, five_servers(tmp_path))
    with anyio.fail_after(180):
        async with host(config, message_handler=on_message) as client:
            before = {t.name for t in (await client.list_tools()).tools}
            assert "time__get_current_time" not in before  # agent mode: not listed up front
            sid = await new_session(client)
            text, failed = await call_text(
                client, "build_request_context", session_id=sid, message="What time is it in Tokyo?"
            )
            assert not failed, text
            name, server, schema = tool_block(text, "get_current_time")
            assert (name, server) == ("time__get_current_time", "time")
            assert "timezone" in schema["required"]
            arguments = arguments_for(schema)
            answer, failed = await call_text(
                client, "call_tool", server=server, tool="get_current_time", arguments=arguments
            )
            assert not failed and "Asia/Tokyo" in answer, answer

            # The host re-lists on each tools/list_changed; one comes after the request
            # context selected the tool, and from then on the host's list has it.
            listed = before
            while name not in listed:
                await heard[-1].wait()
                heard.append(anyio.Event())
                listed = {t.name for t in (await client.list_tools()).tools}
            direct, failed = await call_text(client, name, **arguments)
            assert not failed and "Asia/Tokyo" in direct, direct


async def test_rule_text_reaches_the_model_and_a_reference_over_the_budget_is_named_with_how_to_fetch_it(  # noqa: E501
    tmp_path: Path,
) -> None:
    config = write_config(tmp_path, "")
    with anyio.fail_after(120):
        async with host(config) as client:
            sid = await new_session(client)
            text, failed = await call_text(
                client,
                "build_request_context",
                session_id=sid,
                message="Which time zone should I use for the Tokyo office clock?",
            )
            assert not failed, text
            assert "Answer in British English and keep answers under 200 words." in text
            assert "Always state the IANA time zone you used" in text
            assert "Section 0. The orders service" not in text  # 10,000 tokens: over budget
            assert "## Not included (over the 4,000-token budget)" in text
            assert 'get_context_items(keys=["reference:orders-handbook"])' in text
            assert len(text) / 4 <= 4000

            fetched, failed = await call_text(
                client, "get_context_items", keys=["reference:orders-handbook"]
            )
            assert not failed and "Section 399. The orders service" in fetched

            small, _ = await call_text(
                client,
                "build_request_context",
                session_id=sid,
                message="Which time zone should I use?",
                max_context_tokens=20_000,
            )
            assert "Section 399. The orders service" in small and "Not included" not in small


@pytest.mark.parametrize("message", ["xyzzy plugh", "tell me a joke about penguins"])
async def test_off_topic_messages_select_no_agent_item(tmp_path: Path, message: str) -> None:
    config = write_config(tmp_path, five_servers(tmp_path))
    with anyio.fail_after(180):
        async with host(config) as client:
            sid = await new_session(client)
            text, failed = await call_text(
                client, "build_request_context", session_id=sid, message=message
            )
            assert not failed, text
            assert agent_lines(text) == [], text
            assert "house-style" in text  # the always items are still there

            relevant, _ = await call_text(
                client,
                "build_request_context",
                session_id=sid,
                message="What time is it in Tokyo right now?",
            )
            chosen = agent_lines(relevant)
            assert any("get_current_time" in line for line in chosen), relevant
            assert not any(re.search(r"\bgit__", line) for line in chosen), relevant


async def test_the_context_prompt_gives_system_messages_then_the_user_message(
    tmp_path: Path,
) -> None:
    config = write_config(tmp_path, "")
    with anyio.fail_after(120):
        async with host(config) as client:
            listed = [p.name for p in (await client.list_prompts()).prompts]
            assert "context" in listed
            result = await client.get_prompt(
                "context", {"message": "What time zone is Tokyo in, for the office clock?"}
            )
            texts = [m.content.text for m in result.messages]  # type: ignore[union-attr]
            roles = result.meta["context-broker/roles"]  # type: ignore[index]
            assert roles[-1] == "user" and set(roles[:-1]) == {"system"}
            assert texts[-1] == "What time zone is Tokyo in, for the office clock?"
            system = "\n".join(texts[:-1])
            assert all(t.startswith("System:\n") for t in texts[:-1])
            assert "Always state the IANA time zone you used" in system  # agent rule
            assert "Answer in British English" in system  # always rule
            assert "Section 399. The orders service" in system  # always reference


async def test_a_session_created_while_servers_connect_gets_the_always_tool_once_it_arrives(
    tmp_path: Path,
) -> None:
    late = f"""
[servers.late]
command = "{sys.executable}"
args = ["{LATE}"]
env = {{ LATE_SECONDS = "4" }}
include = "always"
"""
    config = write_config(tmp_path, late, budget=0.5)
    with anyio.fail_after(120):
        async with host(config) as client:
            sid = await new_session(client)
            listed, _ = await call_text(client, "list_session_context", session_id=sid)
            assert "late/ping" not in listed
            early, failed = await call_text(
                client, "build_request_context", session_id=sid, message="ping the late server"
            )
            assert not failed
            assert "still connecting" in early and "late" in early, early

            async def late_listed() -> bool:  # polling what a host would see
                listed, _ = await call_text(client, "list_session_context", session_id=sid)
                return "late/ping" in listed

            await eventually(late_listed, within=60, every=0.2)
            later, _ = await call_text(
                client, "build_request_context", session_id=sid, message="ping the late server"
            )
            assert "still connecting" not in later
            assert "late__ping" in later


async def test_call_tool_with_arguments_that_break_the_schema_is_refused_quoting_it(
    tmp_path: Path,
) -> None:
    log = tmp_path / "calls.log"
    late = f"""
[servers.late]
command = "{sys.executable}"
args = ["{LATE}"]
env = {{ CALL_LOG = "{log}" }}
include = "agent"
"""
    config = write_config(tmp_path, late)
    with anyio.fail_after(120):
        async with host(config) as client:
            bad, failed = await call_text(
                client,
                "call_tool",
                server="late",
                tool="ping",
                arguments={"count": "three", "extra": 1},
            )
            assert failed
            assert "do not match its input schema" in bad
            assert "'three' is not of type 'integer'" in bad
            assert "'label' is a required property" in bad
            assert '"required":["count","label"]' in bad.replace(" ", "")
            assert not log.exists()  # nothing was forwarded

            good, failed = await call_text(
                client,
                "call_tool",
                server="late",
                tool="ping",
                arguments={"count": 3, "label": "ok"},
            )
            assert not failed and "pong ok x3" in good
            assert log.read_text(encoding="utf-8") == "ok\n"


PLAN = [
    "read a text file",
    "get the current time in a time zone",
    "store a fact about a person in a knowledge graph",
]


async def test_a_planned_multi_step_request_finds_a_tool_for_each_step_from_the_text_alone(
    tmp_path: Path,
) -> None:
    config = write_config(tmp_path, five_servers(tmp_path))
    message = (
        "Open notes/team.txt, tell me what time it is for Aiko in Tokyo, and remember that "
        "Aiko leads the design team."
    )
    with anyio.fail_after(180):
        async with host(config) as client:
            listed = {t.name: t for t in (await client.list_tools()).tools}
            described = listed["build_request_context"].input_schema["properties"]["intents"]
            assert "one step per action" in described["description"]
            assert "without guessing tool names" in described["description"]
            sid = await new_session(client)
            text, failed = await call_text(
                client, "build_request_context", session_id=sid, message=message, intents=PLAN
            )
            assert not failed, text
            assert "Plan searched: 1. read a text file; 2. get the current time" in text
            chosen = "\n".join(agent_lines(text))
            # Each step's tool is there, callable by the name the text gives, naming its step.
            assert re.search(r"filesystem__read_\w*file \(.*step 1", chosen), chosen
            assert re.search(r"time__get_current_time \(.*step 2", chosen), chosen
            assert re.search(r"memory__(create_entities|add_observations) \(.*step 3", chosen)

            # An off-topic step adds nothing: the same selection as without it.
            noisy, failed = await call_text(
                client,
                "build_request_context",
                session_id=sid,
                message=message,
                intents=[*PLAN, "bake a sourdough loaf"],
            )
            assert not failed, noisy
            assert sorted(agent_lines(noisy)) == sorted(agent_lines(text))
