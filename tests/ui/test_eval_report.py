"""``context-broker eval --html``: the report opened in a real headless Chromium shows the
metrics, a known miss with its rank and the top items returned, and its charts; the file
names no outside URL."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

from ui_env import BROKER

CATALOG = {
    "servers": {
        "time": {
            "tools": [
                {"name": "get_current_time", "description": "Get the current time"},
                {"name": "convert_time", "description": "Convert a time between timezones"},
            ]
        }
    },
    "rules": [
        {
            "name": "sql-safety",
            "description": "Database queries and SQL",
            "text": "Use parameterized SQL queries.",
        }
    ],
}
QUERIES = [
    {"query": "convert the time to another timezone", "gold": ["tool:time/convert_time"]},
    # BM25 ranks get_current_time above the gold item for this one: a miss at 1, rank 2.
    {"query": "time in Tokyo", "gold": ["tool:time/convert_time"]},
    {"query": "safe SQL database queries", "gold": ["rule:sql-safety"]},
]


def _eval(folder: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    (folder / "c.json").write_text(json.dumps(CATALOG), encoding="utf-8")
    (folder / "q.jsonl").write_text("\n".join(json.dumps(q) for q in QUERIES), encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith("CONTEXT_BROKER_")}
    cmd = [BROKER, "eval", "--catalog", "c.json", "--queries", "q.jsonl", "--mode", "lexical"]
    return subprocess.run(
        [*cmd, *extra], cwd=folder, env=env, capture_output=True, text=True, timeout=120
    )


def _bars(page: Any, caption: str) -> list[str]:
    figure = page.locator("figure.chart", has_text=caption)
    assert figure.locator("svg").is_visible()
    return [t.text_content() for t in figure.locator("svg rect title").all()]


def test_the_html_report_shows_metrics_a_known_miss_and_charts_in_chromium(
    browser: Any, tmp_path: Path, artifacts: Path
) -> None:
    done = _eval(tmp_path, "--k", "1,2", "--misses", "1", "--json", "--html", "report.html")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    html = (tmp_path / "report.html").read_text(encoding="utf-8")
    assert "http://" not in html and "https://" not in html and "<script" not in html

    page = browser.new_page(viewport={"width": 1200, "height": 900})
    page.set_default_timeout(15_000)
    page.goto((tmp_path / "report.html").as_uri())
    for k in (1, 2):
        cells = page.locator(f'#metrics tr[data-k="{k}"] td').all_inner_texts()
        m = report["metrics"]
        assert cells == [
            f"{m[f'recall@{k}']:.4f}",
            f"{m[f'ndcg@{k}']:.4f}",
            f"{m[f'comp@{k}']:.4f}",
        ]
    assert report["metrics"]["recall@1"] < 1.0
    assert f"{report['metrics']['mrr']:.4f}" in page.locator("#mrr").inner_text()

    misses = page.locator("#misses article.miss")
    assert misses.count() == 1 == len(report["misses"])
    miss = page.locator('article.miss[data-query="time in Tokyo"]')
    assert miss.locator("ul.missing li").all_inner_texts() == ["tool:time/convert_time — rank 2"]
    top = miss.locator("ol.top li").all_inner_texts()
    assert top[:2] == ["tool:time/get_current_time", "tool:time/convert_time"]
    assert miss.locator("ol.top li.gold").all_inner_texts() == ["tool:time/convert_time"]

    assert _bars(page, "Recall at each cut-off") == [
        f"@1: {report['metrics']['recall@1']:g}",
        f"@2: {report['metrics']['recall@2']:g}",
    ]
    ranks = _bars(page, "Rank of each gold item")
    assert "1: 2" in ranks and "2: 1" in ranks
    per_server = _bars(page, "per server")
    assert "tool: time: found 1" in per_server and "tool: time: missed 1" in per_server
    assert "rules: found 1" in per_server
    page.screenshot(path=str(artifacts / "eval-report.png"), full_page=True)
    page.close()


def test_without_misses_the_report_counts_misses_at_the_largest_k(tmp_path: Path) -> None:
    done = _eval(tmp_path, "--k", "1,2", "--quiet", "--html", "report.html")
    assert done.returncode == 0, done.stderr
    assert "misses at" not in done.stdout  # the text report is unchanged
    html = (tmp_path / "report.html").read_text(encoding="utf-8")
    assert "Misses at 2" in html and 'id="no-misses"' in html


def test_an_unwritable_html_path_is_named(tmp_path: Path) -> None:
    target = tmp_path / "missing-folder" / "report.html"
    done = _eval(tmp_path, "--quiet", "--html", str(target))
    assert done.returncode != 0
    assert repr(str(target)) in done.stderr and "--html" in done.stderr
