"""The ``context-broker eval --html`` report: one self-contained HTML document (inline style,
server-drawn SVG, no script, no outside URL) with the metrics, the charts and each query
whose gold items are not all in its top k."""

from __future__ import annotations

from collections.abc import Sequence

from contextcore.errors import CatalogError
from contextcore.items import ItemRef
from contextcore.services.evaluation import EvalReport, QueryResult, query_misses

from .charts import bar_chart, esc, stacked_bars

__all__ = ["REPORT_DEPTH", "eval_report_html"]

#: How many ranked items the report keeps per query, so a missed gold item shows its rank.
REPORT_DEPTH = 50
_TOP_SHOWN = 5
_FOUND_MISSED = {"found": "#1a7f37", "missed": "#cf222e"}

_STYLE = """
body { font: 14px/1.45 system-ui, sans-serif; margin: 24px; color: #1f2328; background: #fff; }
h1 { font-size: 20px; margin: 0 0 4px; } h2 { font-size: 16px; margin: 28px 0 10px; }
.meta, .none { color: #59636e; } .warning { color: #9a6700; }
table { border-collapse: collapse; } th, td { padding: 5px 10px; text-align: left;
  border-bottom: 1px solid #d1d9e0; vertical-align: top; } th { font-size: 12px; color: #59636e; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
.charts { display: flex; flex-wrap: wrap; gap: 24px; align-items: flex-start; }
.chart figcaption { font-weight: 600; margin-bottom: 6px; } .chart { margin: 0; }
.miss { border: 1px solid #d1d9e0; border-radius: 6px; padding: 8px 12px; margin: 0 0 10px; }
.miss .q { font-weight: 600; } code { font: 12px ui-monospace, monospace; }
ol, ul { margin: 4px 0; } .gold { color: #1a7f37; font-weight: 600; }
"""


def _metrics_table(report: EvalReport, ks: Sequence[int]) -> str:
    m = report.metrics
    rows = "".join(
        f'<tr data-k="{k}"><th>@{k}</th><td class="num">{m[f"recall@{k}"]:.4f}</td>'
        f'<td class="num">{m[f"ndcg@{k}"]:.4f}</td><td class="num">{m[f"comp@{k}"]:.4f}</td></tr>'
        for k in ks
    )
    return (
        '<table id="metrics"><thead><tr><th>cut-off</th><th>recall</th><th>nDCG</th>'
        f"<th>complete</th></tr></thead><tbody>{rows}</tbody></table>"
        f'<p id="mrr">MRR (first gold item within the top {max(ks)}): {m["mrr"]:.4f}</p>'
    )


def _rank_buckets(depth: int) -> list[tuple[str, int, int]]:
    bounds = [1, 2, 3, 5, 10, 20, 50, 100]
    out: list[tuple[str, int, int]] = []
    low = 1
    for high in [b for b in bounds if b < depth] + [depth]:
        out.append((str(low) if low == high else f"{low}–{high}", low, high))
        low = high + 1
    return out


def _rank_chart(results: Sequence[QueryResult], depth: int) -> str:
    buckets = _rank_buckets(depth)
    counts = [0] * (len(buckets) + 1)
    for r in results:
        for key in r.gold:
            rank = r.ranked.index(key) + 1 if key in r.ranked else None
            slot = next(
                (i for i, (_, lo, hi) in enumerate(buckets) if rank and lo <= rank <= hi), -1
            )
            counts[slot] += 1
    labels = [label for label, _, _ in buckets] + [f"> {depth}"]
    return bar_chart("Rank of each gold item", list(zip(labels, counts, strict=True)))


def _group(key: str) -> str:
    try:
        ref = ItemRef.parse(key)
    except CatalogError:
        return "other"
    return f"tool: {ref.server}" if ref.type == "tool" else f"{ref.type}s"


def _server_chart(results: Sequence[QueryResult], k: int) -> str:
    groups: dict[str, dict[str, float]] = {}
    for r in results:
        top = set(r.ranked[:k])
        for key in r.gold:
            parts = groups.setdefault(_group(key), {"found": 0.0, "missed": 0.0})
            parts["found" if key in top else "missed"] += 1
    rows = sorted(groups.items(), key=lambda kv: (-kv[1]["missed"], kv[0]))
    return stacked_bars(
        f"Gold items found and missed in the top {k}, per server", rows, _FOUND_MISSED
    )


def _misses(report: EvalReport, k: int) -> str:
    by_query = {r.query: r for r in report.results}
    misses = query_misses(report.results, k)
    if not misses:
        return (
            f'<p class="none" id="no-misses">Every query has all its gold items in its top {k}.</p>'
        )
    out = [
        f"<p>{len(misses)} of {report.n_queries} queries have gold items outside their top {k}.</p>"
    ]
    for miss in misses:
        result = by_query[miss.query]
        missing = "".join(
            f"<li><code>{esc(key)}</code> — "
            + (f"rank {rank}" if rank else f"not in the top {len(result.ranked) or k}")
            + "</li>"
            for key, rank in miss.missing.items()
        )
        top = (
            "".join(
                f"<li{' class=gold' if key in result.gold else ''}><code>{esc(key)}</code></li>"
                for key in result.ranked[:_TOP_SHOWN]
            )
            or "<li>(nothing ranked)</li>"
        )
        out.append(
            f'<article class="miss" data-query="{esc(miss.query)}">'
            f'<div class="q">{esc(miss.query)}</div>'
            f'<div>Missing:</div><ul class="missing">{missing}</ul>'
            f'<div>Top {_TOP_SHOWN} returned:</div><ol class="top">{top}</ol></article>'
        )
    return "".join(out)


def eval_report_html(report: EvalReport, ks: Sequence[int], *, misses_k: int, title: str) -> str:
    """The whole report; ``misses_k`` is the cut-off a query's gold items must all be within
    (the charts of found and missed items use it too)."""
    depth = max(len(r.ranked) for r in report.results) if report.results else max(ks)
    warnings = [f"gold key {key} is not in the catalog" for key in report.missing_gold]
    warnings += report.warnings
    notes = "".join(f'<p class="warning">⚠ {esc(w)}</p>' for w in warnings)
    charts = "".join(
        [
            bar_chart(
                "Recall at each cut-off", [(f"@{k}", report.metrics[f"recall@{k}"]) for k in ks]
            ),
            _rank_chart(report.results, depth),
            _server_chart(report.results, misses_k),
        ]
    )
    return (
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        '<meta http-equiv="Content-Security-Policy" content="default-src \'none\'; '
        "style-src 'unsafe-inline'\">"
        f"<title>{esc(title)}</title><style>{_STYLE}</style></head><body>"
        f"<h1>{esc(title)}</h1>"
        f'<p class="meta">search mode {esc(report.mode)}: {report.n_queries} queries over '
        f"{report.n_items} items</p>{notes}"
        f"<h2>Metrics</h2>{_metrics_table(report, ks)}"
        f'<h2>Charts</h2><div class="charts">{charts}</div>'
        f'<h2>Misses at {misses_k}</h2><section id="misses">{_misses(report, misses_k)}</section>'
        "</body></html>"
    )
