"""The history trend (results.history entries) as a terminal table and a one-file HTML page with a chart."""

from __future__ import annotations

from html import escape
from typing import Any

from retbench.report import fmt, plots


def trend_rows(entries: list[Any], metric: str) -> tuple[list[str], list[list[str]]]:
    """(header, rows): one row per run, oldest first; one column per system (mean [CI])."""
    systems: list[str] = []
    for e in entries:
        systems += [s for s in e.scores if s not in systems and metric in e.scores[s]]
    header = ["run", "date", "commit", "tag", "gate", *systems]
    rows = []
    for e in entries:
        commit = (e.git_commit or "—")[:10] + ("*" if e.git_dirty else "")
        cells = [str(e.id), e.created[:19].replace("T", " "), commit, e.tag or "", e.gate or ""]
        for s in systems:
            v = e.scores.get(s, {}).get(metric)
            if v is None:
                cells.append("—")
                continue
            mean, lo, hi = v
            ci = f" [{fmt.num(lo, 3)}, {fmt.num(hi, 3)}]" if lo is not None and hi is not None else ""
            cov = e.coverage.get(s, {})
            scored = (
                f" ({cov['answered']}/{cov['judged']})"
                if cov.get("judged") and cov.get("answered") != cov.get("judged")
                else ""
            )
            cells.append(f"{fmt.num(mean)}{ci}{scored}")
        rows.append(cells)
    return header, rows


def render_trend(entries: list[Any], metric: str) -> Any:
    from rich.table import Table

    header, rows = trend_rows(entries, metric)
    table = Table(title=f"history: {fmt.metric_label(metric)} (mean [95% CI]; * = uncommitted changes)")
    for i, h in enumerate(header):
        table.add_column(h, justify="right" if i >= 5 or i == 0 else "left")
    for r in rows:
        table.add_row(*r)
    return table


def trend_html(entries: list[Any], metric: str) -> str:
    """A self-contained page: the metric per system across runs (SVG) and the same numbers as a table."""
    header, rows = trend_rows(entries, metric)
    series = []
    for s in header[5:]:
        pts = [(e.id, e.scores[s][metric][0]) for e in entries if metric in e.scores.get(s, {})]
        if pts:
            series.append(plots.Series(s, [float(x) for x, _ in pts], [y for _, y in pts]))
    svg = plots.line_chart(
        series, title=f"{fmt.metric_label(metric)} per run", x_label="history run", y_label=fmt.metric_label(metric)
    )
    th = "".join(f"<th>{escape(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{escape(c)}</td>" for c in r) + "</tr>" for r in rows)
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>retbench history</title>'
        "<style>body{font:14px system-ui,sans-serif;margin:24px}table{border-collapse:collapse}"
        "td,th{padding:4px 8px;border-bottom:1px solid #ddd;text-align:left}</style></head><body>"
        f"<h1>History: {escape(fmt.metric_label(metric))}</h1><figure>{svg}</figure>"
        f'<table id="history"><thead><tr>{th}</tr></thead><tbody>{body}</tbody></table></body></html>\n'
    )
