"""The "View Context" modal in a real headless Chromium shows the plan a host sent with a
request and, for each item a step brought, which step that was."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ui_env import AGENT_ONLY_CONFIG as CONFIG
from ui_env import TOKEN, call_tool, http_broker

PLAN = ["write parameterized SQL database queries", "deploy the service with the release script"]


def test_the_modal_shows_the_plan_and_the_step_behind_each_item(
    browser: Any, tmp_path: Path, artifacts: Path
) -> None:
    (tmp_path / "broker.toml").write_text(CONFIG, encoding="utf-8")
    with http_broker(tmp_path / "broker.toml") as url:
        sid = call_tool(url, "create_session", {})["structuredContent"]["session_id"]
        built = call_tool(
            url,
            "build_request_context",
            {"session_id": sid, "message": "ship the orders change", "intents": PLAN},
        )["structuredContent"]
        steps = {i["name"]: i["intent"] for i in built["items"]}
        assert steps == {"sql-safety": PLAN[0], "deploy-guide": PLAN[1]}
        page = browser.new_page(viewport={"width": 1280, "height": 800})
        page.set_default_timeout(15_000)
        page.goto(f"{url}/ui/?token={TOKEN}")
        page.goto(f"{url}/ui/#/sessions/{sid}")
        page.locator(f'tr[data-request="{built["request_id"]}"] button').click()
        modal = page.locator("#modal")
        modal.locator('[data-state="ready"]').wait_for()
        assert modal.locator('[data-role="plan"] li').all_inner_texts() == PLAN
        for name, step in steps.items():
            item = modal.locator(".cb-item", has=page.locator(".cb-name", has_text=name))
            assert item.locator(".cb-why").inner_text() == f"for step: {step}"
        page.screenshot(path=str(artifacts / "ui-view-context-plan.png"), full_page=True)
        page.close()
