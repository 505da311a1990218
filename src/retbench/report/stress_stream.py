"""The streaming case's report: checkpoints, live queries, freshness and failures; Markdown and HTML with charts.

Reads only the `StressSummary` the study writes (its `streaming` block, `retbench.results.stress_stream`) and,
for the time charts, the live queries of `stream_queries.jsonl`, so a report can be re-rendered from the files. Charts (dependency-free
SVG from `report.plots`): recall and latency over time in 1-second windows with the share of the stream
written (the ingestion marks), the freshness lag distributions (ECDF), and recall against filter selectivity
at each checkpoint (unfiltered drawn at selectivity 1).
"""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence

from retbench.report import fmt, plots
from retbench.report.stress import closing_lines, html_blocks
from retbench.results.stress import StressSummary
from retbench.results.stress_stream import FRESHNESS_KINDS, FilterFigures, LiveQuery, StreamingFigures, live_windows

CLASSES = ("error", "invalid", "deleted_returned", "out_of_filter", "short")


def _sel(v: float | None) -> str:
    return "all" if v is None else fmt.pct(v, 1)


def _ms(v: float | None) -> str:
    return fmt.num(v, 2, missing="–")


def _fails(counts: Mapping[str, int]) -> str:
    parts = [f"{c} {counts[c]}" for c in CLASSES if counts.get(c)]
    return ", ".join(parts) or "none"


def _checkpoint_table(st: StreamingFigures) -> list[str]:
    cps = st.checkpoints
    metrics = sorted({m for c in cps for r in c.filters for m in r.metrics})
    head = [
        "after batch",
        "visible",
        "filter",
        "matching",
        f"recall@{st.k} vs exact",
        *(f"{m} (qrels)" for m in metrics),
        "judged queries",
        "p50 ms",
        "p99 ms",
        "failures",
    ]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for c in cps:
        for r in c.filters:
            cells = [
                str(c.batches),
                str(c.visible),
                _sel(r.filter),
                str(r.matching),
                fmt.num(r.recall, 4, missing="–"),
                *(fmt.num(r.metrics.get(m), 4, missing="–") for m in metrics),
                f"{r.judged} (skipped {r.skipped_no_relevant})",
                _ms(r.latency.p50),
                _ms(r.latency.p99),
                _fails(r.failures),
            ]
            lines.append("| " + " | ".join(cells) + " |")
    return lines


