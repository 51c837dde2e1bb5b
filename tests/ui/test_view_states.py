"""The modal's loading and empty states in a real headless Chromium: a request context that
selected nothing shows each column's empty state (on the /ui/ pages and as the MCP App), and
the loading state shows until the result arrives (the App in a test host holding the tool
result back; the web page while its request is held)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from ui_env import AGENT_ONLY_CONFIG as CONFIG
from ui_env import TOKEN, call_tool, http_broker, read_app

HOST_PAGE = Path(__file__).parent / "host.html"

NOTHING = "qwertyuiop zxcvbnm"


@pytest.fixture(scope="module")
def empty_turn(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, dict[str, Any]]]:
    folder = tmp_path_factory.mktemp("ui-states")
    (folder / "broker.toml").write_text(CONFIG, encoding="utf-8")
    with http_broker(folder / "broker.toml") as url:
        session = call_tool(url, "create_session", {})["structuredContent"]
        built = call_tool(
            url, "build_request_context", {"session_id": session["session_id"], "message": NOTHING}
        )
        assert built["structuredContent"]["items"] == []
        yield url, built


def _check_empty_columns(root: Any) -> None:
    for column, title in (("rules", "rules"), ("references", "references"), ("tools", "tools")):
        col = root.locator(f'[data-column="{column}"]')
        assert col.locator(".cb-item").count() == 0
        assert col.locator(".cb-count").inner_text() == "0"
        assert col.locator(".cb-empty").inner_text() == f"No {title} in this request"
    assert "No rules, references or tools were selected" in root.inner_text()


def test_a_request_that_selected_nothing_shows_each_columns_empty_state_on_the_pages(
    browser: Any, empty_turn: tuple[str, dict[str, Any]], artifacts: Path
) -> None:
    url, built = empty_turn
    sc = built["structuredContent"]
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    page = context.new_page()
    page.set_default_timeout(15_000)
    page.goto(f"{url}/ui/?token={TOKEN}")

    seen_while_held: list[str] = []

    def hold(route: Any) -> None:
        # The modal's request is held here: what the modal shows meanwhile.
        seen_while_held.append(page.locator("#modal").inner_text())
        assert page.locator('#modal [data-state="loading"]').count() == 1
        route.continue_()

    page.route("**/ui/api/sessions/*/requests/*", hold)
    page.goto(f"{url}/ui/#/sessions/{sc['session_id']}")
    page.locator(f'tr[data-request="{sc["request_id"]}"] button').click()
    page.locator('#modal [data-state="ready"]').wait_for()
    assert seen_while_held == ["Loading the request context…"]
    _check_empty_columns(page.locator("#modal"))
    page.screenshot(path=str(artifacts / "ui-view-context-empty.png"), full_page=True)
    context.close()


def test_the_mcp_app_shows_loading_until_the_result_arrives_then_the_empty_columns(
    browser: Any, empty_turn: tuple[str, dict[str, Any]], artifacts: Path
) -> None:
    url, built = empty_turn
    app = read_app(url)
    page = browser.new_page(viewport={"width": 1200, "height": 700})
    page.set_default_timeout(15_000)
    page.expose_function("callTool", lambda name, arguments: call_tool(url, name, arguments))
    page.goto(HOST_PAGE.as_uri())
    tool_input = {"session_id": built["structuredContent"]["session_id"], "message": NOTHING}
    page.evaluate(
        "([html, input, result]) => window.startApp(html, input, result, true)",
        [app.text, tool_input, built],
    )
    frame = page.frame_locator("#app")
    loading = frame.locator('[data-state="loading"]')
    loading.filter(has_text="Choosing the context for this message").wait_for()
    assert frame.locator('[data-state="ready"]').count() == 0
    page.screenshot(path=str(artifacts / "mcp-app-loading.png"))

    page.evaluate("window.releaseResult()")
    frame.locator('[data-state="ready"]').wait_for()
    _check_empty_columns(frame.locator("body"))
    page.screenshot(path=str(artifacts / "mcp-app-empty.png"), full_page=True)
    page.close()
