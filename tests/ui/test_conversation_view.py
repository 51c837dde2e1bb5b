"""The "View Context" modal in a real headless Chromium shows, for an item a follow-up's
earlier turn brought in, that the conversation carried it and from which turn."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ui_env import AGENT_ONLY_CONFIG, TOKEN, call_tool, http_broker


def test_the_modal_shows_that_the_conversation_carried_an_item_and_from_which_turn(
    browser: Any, tmp_path: Path, artifacts: Path
) -> None:
    (tmp_path / "broker.toml").write_text(AGENT_ONLY_CONFIG, encoding="utf-8")
    with http_broker(tmp_path / "broker.toml") as url:
        sid = call_tool(url, "create_session", {})["structuredContent"]["session_id"]

        def build(message: str) -> dict[str, Any]:
            args = {"session_id": sid, "message": message}
            return call_tool(url, "build_request_context", args)["structuredContent"]

        first = build("write parameterized SQL database queries")
        assert [i["name"] for i in first["items"]] == ["sql-safety"]
        follow = build("and the same for them again?")
        assert follow["context_turns"] == [first["request_id"]]
        assert [(i["name"], i["via"], i["turn"]) for i in follow["items"]] == [
            ("sql-safety", "conversation", first["request_id"])
        ]
        page = browser.new_page(viewport={"width": 1280, "height": 800})
        page.set_default_timeout(15_000)
        page.goto(f"{url}/ui/?token={TOKEN}")
        page.goto(f"{url}/ui/#/sessions/{sid}")
        page.locator(f'tr[data-request="{follow["request_id"]}"] button').click()
        modal = page.locator("#modal")
        modal.locator('[data-state="ready"]').wait_for()
        item = modal.locator(".cb-item", has=page.locator(".cb-name", has_text="sql-safety"))
        why = f"carried from the conversation (turn {first['request_id']})"
        assert item.locator(".cb-why").inner_text() == why
        page.screenshot(path=str(artifacts / "ui-view-context-conversation.png"), full_page=True)
        page.close()
