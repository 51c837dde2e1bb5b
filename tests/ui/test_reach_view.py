"""The "View Context" modal in a real headless Chromium shows, below the three columns, the
further tools a request context named one line each, and why each is within reach."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ui_env import TOKEN, call_tool, http_broker

TOOLS = {
    "convert_to_pdf": "Convert a document to a PDF file.",
    "create_document": "Create a new empty document.",
    "add_paragraph": "Add a paragraph of text to a document.",
    "add_picture": "Insert a picture into a document.",
}


def config(folder: Path) -> Path:
    catalog = {
        "servers": {
            "office": {
                "include": "agent",
                "tools": [
                    {"name": n, "description": d, "inputSchema": {"type": "object"}}
                    for n, d in TOOLS.items()
                ],
            }
        }
    }
    (folder / "catalog.json").write_text(json.dumps(catalog), encoding="utf-8")
    path = folder / "broker.toml"
    path.write_text(
        '[search]\nsemantic = false\n[sources]\ncatalog_files = ["catalog.json"]\n'
        f'[server.http]\nauth_token = "{TOKEN}"\n',
        encoding="utf-8",
    )
    return path


def test_the_modal_lists_the_tools_within_reach_and_why(
    browser: Any, tmp_path: Path, artifacts: Path
) -> None:
    with http_broker(config(tmp_path)) as url:
        built = call_tool(
            url, "build_request_context", {"message": "convert the document to PDF", "top_n": 1}
        )["structuredContent"]
        assert [i["name"] for i in built["items"]] == ["convert_to_pdf"]
        reach = {c["name"]: c["via"] for c in built["candidates"]}
        assert set(reach) == set(TOOLS) - {"convert_to_pdf"}
        assert set(reach.values()) == {"server"}
        page = browser.new_page(viewport={"width": 1280, "height": 800})
        page.set_default_timeout(15_000)
        page.goto(f"{url}/ui/?token={TOKEN}")
        page.goto(f"{url}/ui/#/sessions/{built['session_id']}")
        page.locator(f'tr[data-request="{built["request_id"]}"] button').click()
        modal = page.locator("#modal")
        modal.locator('[data-state="ready"]').wait_for()
        section = modal.locator('[data-role="within-reach"]')
        assert sorted(section.locator(".cb-name").all_inner_texts()) == sorted(reach)
        assert set(section.locator(".cb-why").all_inner_texts()) == {
            "another tool of a server chosen"
        }
        tools = modal.locator('[data-column="tools"] .cb-name').all_inner_texts()
        assert tools == ["convert_to_pdf"]
        page.screenshot(path=str(artifacts / "ui-view-context-reach.png"), full_page=True)
        page.close()
