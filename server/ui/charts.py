"""Charts as inline SVG, drawn on the server: the analytics page's plots and the eval report.
No script and no outside asset, so a saved page still shows them."""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["analytics_html", "bar_chart", "esc", "stacked_bars"]

MODE_COLOURS = {"always": "#0969da", "manual": "#8250df", "agent": "#1a7f37"}
_ROW = 20
_LABEL_W = 230
_BAR_W = 360


def esc(text: object) -> str:
    """HTML-escaped text (quotes too)."""
    return html.escape(str(text), quote=True)


def _no_data(title: str) -> str:
    return (
        f'<figure class="chart"><figcaption>{esc(title)}</figcaption>'
        '<p class="none">No data yet.</p></figure>'
    )


def stacked_bars(
    title: str, rows: Sequence[tuple[str, Mapping[str, float]]], colours: Mapping[str, str]
) -> str:
    """One horizontal bar per row, split by the keys of ``colours``, with a legend."""
    if not rows:
        return _no_data(title)
    top = max(sum(parts.values()) for _, parts in rows) or 1
    height = _ROW * len(rows) + 30
    width = _LABEL_W + _BAR_W + 60
    out = [
        f'<figure class="chart"><figcaption>{esc(title)}</figcaption>',
        f'<svg role="img" aria-label="{esc(title)}" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" font-size="12">',
    ]
    for i, (label, parts) in enumerate(rows):
        y = i * _ROW
        out.append(
            f'<text x="{_LABEL_W - 6}" y="{y + 14}" text-anchor="end" fill="currentColor">'
            f"{esc(label[:36])}</text>"
        )
        x = float(_LABEL_W)
        for key, colour in colours.items():
            value = parts.get(key, 0)
            if not value:
                continue
            w = value / top * _BAR_W
            out.append(
                f'<rect x="{x:.1f}" y="{y + 3}" width="{w:.1f}" height="{_ROW - 6}" '
                f'fill="{colour}">'
                f"<title>{esc(label)}: {esc(key)} {value:g}</title></rect>"
            )
            x += w
        out.append(
            f'<text x="{x + 4:.1f}" y="{y + 14}" fill="currentColor">{sum(parts.values()):g}</text>'
        )
    legend_y = len(rows) * _ROW + 18
    x = _LABEL_W
    for key, colour in colours.items():
        out.append(f'<rect x="{x}" y="{legend_y - 10}" width="10" height="10" fill="{colour}"/>')
        out.append(f'<text x="{x + 14}" y="{legend_y}" fill="currentColor">{esc(key)}</text>')
        x += 90
    out.append("</svg></figure>")
    return "".join(out)


def bar_chart(title: str, bars: Sequence[tuple[str, float]], *, colour: str = "#1a7f37") -> str:
    """Vertical bars with their labels below (a histogram when the labels are ranges)."""
    if not bars:
        return _no_data(title)
    top = max(v for _, v in bars) or 1
    step = 52
    plot_h = 150
    width = step * len(bars) + 20
    height = plot_h + 40
    out = [
        f'<figure class="chart"><figcaption>{esc(title)}</figcaption>',
        f'<svg role="img" aria-label="{esc(title)}" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" font-size="11">',
    ]
    for i, (label, value) in enumerate(bars):
        h = value / top * plot_h
        x = 10 + i * step
        out.append(
            f'<rect x="{x}" y="{plot_h - h + 14:.1f}" width="{step - 10}" height="{h:.1f}" '
            f'fill="{colour}"><title>{esc(label)}: {value:g}</title></rect>'
        )
        out.append(
            f'<text x="{x + (step - 10) / 2}" y="{plot_h - h + 10:.1f}" text-anchor="middle" '
            f'fill="currentColor">{value:g}</text>'
        )
        out.append(
            f'<text x="{x + (step - 10) / 2}" y="{plot_h + 30}" text-anchor="middle" '
            f'fill="currentColor">{esc(label)}</text>'
        )
    out.append("</svg></figure>")
    return "".join(out)


def _used(row: Mapping[str, Any]) -> float | None:
    value = row.get("used")
    if isinstance(value, dict):
        value = sum(v for v in value.values() if isinstance(v, int | float))
    return float(value) if isinstance(value, int | float) else None


def analytics_html(usage: Mapping[str, Any], *, top: int = 25) -> str:
    """The analytics section: how often each item was selected and how, the agent score
    distribution, items never selected, and used vs selected when usage is recorded."""
    items = sorted(usage.get("items", []), key=lambda r: (-r.get("included", 0), r.get("key", "")))
    parts = [
        f'<p class="totals">{usage.get("sessions", 0)} session(s), '
        f"{usage.get('turns', 0)} turn(s); "
        f"{usage.get('searches_without_strong_match', 0)} search(es) without a strong match, "
        f"{usage.get('searches_failed', 0)} failed.</p>",
        stacked_bars(
            "How often each item was selected, and how",
            [(r["key"], r.get("by_mode", {})) for r in items[:top]],
            MODE_COLOURS,
        ),
        bar_chart(
            "Similarity scores of agent selections",
            [
                (f"{b['from']:.1f}–{b['to']:.1f}", b["count"])
                for b in usage.get("agent_score_histogram", [])
            ],
        ),
    ]
    used = [(r["key"], r.get("included", 0), _used(r)) for r in items]
    if usage.get("turns_with_usage", 0) > 0 and any(u is not None for _, _, u in used):
        parts.append(
            stacked_bars(
                "Used vs selected",
                [(k, {"selected": float(s), "used": u or 0.0}) for k, s, u in used[:top]],
                {"selected": "#8c959f", "used": "#bf8700"},
            )
        )
    never = usage.get("never_selected", [])
    listed = "".join(f"<li>{esc(k)}</li>" for k in never) or "<li>none</li>"
    parts.append(
        f'<section class="never"><h3>Agent items never selected ({len(never)})</h3>'
        f"<ul>{listed}</ul></section>"
    )
    return "".join(parts)