def _live_table(live: Sequence[FilterFigures], k: int) -> list[str]:
    lines = [
        f"| filter | queries | recall@{k} vs exact | p50 ms | p95 ms | p99 ms | failures |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in live:
        lat = r.latency
        lines.append(
            f"| {_sel(r.filter)} | {r.queries} | {fmt.num(r.recall, 4, missing='–')} | {_ms(lat.p50)} "
            f"| {_ms(lat.p95)} | {_ms(lat.p99)} | {_fails(r.failures)} |"
        )
    return lines


def _freshness_table(st: StreamingFigures) -> list[str]:
    lines = [
        "| change | sampled | visible | never | at first probe | p50 ms | p95 ms | p99 ms | max ms |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for kind in FRESHNESS_KINDS:
        f = st.freshness(kind)
        lat = f.lag
        lines.append(
            f"| {kind} | {f.sampled} | {f.seen} | {f.never} | {f.first_probe} | {_ms(lat.p50)} | {_ms(lat.p95)} "
            f"| {_ms(lat.p99)} | {_ms(lat.max)} |"
        )
    return lines


def _streaming(summary: StressSummary) -> StreamingFigures:
    if summary.streaming is None:
        raise ValueError("a stress summary without a streaming block has no streaming report")
    return summary.streaming


def render_markdown(summary: StressSummary) -> str:
    """The streaming report as Markdown (every figure the HTML shows, in tables)."""
    st = _streaming(summary)
    plan, s = st.plan, st.settings
    rate = fmt.num(st.docs_per_s, 1, missing="–")
    lines = [
        f"# Stress while the data changes: {summary.system} on {summary.dataset}",
        "",
        f"{summary.failed} of {summary.requests} responses failed "
        f"({fmt.pct(summary.failure_rate, 2)}; allowed {fmt.pct(summary.allowed_failure_rate, 2)}).",
        f"Stream (seed {s.get('seed')}): {plan['initial']} documents indexed first, then {plan['batches']} batches: "
        f"{plan['inserts']} inserts, {plan['updates']} updates, {plan['deletes']} deletes in {fmt.num(st.stream_s, 1)} s "
        f"({rate} inserted docs/s while writing, target {s.get('docs_per_s')}); exact answers {st.exact_sha256}.",
        "",
        "## Checkpoints (writes paused)",
        "",
        *_checkpoint_table(st),
        "",
        f"## Live queries while writing ({s.get('query_qps')} per s)",
        "",
        *_live_table(st.live.by_filter, st.k),
        "",
        "## Freshness (time from the write's acknowledgement to the first probe that sees it)",
        "",
        *_freshness_table(st),
        "",
        f"Updates that cannot be told apart from their old version: {st.freshness('update').indistinguishable}.",
    ]
    return "\n".join(lines + closing_lines(summary)) + "\n"


# -- charts ----------------------------------------------------------------------------------------------
def time_charts(st: StreamingFigures, rows: Sequence[LiveQuery]) -> str:
    """Recall and latency of the live queries over time, with the share of the stream written."""
    if not rows:
        return ""
    win = live_windows(rows)
    recall_lines, lat_lines = [], []
    for sel in [r.filter for r in st.live.by_filter]:
        points = [(w.mid_s, v) for w in win if (v := w.recall(sel)) is not None]
        if points:
            recall_lines.append(plots.Series(f"recall, {_sel(sel)}", [x for x, _ in points], [y for _, y in points]))
    xs = [w.mid_s for w in win]
    recall_lines.append(plots.Series("stream written (share)", xs, [st.written_share(x) for x in xs]))
    for p in (50, 95):
        lat_lines.append(plots.Series(f"p{p}", xs, [w.latency_ms(p) for w in win]))
    recall = plots.line_chart(
        recall_lines,
        title=f"live recall@{st.k} over time (1-s windows)",
        x_label="seconds since the stream started",
        y_label="recall",
        y_range=(0.0, 1.0),
        markers=False,
        kind="stream-recall",
    )
    lat = plots.line_chart(
        lat_lines,
        title="live latency over time (1-s windows)",
        x_label="seconds since the stream started",
        y_label="ms",
        markers=False,
        kind="stream-latency",
    )
    return recall + lat


def freshness_chart(st: StreamingFigures) -> str:
    """ECDF of the visibility lags: the share of sampled changes seen within x ms (never-seen ones keep it below 1)."""
    series = []
    for kind in FRESHNESS_KINDS:
        f = st.freshness(kind)
        lags = f.lags_ms
        if not f.sampled or not lags:
            continue
        xs = list(lags)
        ys = [(i + 1) / f.sampled for i in range(len(lags))]
        series.append(plots.Series(kind, [0.0, *xs], [0.0, *ys]))
    if not series:
        return ""
    return plots.line_chart(
        series,
        title="freshness: share of changes visible within x ms",
        x_label="lag after the write's acknowledgement",
        x_unit="ms",
        y_label="share visible",
        y_range=(0.0, 1.0),
        step=True,
        kind="stream-freshness",
    )


def selectivity_chart(st: StreamingFigures) -> str:
    """Recall@k against filter selectivity (log axis) per checkpoint; unfiltered at 1."""
    series = []
    for c in st.checkpoints:
        pts = sorted((r.filter or 1.0, r.recall) for r in c.filters if r.recall is not None)
        if pts:
            series.append(plots.Series(f"after batch {c.batches}", [p[0] for p in pts], [p[1] for p in pts]))
    if not series:
        return ""
    return plots.line_chart(
        series,
        title=f"recall@{st.k} against filter selectivity (checkpoints)",
        x_label="share of the corpus the filter selects",
        y_label="recall",
        x_log=True,
        y_range=(0.0, 1.0),
        kind="stream-selectivity",
    )


def render_html(summary: StressSummary, rows: Sequence[LiveQuery]) -> str:
    """The streaming report as one HTML page: the charts, then the Markdown's tables."""
    st = _streaming(summary)
    charts = (
        '<div style="display:flex;gap:16px;flex-wrap:wrap">'
        + time_charts(st, rows)
        + freshness_chart(st)
        + selectivity_chart(st)
        + "</div>"
    )
    title_line, _, body = render_markdown(summary).partition("\n")
    blocks = [f"<h1>{html.escape(title_line.removeprefix('# '))}</h1>", *html_blocks(body, "")]
    blocks.insert(min(3, len(blocks)), charts)  # after the headline and the stream's line
    style = "body{font-family:sans-serif;max-width:1200px;margin:2em auto}td,th{border:1px solid #ddd;padding:2px 6px}td{text-align:right}"
    title = html.escape(f"stress while the data changes: {summary.system} on {summary.dataset}")
    return f"<!doctype html><html><head><meta charset='utf-8'><title>{title}</title><style>{style}</style></head><body>{''.join(blocks)}</body></html>\n"
