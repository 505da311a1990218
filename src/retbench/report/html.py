"""The results report as one self-contained HTML file: inline CSS, SVG and one small script, no network.

It opens offline from disk or a CI artifact. Every table cell that shows a mean carries the exact
value in `data-value`, and the metrics.json it was built from is embedded as JSON data
(`<script type="application/json" id="retbench-data">`, which browsers never execute).
"""

from __future__ import annotations

import json
import math
from html import escape
from typing import Any

from retbench.comparison import PairComparison
from retbench.data.status import FAILED_COUNT, MISSING, NOT_ANSWERED_COUNTS
from retbench.io.files import json_safe
from retbench.metrics.coverage import mode_with_identical
from retbench.metrics.registry import lower_is_better
from retbench.report import fmt, histogram, plots
from retbench.report.html_drill import drill_section, k_curve_figures
from retbench.report.html_page import LEGEND_HINT, attr, note, page, script_json, table_html
from retbench.report.judge import judge_notes
from retbench.report.latency import latency_html
from retbench.report.model import ReportData, SystemSummary
from retbench.report.prcurve import pr_figure
from retbench.report.resolution import rank_label, resolution_html, resolution_p, resolution_td
from retbench.report.stages import (
    AGREEMENT_HEADER,
    AGREEMENT_NOTE,
    RERANK_HEADER,
    RERANK_NOTE,
    agreement_rows,
    rerank_rows,
)
from retbench.report.tables import COVERAGE_HEADER, RESOURCE_HEADER, SHORT_NOTE, resource_rows, short_runs
from retbench.report.tradeoff import tradeoff_section
from retbench.report.weakening import summary_notes_html


def _coverage_html(s: SystemSummary) -> str:
    """'scored 90 of 100' and, under it, what happened to the rest (or why the system has no scores)."""
    if s.error:
        return f'<span class="badge bad">failed</span><span class="ci">{escape(s.error)}</span>'
    extra = [f"{s.coverage[k]} {k}" for k in NOT_ANSWERED_COUNTS if s.coverage.get(k)]
    fate = "left out of the means" if s.mode == "pytrec_eval" else "scored 0"
    note = f'<span class="ci">{escape(", ".join(extra))}: {fate}</span>' if extra else ""
    return f"{escape(fmt.coverage(s.answered, s.judged))}{note}"


def _comparable(s: SystemSummary) -> bool:
    """A mean over fewer queries than were judged (pytrec_eval mode) cannot be ranked against the others."""
    return s.mode == "trec_eval" or s.answered == s.judged


def _mode_note(data: ReportData) -> str:
    if data.modes == {"trec_eval"}:
        return (
            '<span class="badge">trec_eval counting</span><span class="muted small">every judged query counts; '
            "failed or unanswered queries score 0</span>"
        )
    return (
        '<span class="badge warn">pytrec_eval mode</span><span class="small">means marked † are over <b>answered</b> '
        "queries only (what pytrec_eval and BEIR report); unanswered queries are left out, not scored 0</span>"
    )


def _best(values: Any, lower: bool) -> float | None:
    """The best mean of a metric (the smallest for a lower-is-better one), NaN and missing left out."""
    finite = [v for v in values if v is not None and not math.isnan(v)]
    return (min(finite) if lower else max(finite)) if finite else None


def _summary(data: ReportData) -> str:
    ranked = [s for s in data.systems if _comparable(s)]
    best = {m: _best((s.means.get(m) for s in ranked), lower_is_better(m)) for m in data.metrics}
    rows = []
    for s in data.systems:
        cells = [f"<td><b>{escape(s.name)}</b></td>", f'<td class="small nowrap">{_coverage_html(s)}</td>']
        dagger = " †" if s.mode == "pytrec_eval" else ""
        for m in data.metrics:
            v = s.means.get(m)
            if v is None:
                cells.append('<td class="num muted">—</td>')
                continue
            bounds = fmt.interval(*s.ci[m], digits=3) if m in s.ci and fmt.finite(v) else ""
            ci = f'<span class="ci">{bounds}</span>' if bounds else ""
            klass = "num best" if len(ranked) > 1 and _comparable(s) and v == best[m] else "num"
            cells.append(
                f'<td class="{klass}" data-system="{attr(s.name)}" data-metric="{attr(m)}" data-value="{v!r}">'
                f"{f'{v:.4f}{dagger}' if fmt.finite(v) else fmt.NO_SCORE}{ci}{escape(s.applies_note(m))}</td>"
            )
        rows.append(f"<tr>{''.join(cells)}</tr>")
    header = ["system", "coverage", *(escape(fmt.metric_label(m)) for m in data.metrics)]
    return table_html(header, rows, set(range(2, len(header))), "summary")


