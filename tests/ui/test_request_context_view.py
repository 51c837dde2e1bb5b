"""The "View Context" modal in a real headless Chromium: on the broker's /ui/ pages over
HTTP, and as the MCP App resource inside a minimal host that speaks the Apps bridge."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from ui_env import (
    DESCRIPTIONS,
    PRIORITIES,
    TOKEN,
    call_tool,
    expected_columns,
    http_broker,
    record_turn,
    write_config,
)

HOST_PAGE = Path(__file__).parent / "host.html"
APP_URI = "ui://context-broker/request-context"


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, dict[str, Any]]]:
    folder = tmp_path_factory.mktemp("ui-broker")
    with http_broker(write_config(folder)) as url:
        yield url, record_turn(url)


def _shown(frame: Any) -> dict[str, list[tuple[str, str, str, str]]]:
    """Each column's rows as the page shows them: (label, name, badge, score)."""
    out = {}
    for column in ("rules", "references", "tools"):
        rows = []
        for item in frame.locator(f'[data-column="{column}"] .cb-item').all():
            score = item.locator(".cb-score")
            badge = item.locator(".cb-badge").inner_text()
            score_text = score.inner_text() if score.count() else ""
            rows.append(
                (
                    item.locator(".cb-label").inner_text(),
                    item.locator(".cb-name").inner_text(),
                    badge.replace(score_text, "").strip(),
                    score_text,
                )
            )
        out[column] = rows
    return out


def _descriptions(frame: Any) -> dict[str, tuple[str | None, str]]:
    items = frame.locator(".cb-item").all()
    return {
        i.locator(".cb-name").inner_text(): (
            i.get_attribute("title"),
            i.locator(".cb-desc").inner_text(),
        )
        for i in items
    }


def _check_modal(frame: Any, data: dict[str, Any]) -> None:
    items = data["recorded"]["items"]
    priorities = {**PRIORITIES}
    expected = expected_columns(items, priorities)
    shown = _shown(frame)
    assert shown == expected
    # The recorded context has all three columns, every mode, and tools with their server.
    assert expected["tools"] and all(r[0] == "ops." for r in expected["tools"])
    assert {r[2] for col in expected.values() for r in col} == {"Always", "Manual", "Agent"}
    for name, (title, below) in _descriptions(frame).items():
        assert title == below == DESCRIPTIONS[name]
    colours = {
        mode: frame.locator(f".cb-badge-{mode}").first.evaluate(
            "e => getComputedStyle(e).backgroundColor"
        )
        for mode in ("always", "manual", "agent")
    }
    assert len(set(colours.values())) == 3


def test_ui_pages_show_the_recorded_request_context_in_three_columns(
    browser: Any, recorded: tuple[str, dict[str, Any]], artifacts: Path
) -> None:
    url, data = recorded
    session_id = data["built"]["session_id"]
    context = browser.new_context(
        extra_http_headers={"Authorization": f"Bearer {TOKEN}"},
        viewport={"width": 1280, "height": 900},
    )
    page = context.new_page()
    page.set_default_timeout(15_000)
    page.goto(f"{url}/ui/")
    page.locator(f'a:has-text("{session_id}")').click()
    row = page.locator(f'tr[data-request="{data["built"]["request_id"]}"]')
    assert "deploy the service" in row.inner_text()
    assert data["built"]["summary"] in row.inner_text()
    row.locator("button", has_text="View Context").click()
    page.locator('#modal [data-state="ready"]').wait_for()
    _check_modal(page.locator("#modal"), data)
    page.screenshot(path=str(artifacts / "ui-view-context.png"), full_page=True)

    page.locator("#close").click()
    page.goto(f"{url}/ui/#/catalog")
    page.locator('tr[data-key="rule:sql-safety"]').wait_for()
    assert "Agent" in page.locator('tr[data-key="rule:sql-safety"]').inner_text()
    assert "Manual" in page.locator('tr[data-key="rule:commit-messages"]').inner_text()
    page.goto(f"{url}/ui/#/analytics")
    page.locator(".analytics svg").first.wait_for()
    assert "How often each item was selected" in page.locator(".analytics").inner_text()
    page.screenshot(path=str(artifacts / "ui-analytics.png"), full_page=True)
    context.close()


def test_ui_pages_need_the_bearer_token(browser: Any, recorded: tuple[str, dict[str, Any]]) -> None:
    url, _ = recorded
    page = browser.new_page()
    response = page.goto(f"{url}/ui/")
    assert response is not None and response.status == 401
    page.close()


def test_the_mcp_app_renders_the_same_modal_from_a_real_tool_result(
    browser: Any, recorded: tuple[str, dict[str, Any]], artifacts: Path
) -> None:
    url, data = recorded
    meta = data["tool_meta"]
    assert meta["build_request_context"] == {"ui": {"resourceUri": APP_URI}}
    assert "get_request_context" not in meta  # the default surface: what a model needs
    assert meta["ui_request_context"]["ui"]["visibility"] == ["app"]
    app = data["app"]
    assert app.mime_type == "text/html;profile=mcp-app"
    assert "<script src" not in app.text and "http://" not in app.text.split("</style>")[0]

    page = browser.new_page(viewport={"width": 1200, "height": 800})
    page.set_default_timeout(15_000)
    calls: list[str] = []

    def relay(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        calls.append(name)
        return call_tool(url, name, arguments)

    page.expose_function("callTool", relay)
    page.goto(HOST_PAGE.as_uri())
    tool_input = {"session_id": data["built"]["session_id"], "message": "deploy"}
    page.evaluate(
        "([html, input, result]) => window.startApp(html, input, result)",
        [app.text, tool_input, data["built_raw"]],
    )
    frame = page.frame_locator("#app")
    frame.locator('[data-state="ready"]').wait_for()
    _check_modal(frame.locator("body"), data)
    assert calls == ["ui_request_context"]
    log = page.evaluate("window.bridgeLog")
    assert log[:2] == ["ui/initialize", "ui/notifications/initialized"]
    page.screenshot(path=str(artifacts / "mcp-app-view-context.png"), full_page=True)
    page.close()
