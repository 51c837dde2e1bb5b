"""The viewer shows a program run with run_code after a request: on the broker's /ui/ pages
over HTTP in a real headless Chromium, with its code, the calls it made and its answer."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from ui_env import TOKEN, _in_thread, http_broker

RECORDS = Path(__file__).resolve().parents[1] / "code_mode" / "fixtures" / "records_server.py"
PROGRAM = """orders = (await records__list_orders(country="DK"))["orders"]
top = max(orders, key=lambda o: o["amount"])
order = await records__get_order(order_id=top["order_id"])
order["customer"]"""


def _config(folder: Path) -> Path:
    path = folder / "broker.toml"
    path.write_text(
        f"""
[search]
semantic = false

[server.http]
auth_token = "{TOKEN}"

[servers.records]
command = {json.dumps(sys.executable)}
args = [{json.dumps(str(RECORDS))}]
""",
        encoding="utf-8",
    )
    return path


async def _turn_and_run(url: str) -> dict[str, Any]:
    headers = {"Authorization": f"Bearer {TOKEN}"}
    async with (
        httpx.AsyncClient(headers=headers, timeout=30) as http,
        Client(streamable_http_client(f"{url}/mcp", http_client=http)) as client,
    ):
        built = await client.call_tool(
            "build_request_context", {"message": "who placed the largest Danish order?"}
        )
        assert isinstance(built.structured_content, dict)
        sid = built.structured_content["session_id"]
        ran = await client.call_tool("run_code", {"code": PROGRAM, "session_id": sid})
        assert not ran.is_error, ran.content
        return {**built.structured_content, "answer": ran.content[0].text.splitlines()[0]}  # type: ignore[union-attr]


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, dict[str, Any]]]:
    with http_broker(_config(tmp_path_factory.mktemp("code-ui"))) as url:
        out: list[dict[str, Any]] = []

        async def run() -> None:
            with anyio.fail_after(60):
                out.append(await _turn_and_run(url))

        _in_thread(run, 70)
        assert out, "the turn and the run did not finish"
        yield url, out[0]


def test_the_view_of_a_request_shows_the_program_run_after_it_with_its_calls_and_answer(
    browser: Any, served: tuple[str, dict[str, Any]], artifacts: Path
) -> None:
    url, data = served
    assert data["answer"] == "Customer 164 of DK"
    context = browser.new_context(extra_http_headers={"Authorization": f"Bearer {TOKEN}"})
    page = context.new_page()
    page.set_default_timeout(15_000)
    page.goto(f"{url}/ui/")
    page.locator(f'a:has-text("{data["session_id"]}")').click()
    page.locator(f'tr[data-request="{data["request_id"]}"] button', has_text="View Context").click()
    runs = page.locator('#modal [data-role="code-runs"]')
    runs.wait_for()
    assert "Code runs after this request" in runs.locator("h3").inner_text()
    (run,) = runs.locator(".cb-run").all()
    assert run.get_attribute("data-state") == "answered"
    assert run.locator(".cb-code").inner_text() == PROGRAM
    assert run.locator(".cb-call").all_inner_texts() == [
        "records/list_orders",
        "records/get_order",
    ]
    assert "Customer 164 of DK" in run.locator(".cb-answer").inner_text()
    page.screenshot(path=str(artifacts / "ui-code-run.png"), full_page=True)
    context.close()