def _leaderboard(data: ReportData) -> str:
    board = data.leaderboard
    if board is None:
        return ""
    best = {d: board.best(d) for d in board.datasets}
    rows = []
    for system, scores, mean, rank in board.rows():
        cells = [f"<td><b>{escape(system)}</b></td>"]
        for d, v in zip(board.datasets, scores, strict=True):
            if v is None:
                cells.append('<td class="num muted">—</td>')
                continue
            klass = "num best" if v == best[d] else "num"
            cells.append(f'<td class="{klass}" data-dataset="{attr(d)}" data-value="{v!r}">{v:.4f}</td>')
        cells.append(f'<td class="num">{"—" if mean is None else f"{mean:.4f}"}</td>')
        cells.append(f'<td class="num" data-rank="{rank!r}">{rank_label(board.avg_rank.get(system))}</td>')
        cells += [resolution_td(board.resolution, system)] if board.resolution is not None else []
        rows.append(f"<tr>{''.join(cells)}</tr>")
    extra = ["rank 95%"] if board.resolution is not None else []
    header = ["system", *(escape(d) for d in board.datasets), "mean", "avg rank", *extra]
    return (
        f"<p>{escape(fmt.metric_label(board.metric))} per dataset, best first by average rank.</p>"
        + table_html(header, rows, set(range(1, len(header))), "summary leaderboard")
        + '<p class="small muted">Rank 1 = best on a dataset (ties share the average rank; no score ranks last); '
        "the mean over datasets is shown only for systems scored on all of them.</p>"
        + (resolution_p(board.resolution, over_datasets=True) if board.resolution is not None else "")
    )


CI_CHART_DOTS = 48  # markers the interval chart draws at most (systems x metrics), so it stays a screen or two tall


def _finite_mean(s: SystemSummary, metric: str) -> bool:
    """A mean that can be drawn: present and a number (null in metrics.json reads as NaN: no value)."""
    v = s.means.get(metric)
    return v is not None and math.isfinite(v)


def _ci_chart(data: ReportData) -> str:
    shown = _ci_metrics(data)
    systems = [
        (s.name, [(s.means[m], *s.ci[m]) if _finite_mean(s, m) and m in s.ci else None for m in shown])
        for s in data.systems
    ]
    if not any(v for _, vals in systems for v in vals):
        return ""
    svg = plots.interval_chart(
        [fmt.metric_label(m) for m in shown],
        systems,
        title="Mean of each metric with its 95% confidence interval",
        x_label="score",
    )
    part = (
        ""
        if len(shown) == len(data.metrics)
        else f" With {len(data.systems)} systems the chart shows {len(shown)} of the {len(data.metrics)} metrics "
        "(the primary first); the table above has every metric with its interval."
    )
    return (
        f"<figure>{svg}<figcaption>Dots are means, whiskers 95% percentile-bootstrap intervals over queries "
        f"(the axis shows only the range the intervals span).{part} {LEGEND_HINT}</figcaption></figure>"
    )


