"""The README is a short front page: at most 200 lines, its links lead to pages that exist and
to every page of the site, and it names the test command ``.ci/run`` calls."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

from ._blocks import DOCS, ROOT, of

README = ROOT / "README.md"
_LINK = re.compile(r"\]\(([^)\s]+)\)")


def _links(page: Path) -> list[str]:
    return _LINK.findall(page.read_text(encoding="utf-8"))


def _nav_pages(nav: Any) -> Iterator[str]:
    if isinstance(nav, str):
        yield nav
    elif isinstance(nav, list):
        for entry in nav:
            yield from _nav_pages(entry)
    elif isinstance(nav, dict):
        for value in nav.values():
            yield from _nav_pages(value)


def nav_pages() -> list[str]:
    """The pages of the site's navigation, relative to docs/."""
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))
    return list(_nav_pages(config["nav"]))


def test_the_readme_is_at_most_200_lines() -> None:
    assert len(README.read_text(encoding="utf-8").splitlines()) <= 200


def test_every_local_link_of_the_readme_leads_to_a_file_that_exists() -> None:
    local = [link.split("#")[0] for link in _links(README) if "://" not in link]
    missing = [link for link in local if link and not (ROOT / link).exists()]
    assert local
    assert missing == []


def test_the_readme_links_to_every_page_of_the_site() -> None:
    linked = {link.split("#")[0] for link in _links(README)}
    pages = nav_pages()
    assert len(pages) >= 10
    assert all((DOCS / page).is_file() for page in pages)
    assert [p for p in pages if f"docs/{p}" not in linked] == []


def test_every_page_under_docs_is_in_the_navigation() -> None:
    on_disk = sorted(str(p.relative_to(DOCS)) for p in DOCS.rglob("*.md"))
    assert on_disk == sorted(nav_pages())


def test_the_readme_names_the_test_command_that_ci_runs() -> None:
    shown = [b.text.strip() for b in of("sh") if b.page == README]
    assert "scripts/test.sh" in shown
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert re.search(r"^scripts/test\.sh\b", ci, re.M)
