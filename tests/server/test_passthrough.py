"""Which stdio lines the pass-through takes from the SDK, and what it writes back."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import anyio
import pytest
from context_broker.server.transport.passthrough import DirectCalls
from mcp_types import ErrorData

from tests.support.handshake import INITIALIZE
from tests.support.handshake import INITIALIZED as INITIALIZED_MESSAGE

INITIALIZED = json.dumps(INITIALIZED_MESSAGE).encode() + b"\n"


class FakeGateway:
    def resolve(self, name: str) -> tuple[str, str] | None:
        return ("srv", name.removeprefix("srv__")) if name.startswith("srv__") else None


class FakeSurface:
    """Answers ``srv__echo`` at once, ``srv__soon`` when the test calls its ``done``,
    ``srv__error`` with the JSON-RPC error a server sent, ``srv__log`` after two log
    messages; ``srv__far`` has no fast lane (None: the full path) and ``srv__boom`` has a
    bug."""

    def __init__(self) -> None:
        self.gateway = FakeGateway()
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.soon: list[Callable[[dict[str, Any]], None]] = []
        self.given_up: list[str] = []

    def forwards_plainly(self, name: str, arguments: dict[str, Any]) -> bool:
        return self.gateway.resolve(name) is not None

    def forward_soon(
        self,
        name: str,
        arguments: dict[str, Any],
        done: Callable[[Any], None],
        tell: Callable[[bytes], bool] | None = None,
    ) -> Callable[[str], None] | None:
        if name == "srv__far":
            return None
        if name == "srv__boom":
            raise RuntimeError("a bug")
        self.calls.append((name, arguments))
        if name == "srv__soon":
            self.soon.append(done)
        elif name == "srv__error":
            done(ErrorData(code=-32021, message="needs elicitation", data={"why": "form"}))
        else:
            if name == "srv__log":
                assert tell is not None
                for level in ("debug", "error"):
                    tell(_log_line(level))
            done({"content": [{"type": "text", "text": json.dumps(arguments)}], "isError": False})
        return self.given_up.append


def _log_line(level: str) -> bytes:
    params = {"level": level, "logger": "srv", "data": f"a {level} message"}
    return json.dumps(
        {"jsonrpc": "2.0", "method": "notifications/message", "params": params}
    ).encode()


def call(request_id: Any, name: str, **params: Any) -> bytes:
    body = {"name": name, "arguments": {"x": 1}} | params
    message = {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": body}
    return json.dumps(message).encode()


def cancel(request_id: Any) -> bytes:
    params = {"requestId": request_id, "reason": "stop"}
    message = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": params}
    return json.dumps(message).encode()


async def settle() -> None:
    for _ in range(20):
        await anyio.sleep(0)


@pytest.fixture
def wired() -> tuple[DirectCalls, FakeSurface, list[dict[str, Any]]]:
    fake = FakeSurface()
    return DirectCalls(fake), fake, []  # type: ignore[arg-type]


async def test_calls_are_taken_only_after_the_host_is_initialized(wired: Any) -> None:
    direct, fake, written = wired
    direct.start(lambda data: written.append(json.loads(data)))
    assert not direct.take(call(1, "srv__echo"))
    assert not direct.take(json.dumps(INITIALIZE).encode())
    assert not direct.take(INITIALIZED)  # the SDK sees it too
    assert direct.take(call(2, "srv__echo"))
    await settle()
    assert written == [
        {
            "jsonrpc": "2.0",
            "id": 2,
            "result": {"content": [{"type": "text", "text": '{"x": 1}'}], "isError": False},
        }
    ]
    assert fake.calls == [("srv__echo", {"x": 1})]


async def test_a_host_that_can_be_asked_gets_every_call_through_the_full_path(
    wired: Any,
) -> None:
    direct, fake, written = wired
    initialize = {
        "jsonrpc": "2.0",
        "id": 0,
        "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {"elicitation": {}}},
    }
    direct.start(lambda data: written.append(json.loads(data)))
    assert not direct.take(json.dumps(initialize).encode())
    assert not direct.take(INITIALIZED)
    assert not direct.take(call(1, "srv__echo"))  # the relay can ask this host
    await settle()
    assert written == [] and fake.calls == []


async def test_calls_needing_the_full_path_are_left_to_the_sdk(wired: Any) -> None:
    direct, fake, written = wired
    direct.start(lambda data: written.append(json.loads(data)))
    direct.take(INITIALIZED)
    assert not direct.take(call(1, "srv__echo", _meta={"session_id": "s"}))
    assert not direct.take(call(2, "srv__echo", _meta={"progressToken": 9}))
    assert not direct.take(call(3, "create_session"))  # the broker's own tools
    assert not direct.take(call(4, "srv__echo", arguments=[1, 2]))
    assert not direct.take(call(True, "srv__echo"))
    assert not direct.take(call(None, "srv__echo"))
    assert not direct.take(b'{"jsonrpc":"2.0","id":5,"method":"tools/call", broken')
    assert not direct.take(b'[{"jsonrpc":"2.0","id":6,"method":"tools/call"}]')
    assert not direct.take(call(8, "srv__far"))  # no fast lane to its server
    assert direct.take(call(7, "srv__echo", arguments=None))
    await settle()
    assert [w["id"] for w in written] == [7]
    assert fake.calls == [("srv__echo", {})]


async def test_a_call_sent_with_no_waiting_task_is_answered_when_its_answer_is_read(
    wired: Any,
) -> None:
    direct, fake, written = wired
    direct.start(lambda data: written.append(json.loads(data)))
    direct.take(INITIALIZED)
    assert direct.take(call(1, "srv__soon", arguments={"x": 2}))
    assert not direct.take(call(1, "srv__echo"))  # its id is in flight until answered
    assert written == []
    fake.soon[0]({"content": [], "isError": False})
    assert written == [{"jsonrpc": "2.0", "id": 1, "result": {"content": [], "isError": False}}]
    assert direct.take(call(1, "srv__echo"))  # answered: the id is free again
    await settle()
    assert [w["id"] for w in written] == [1, 1]
    assert fake.calls == [("srv__soon", {"x": 2}), ("srv__echo", {"x": 1})]


async def test_a_host_cancel_gives_up_a_call_sent_with_no_waiting_task(wired: Any) -> None:
    direct, fake, written = wired
    direct.start(lambda data: written.append(json.loads(data)))
    direct.take(INITIALIZED)
    assert direct.take(call("b", "srv__soon"))
    assert direct.take(cancel("b"))
    assert fake.given_up == ["cancelled by the host"]
    assert not direct.take(cancel("b"))  # nothing is in flight under that id any more
    await settle()
    assert written == []


async def test_a_failure_in_forwarding_costs_one_call_not_the_connection(wired: Any) -> None:
    direct, _, written = wired
    direct.start(lambda data: written.append(json.loads(data)))
    direct.take(INITIALIZED)
    assert direct.take(call(1, "srv__boom"))
    assert direct.take(call(2, "srv__echo"))
    await settle()
    assert written[0]["id"] == 1 and written[0]["error"]["code"] == -32603
    assert "srv__boom" in written[0]["error"]["message"]
    assert written[1]["id"] == 2 and "result" in written[1]


async def test_a_servers_json_rpc_error_is_written_as_it_sent_it(wired: Any) -> None:
    direct, _, written = wired
    direct.start(lambda data: written.append(json.loads(data)))
    direct.take(INITIALIZED)
    assert direct.take(call(3, "srv__error"))
    await settle()
    error = {"code": -32021, "message": "needs elicitation", "data": {"why": "form"}}
    assert written == [{"jsonrpc": "2.0", "id": 3, "error": error}]


async def test_log_messages_reach_the_host_before_the_answer_at_its_level(wired: Any) -> None:
    direct, _, written = wired
    set_level = {
        "jsonrpc": "2.0",
        "id": 9,
        "method": "logging/setLevel",
        "params": {"level": "warning"},
    }
    direct.start(lambda data: written.append(json.loads(data)))
    direct.take(INITIALIZED)
    assert direct.take(call(4, "srv__log"))
    assert not direct.take(json.dumps(set_level).encode())  # the SDK answers it
    assert direct.take(call(5, "srv__log"))
    await settle()
    levels = [w["params"]["level"] if "method" in w else w["id"] for w in written]
    assert levels == ["debug", "error", 4, "error", 5]
    assert written[0] == json.loads(_log_line("debug"))