def _ci_metrics(data: ReportData) -> list[str]:
    """The metrics the interval chart shows: all while systems x metrics <= CI_CHART_DOTS, else the primary
    and then the others in order, as many as fit (at least one)."""
    room = max(1, CI_CHART_DOTS // max(len(data.systems), 1))
    if len(data.metrics) <= room:
        return list(data.metrics)
    ordered = (
        [data.primary, *(m for m in data.metrics if m != data.primary)]
        if data.primary in data.metrics
        else list(data.metrics)
    )
    return ordered[:room]


def _curves(data: ReportData) -> str:
    if data.drill is not None and data.drill.curves:
        return k_curve_figures(data.drill)
    figs = []
    for fam, pts in data.curves.items():
        series = [
            plots.Series(s.name, [k for k, _ in pts], [s.means[m] for _, m in pts])
            for s in data.systems
            if all(m in s.means for _, m in pts)
        ]
        ks = [k for k, _ in pts]
        svg = plots.line_chart(
            series,
            title=f"{fmt.metric_label(fam)}@k per system",
            kind="metric-curve",
            x_label="k (results looked at)",
            y_label=f"{fmt.metric_label(fam)}@k",
            x_log=max(ks) / min(ks) >= 20,
            y_range=(0.0, 1.0),
        )
        figs.append(
            f"<figure>{svg}<figcaption>{escape(fmt.metric_label(fam))}@k for k = "
            f"{', '.join(str(k) for k in ks)}: {escape(fmt.metric_meaning(fam + '@k'))}.</figcaption></figure>"
        )
    return "".join(figs) or '<p class="muted">No metric was computed at two or more cutoffs.</p>'


def _pair_section(pair: PairComparison, data: ReportData) -> list[str]:
    """One compared pair: its coverage, the metric table, the delta histogram and the most changed queries."""
    out: list[str] = []
    rows = []
    for m in pair.metrics:
        p_holm = m.adjusted.get("randomization")
        sig = ' class="num sig"' if p_holm is not None and p_holm < 0.05 else ' class="num"'
        klass = "num pos" if m.delta > 0 else "num neg" if m.delta < 0 else "num"
        rows.append(
            f'<tr><td>{escape(fmt.metric_label(m.metric))}</td><td class="num">{m.mean_a:.4f}</td><td class="num">{m.mean_b:.4f}</td>'
            f'<td class="{klass}">{m.delta:+.4f}</td><td class="num">[{m.ci_low:+.4f}, {m.ci_high:+.4f}]</td>'
            f'<td class="num">{fmt.p_short(m.pvalues["randomization"])}</td><td{sig}>{fmt.p_short(p_holm)}</td>'
            f'<td class="num">{fmt.p_short(m.adjusted.get("ttest"))}</td><td class="num">{fmt.p_short(m.adjusted.get("wilcoxon"))}</td>'
            f'<td class="num">{fmt.num(m.effect_size, 2)}</td><td class="num">{m.wins} / {m.ties} / {m.losses}</td></tr>'
        )
    ca, cb = pair.counts_a, pair.counts_b
    cov = (
        f"{escape(pair.system_a)} {fmt.coverage(ca['queries'] - ca[FAILED_COUNT] - ca[MISSING], ca['queries'])}, "
        f"{escape(pair.system_b)} {fmt.coverage(cb['queries'] - cb[FAILED_COUNT] - cb[MISSING], cb['queries'])}"
    )
    out.append(f'<h3>{escape(pair.system_b)} (B) vs {escape(pair.system_a)} (A)</h3><p class="small muted">{cov}</p>')
    out.append(
        ""
        if not rows  # every metric of the pair was unpaired: its note says why
        else table_html(
            [
                "metric",
                f"A: {escape(pair.system_a)}",
                f"B: {escape(pair.system_b)}",
                "Δ (B − A)",
                "95% CI",
                "p",
                "p Holm",
                "t-test Holm",
                "Wilcoxon Holm",
                "d_z",
                "W / T / L",
            ],
            rows,
            set(range(1, 11)),
            "compare",
        )
    )
    note = fmt.unpaired(pair.unpaired)
    if note:
        out.append(f'<p class="note">{escape(note)}.</p>')
    d = data.deltas.get(pair.system_b)
    if d:
        svg = histogram.delta_histogram(
            d,
            title=f"Per-query change in {fmt.metric_label(data.primary)}: {pair.system_b} − {pair.system_a}",
            x_label=f"change in {fmt.metric_label(data.primary)} per query",
            lower=lower_is_better(data.primary),
        )
        cap = escape(histogram.caption(fmt.metric_label(data.primary)))
        out.append(f"<figure>{svg}<figcaption>{cap}</figcaption></figure>")
    focus = next((m for m in pair.metrics if m.metric == data.primary), None)
    if focus is not None and focus.top_changes:
        gain = -1.0 if lower_is_better(focus.metric) else 1.0  # a fall is the gain of a lower-is-better metric
        rows = [
            f'<tr><td>{escape(c.query_id)}</td><td>{escape(c.text)}</td><td class="num">{c.a:.4f}</td>'
            f'<td class="num">{c.b:.4f}</td><td class="num {"pos" if gain * c.delta > 0 else "neg"}">{c.delta:+.4f}</td>'
            f"<td>{escape(c.status_a if c.status_a == c.status_b else f'{c.status_a} → {c.status_b}')}</td></tr>"
            for c in focus.top_changes
        ]
        out.append(
            f"<details><summary>Most changed queries on {escape(fmt.metric_label(data.primary))} "
            "(biggest gains, then biggest losses)</summary>"
            + table_html(
                ["query", "text", f"A: {escape(pair.system_a)}", f"B: {escape(pair.system_b)}", "Δ", "status"],
                rows,
                {2, 3, 4},
            )
            + "</details>"
        )
    return out


def _comparison(data: ReportData) -> str:
    cmp = data.comparison
    if cmp is None:
        return '<p class="muted">One system: nothing to compare.</p>'
    from retbench.report.markdown import comparison_scope

    scope = escape(comparison_scope(cmp)).replace("`", "")
    out = [
        f"<p>{scope}. Paired over the same queries; Δ is B − A (system − baseline); bold p-values are below "
        f"0.05 after Holm correction across all {cmp.family} comparisons.</p>"
    ]
    if cmp.note:
        out.append(f'<p class="note">Note: {escape(cmp.note)}.</p>')
    for pair in cmp.pairs:
        out += _pair_section(pair, data)
    out.append(
        f'<p class="small muted">p: paired randomization test (sign flip, {cmp.n_resamples:,} resamples, seed {cmp.seed}; '
        f"its smallest p is 1/{cmp.n_resamples + 1:,}); "
        "p Holm: the same after Holm correction; t-test and Wilcoxon signed-rank (zero deltas dropped) p-values, "
        "Holm-corrected. CI: paired percentile bootstrap of the mean delta. d_z: mean delta / sd of deltas. "
        "W / T / L: queries better / unchanged / worse. Failed and unanswered queries count 0.</p>"
    )
    return "".join(out)


def _resources(data: ReportData) -> str:
    rows = resource_rows(data.systems)
    if not rows:
        return '<p class="muted">No resource figures were recorded.</p>'
    return table_html(list(RESOURCE_HEADER), _rows(rows), set(range(2, 7)))


def _agreement(data: ReportData) -> str:
    rows = agreement_rows(data)
    return table_html(list(AGREEMENT_HEADER), _rows(rows), {2, 3, 4, 5}) + note(AGREEMENT_NOTE)


def _rerank(data: ReportData) -> str:
    rows = rerank_rows(data)
    return table_html(list(RERANK_HEADER), _rows(rows), {1, 4, 5, 6, 7}) + note(RERANK_NOTE)


def _rows(rows: list[list[str]]) -> list[str]:
    return ["<tr>" + "".join(f"<td>{escape(c)}</td>" for c in row) + "</tr>" for row in rows]


def _answer_side(data: ReportData) -> list[tuple[str, str, str]]:
    """Sections for the breakdown by group, latency by stage and LLM usage (each only when recorded)."""
    from retbench.report import breakdowns as b

    out = []
    grouped = [s for s in data.systems if s.breakdown]
    if grouped:
        cols = set(range(1, len(data.metrics) + 2 + len(b.RATES)))
        tables = "".join(
            f"<h3>{escape(s.name)}</h3>"
            + table_html(
                b.breakdown_header(data.metrics, b.has_rates(s)), _rows(b.breakdown_rows(s, data.metrics)), cols
            )
            for s in grouped
        )
        out.append(("breakdown", "Breakdown by group", note(b.BREAKDOWN_NOTE) + tables))
    stages, usage = b.stage_rows(data.systems), b.usage_rows(data.systems)
    if stages:
        table = table_html(list(b.STAGE_HEADER), _rows(stages), set(range(2, 8)))
        out.append(("stages", "Latency by stage", table + note(b.STAGE_NOTE)))
    if usage:
        table = table_html(list(b.USAGE_HEADER), _rows(usage), set(range(2, 7)))
        out.append(("usage", "LLM tokens and cost", table + note(b.USAGE_NOTE)))
    return out


def _judge(notes: list[tuple[str, str]]) -> str:
    """What identified each system's judge model in its cache key, and its flagged verdicts (report/judge.py)."""
    return "<ul>" + "".join(f"<li><b>{escape(n)}</b>: {escape(t)}</li>" for n, t in notes) + "</ul>"


def _coverage(data: ReportData) -> str:
    rows = []
    chart_rows = []
    for s in data.systems:
        c = s.coverage
        if s.error:
            rows.append(
                f"<tr><td>{escape(s.name)}</td><td>failed as a whole: {escape(s.error)}</td>"
                + '<td class="num">—</td>' * 5
                + f"<td>{escape(s.mode)}</td></tr>"
            )
            continue
        failed, missing = int(c.get(FAILED_COUNT, 0)), int(c.get(MISSING, 0))
        rows.append(
            f'<tr><td>{escape(s.name)}</td><td class="num">{s.judged}</td><td class="num">{s.answered}</td>'
            f'<td class="num">{failed}</td><td class="num">{missing}</td><td class="num">{int(c.get("skipped_no_relevant", 0))}</td>'
            f'<td class="num">{escape(short_runs(c))}</td><td>{escape(mode_with_identical(s.mode, c))}</td></tr>'
        )
        chart_rows.append(
            (
                s.name,
                [("answered", s.answered, plots.WIN), ("failed", failed, plots.LOSS), ("missing", missing, plots.TIE)],
            )
        )
    svg = plots.stacked_bars(
        chart_rows,
        title="Coverage: judged queries answered, failed and missing",
        kind="coverage",
        x_label="judged queries",
    )
    table = table_html(
        list(COVERAGE_HEADER),
        rows,
        set(range(1, 7)),
    )
    return (
        f"<figure>{svg}<figcaption>Failed and missing queries are scored 0 in trec_eval counting, never dropped."
        f'</figcaption></figure>{table}<p class="small muted">{escape(SHORT_NOTE)}</p>'
    )


def _about(data: ReportData) -> str:
    ds = "".join(
        f"<li><b>{escape(str(d.get('name', '')))}</b> ({escape(str(d.get('split', '')))}): {d.get('queries', '?')} queries, "
        f"{d.get('documents', '?')} documents; corpus <code>{escape(str(d.get('corpus_fingerprint', '')))}</code>, "
        f"qrels <code>{escape(str(d.get('qrels_fingerprint', '')))}</code></li>"
        for d in data.datasets
    )
    systems = "".join(
        f"<li><b>{escape(s.name)}</b>: <code>{escape(json.dumps(s.describe, sort_keys=True))}</code></li>"
        for s in data.systems
        if s.describe
    )
    versions = ", ".join(f"{escape(k)} {escape(str(v))}" for k, v in data.versions.items())
    machine = ", ".join(f"{escape(k)}: {escape(str(v))}" for k, v in data.machine.items())
    return (
        f"<ul>{ds}</ul>"
        + (f"<details><summary>System settings</summary><ul>{systems}</ul></details>" if systems else "")
        + f'<p class="small muted">Versions: {versions}<br>Machine: {machine}</p>'
    )


def render_html(data: ReportData) -> str:
    """The whole page."""
    failed = sum(int(s.coverage.get("failed", 0)) for s in data.systems)
    badges = f'<span class="badge bad">{failed} failed queries</span>' if failed else ""
    ds = ", ".join(f"{d.get('name', '')} ({d.get('split', '')})" for d in data.datasets)
    sections = [
        *([("leaderboard", "Leaderboard", _leaderboard(data))] if data.leaderboard is not None else []),
        ("summary", "Summary", _summary(data) + summary_notes_html(data) + _ci_chart(data)),
        *[
            ("resolution", "Rank resolution", resolution_html(r, fmt.metric_label(data.primary)))
            for r in [data.resolution]
            if r
        ],
        ("curves", "Metric@k curves", f'<p class="small muted chart-hint">{LEGEND_HINT}</p>' + _curves(data)),
        *(
            [("pr-curve", "Precision-recall curve", pr_figure(data.pr_curves, data.pr_rounding))]
            if data.pr_curves
            else []
        ),
        ("comparison", "Comparison", _comparison(data)),
        ("latency", "Latency", latency_html(data)),
        *tradeoff_section(data),
        *([("rerank", "Rerank stages", _rerank(data))] if rerank_rows(data) else []),
        *_answer_side(data),
        *[("judge", "LLM judge", _judge(notes)) for notes in [judge_notes(data.result or ())] if notes],
        ("resources", "Resources", _resources(data)),
        *([("agreement", "Agreement with the reference", _agreement(data))] if agreement_rows(data) else []),
        ("coverage", "Coverage", _coverage(data)),
        ("queries", "Per query", drill_section(data)),
        ("about", "About this run", _about(data)),
    ]
    # a NaN mean (written by hand or by another tool: retbench writes null) is embedded as null, as JSON has no NaN
    embedded = json_safe({"metrics": data.stored, "primary": data.primary, "baseline": data.baseline})
    blob = script_json(embedded)
    header = (
        f'<div class="muted">{escape(ds)} · {len(data.systems)} system{"s" if len(data.systems) != 1 else ""} · '
        f"{escape(data.created)}</div>\n<p>{_mode_note(data)} {badges}</p>"
    )
    footer = (
        f"Generated by retbench from <code>{escape(data.root)}</code>. Means are exactly those in metrics.json "
        "(embedded below as data);\nintervals come from aggregates.json."
    )
    return page(
        data.title,
        header,
        sections,
        footer=footer,
        data=f'<script type="application/json" id="retbench-data">{blob}</script>',
    )
