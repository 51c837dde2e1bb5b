"""A person opens ``/ui/`` of a broker with a bearer token in a plain browser: the login page
without the token, refusal of a wrong one, and with the right one a ``/ui``-only cookie (never
the token itself) that lets the pages load in real Chromium with no header added; the cookie
does not open ``/mcp``, and the Host/Origin checks still apply."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from ui_env import TOKEN, http_broker, record_turn, write_config

from tests.support.handshake import INITIALIZE

COOKIE = "context_broker_ui"
MCP_HEADERS = {"Accept": "application/json, text/event-stream"}


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, dict[str, Any]]]:
    folder = tmp_path_factory.mktemp("ui-login")
    with http_broker(write_config(folder)) as url:
        yield url, record_turn(url)


def _signed_in_cookie(url: str) -> str:
    with httpx.Client(timeout=10) as http:
        response = http.get(f"{url}/ui/", params={"token": TOKEN})
    assert response.status_code == 303 and response.headers["location"] == "/ui/"
    return response.cookies[COOKIE]


def test_without_the_token_a_browser_gets_the_login_page(
    browser: Any, recorded: tuple[str, dict[str, Any]]
) -> None:
    url, _ = recorded
    page = browser.new_page()
    page.set_default_timeout(15_000)
    response = page.goto(f"{url}/ui/")
    assert response is not None and response.status == 401
    assert page.locator('form[method="post"] input#token[type="password"]').is_visible()
    assert page.locator(".error").count() == 0
    page.close()
    with httpx.Client(timeout=10) as http:
        api = http.get(f"{url}/ui/api/sessions")
    assert api.status_code == 401 and "bearer token" in api.json()["error"]["message"]


def test_a_wrong_token_is_refused_and_sets_no_cookie(
    browser: Any, recorded: tuple[str, dict[str, Any]]
) -> None:
    url, _ = recorded
    context = browser.new_context()
    page = context.new_page()
    page.set_default_timeout(15_000)
    response = page.goto(f"{url}/ui/?token=not-the-token")
    assert response is not None and response.status == 401
    assert "not right" in page.locator(".error").inner_text()
    page.fill("#token", "still-wrong")
    with page.expect_navigation():
        page.click('button[type="submit"]')
    assert "not right" in page.locator(".error").inner_text()
    assert context.cookies() == []
    context.close()


def test_the_right_token_signs_in_and_the_pages_load_with_no_header(
    browser: Any, recorded: tuple[str, dict[str, Any]]
) -> None:
    url, data = recorded
    session_id = data["built"]["session_id"]
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    page.set_default_timeout(15_000)
    response = page.goto(f"{url}/ui/?token={TOKEN}")
    assert response is not None and response.status == 200
    assert page.url == f"{url}/ui/"  # the token left the address bar
    (cookie,) = context.cookies()
    assert cookie["name"] == COOKIE and cookie["path"] == "/ui"
    assert cookie["httpOnly"] and cookie["sameSite"] == "Strict"
    assert TOKEN not in cookie["value"]
    assert page.evaluate("document.cookie") == ""  # HttpOnly: no script reads it

    page.locator(f'a:has-text("{session_id}")').click()
    page.locator(f'tr[data-request="{data["built"]["request_id"]}"] button').click()
    page.locator('#modal [data-state="ready"]').wait_for()
    assert page.locator('#modal [data-column="rules"] .cb-item').count() > 0
    page.goto(f"{url}/ui/#/catalog")
    page.locator('tr[data-key="rule:sql-safety"]').wait_for()
    context.close()


def test_the_login_form_signs_in(browser: Any, recorded: tuple[str, dict[str, Any]]) -> None:
    url, data = recorded
    context = browser.new_context()
    page = context.new_page()
    page.set_default_timeout(15_000)
    page.goto(f"{url}/ui/")
    page.fill("#token", TOKEN)
    with page.expect_navigation():
        page.click('button[type="submit"]')
    assert page.url == f"{url}/ui/"
    page.locator(f'a:has-text("{data["built"]["session_id"]}")').wait_for()
    context.close()


def test_the_ui_cookie_does_not_open_mcp_or_metrics(recorded: tuple[str, dict[str, Any]]) -> None:
    url, _ = recorded
    cookie = _signed_in_cookie(url)
    assert cookie != TOKEN
    jar = {"Cookie": f"{COOKIE}={cookie}"}
    with httpx.Client(timeout=10) as http:
        assert http.get(f"{url}/ui/api/sessions", headers=jar).status_code == 200
        mcp = http.post(f"{url}/mcp", json=INITIALIZE, headers={**MCP_HEADERS, **jar})
        assert mcp.status_code == 401
        assert http.get(f"{url}/metrics", headers=jar).status_code == 401
        forged = {"Cookie": f"{COOKIE}={cookie[:-2]}00"}
        assert http.get(f"{url}/ui/api/sessions", headers=forged).status_code == 401
        token_as_cookie = {"Cookie": f"{COOKIE}={TOKEN}"}
        assert http.get(f"{url}/ui/api/sessions", headers=token_as_cookie).status_code == 401


def test_signing_in_keeps_the_host_and_origin_checks(recorded: tuple[str, dict[str, Any]]) -> None:
    url, _ = recorded
    with httpx.Client(timeout=10) as http:
        foreign_host = http.get(
            f"{url}/ui/", params={"token": TOKEN}, headers={"Host": "evil.example"}
        )
        assert foreign_host.status_code == 421 and COOKIE not in foreign_host.cookies
        foreign_origin = http.post(
            f"{url}/ui/login",
            data={"token": TOKEN},
            headers={"Origin": "http://evil.example"},
        )
        assert foreign_origin.status_code == 403 and COOKIE not in foreign_origin.cookies
        own = http.post(f"{url}/ui/login", data={"token": TOKEN}, headers={"Origin": url})
        assert own.status_code == 303 and COOKIE in own.cookies
