"""What `retbench tune` prints and writes: the folds' choices, the out-of-sample estimate, the optimism, the noise;
the candidate table (each setting's in-sample mean, rank interval among the settings, latency) and, in
report.html, each setting's quality against its latency with the Pareto front (`report.tradeoff`)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from html import escape

from retbench.pareto import Point
from retbench.report import fmt, html_page
from retbench.report.latency import caches_text, timing_text
from retbench.report.markdown import md_table
from retbench.report.resolution import interval_cell, note
from retbench.report.tradeoff import tradeoff_svg
from retbench.resolution import RankResolution
from retbench.tuning import Candidate, TuneResult


def _ci(ci: tuple[float, float] | None) -> str:
    return f"[{ci[0]:+.4f}, {ci[1]:+.4f}]" if ci else ""


def tune_lines(result: TuneResult, labels: Sequence[str], metric: str, n_queries: int) -> list[str]:
    """Plain lines (the CLI prints them; tests read them): one per fold, then the estimates and the warning."""
    r = result
    aim = "" if r.higher_is_better else " (lower is better: each choice takes the lowest mean)"
    lines = [
        f"{len(r.folds)}-fold cross-validation over {n_queries} queries, {len(labels)} settings, on {metric}{aim}:"
    ]
    for f in r.folds:
        lines.append(
            f"  fold {f.index + 1}: {f.n_queries} queries held out; chose [{f.chosen}] {labels[f.chosen]} "
            f"(mean {f.train_mean:.4f} on the other folds, {f.test_mean:.4f} held out)"
        )
    lo, hi = r.out_of_sample_ci
    lines.append(
        f"out-of-sample {metric}: {r.out_of_sample:.4f} [{lo:.4f}, {hi:.4f}] (95% CI, bootstrap of the whole selection)"
    )
    gap = "in-sample best minus out-of-sample" if r.higher_is_better else "out-of-sample minus in-sample best"
    lines.append(
        f"in-sample best: [{r.in_sample_best}] {labels[r.in_sample_best]} at {r.in_sample_mean:.4f}; "
        f"optimism ({gap}) {round(r.optimism, 12) + 0.0:+.4f}"
    )
    lines.append(f"chosen: [{r.chosen}] {labels[r.chosen]} (chosen by {r.chosen_by_folds} of {len(r.folds)} folds)")
    if r.default is not None and r.delta_vs_default is not None:
        lines.append(
            f"vs the untuned default [{r.default}] ({r.default_mean:.4f} in-sample): out-of-sample "
            f"{r.delta_vs_default:+.4f} {_ci(r.delta_ci)}, p = {r.p_vs_default:.3g} (bootstrap of the whole selection)"
        )
        if r.within_noise:
            lines.append(
                "warning: the tuned setting's edge over the untuned default is inside the noise "
                "(its 95% CI holds 0): keep the default or label more queries"
            )
    return lines


def setting_name(index: int) -> str:
    """How the tables name setting `index` (`[3]`), the rank resolution included."""
    return f"[{index}]"


#: what a percentile cell says for a setting timed as batches (the run report's words)
NOT_PER_QUERY = "not measured per query"
#: why the candidate table is not the estimate to report
IN_SAMPLE = " These ranks are in-sample (every query chose and scored them); report the cross-validated estimate."
CANDIDATE_HEAD = [
    "setting",
    "changes",
    "in-sample mean",
    "rank 95%",
    "folds chose",
    "p50 ms",
    "p95 ms",
    "mean ms",
    "timing",
    "caches",
]
#: how the latency columns are to be read (under the candidate table)
LATENCY_READING = (
    "Latency: every setting is timed under the same cache state (query vectors encoded into the embedding cache "
    "before any search is timed, so the first setting is not the only cold one; see `caches`). `batch mean`: a "
    "batch's wall time shared evenly, so p50/p95 are not measured per query (`batch_size: 1` times each query alone)."
)


def _pct(c: Candidate, key: str) -> str:
    if not c.latency:
        return "—"
    if c.latency.get(key) is None:
        return NOT_PER_QUERY
    return fmt.num(c.latency.get(key), 2)


def candidate_rows(cands: Sequence[Candidate], res: RankResolution | None) -> list[list[str]]:
    """The candidate table, best in-sample mean first; `res` ranks the settings (tied-for-first marked)."""
    order = sorted(range(len(cands)), key=lambda i: -cands[i].mean)
    return [
        [
            setting_name(i),
            cands[i].label,
            f"{cands[i].mean:.4f}",
            interval_cell(res, setting_name(i)),
            str(cands[i].folds_chose),
            _pct(cands[i], "p50"),
            _pct(cands[i], "p95"),
            fmt.num(cands[i].latency.get("mean"), 2, missing="—"),
            timing_text(cands[i].query) if cands[i].latency else "not recorded",
            caches_text(cands[i].query) if cands[i].latency else "not recorded",
        ]
        for i in order
    ]


def candidate_lines(cands: Sequence[Candidate], res: RankResolution | None, metric: str) -> list[str]:
    """The candidate table as plain lines for the terminal, then what the rank interval means."""
    rows = [CANDIDATE_HEAD, *candidate_rows(cands, res)]
    widths = [max(len(r[j]) for r in rows) for j in range(len(CANDIDATE_HEAD))]
    lines = [f"candidates on {metric} (in-sample: every query):"]
    lines += ["  " + "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]
    if res is not None:
        lines.append("  " + note(res) + IN_SAMPLE)
    if any(c.latency for c in cands):
        lines.append("  " + LATENCY_READING)
    return lines


def tradeoff_charts(cands: Sequence[Candidate], metric: str) -> str:
    """Quality (in-sample mean) against p50 and p95 latency per setting, Pareto front marked (`report.tradeoff`)."""
    label = fmt.metric_label(metric)
    charts = []
    # percentiles where every charted setting was timed per query; a batch mean where any was timed as batches
    keys = ("p50", "p95") if all(c.latency.get("p50") is not None for c in cands if c.latency) else ("mean",)
    for key in keys:
        pts = [
            Point(f"{setting_name(i)} {c.label}", c.mean, float(c.latency[key] or 0.0))
            for i, c in enumerate(cands)
            if math.isfinite(c.mean) and (c.latency.get(key) or 0) > 0
        ]
        what = f"{key} latency" if key != "mean" else "mean latency (batch mean)"
        charts.append(tradeoff_svg(pts, x_label=f"{what} (ms)", y_label=label, title=f"{label} vs {what}"))
    return "".join(charts)


def tune_markdown(title: str, lines: Sequence[str], cands: Sequence[Candidate], res: RankResolution | None) -> str:
    """report.md of a tune: what the CLI prints (folds, estimates), then the candidate table."""
    parts = [
        f"# {title}",
        "",
        "```",
        *lines,
        "```",
        "",
        "## Candidates",
        "",
        md_table(CANDIDATE_HEAD, candidate_rows(cands, res)),
    ]
    if res is not None:
        parts += ["", note(res) + IN_SAMPLE]
    if any(c.latency for c in cands):
        parts += ["", LATENCY_READING]
    return "\n".join(parts) + "\n"


def tune_html(
    title: str, lines: Sequence[str], cands: Sequence[Candidate], res: RankResolution | None, metric: str
) -> str:
    """report.html of a tune: the selection, the candidate table and the quality x latency trade-off charts."""
    sections = [
        ("selection", "Cross-validated choice", f"<pre>{escape(chr(10).join(lines))}</pre>"),
        (
            "candidates",
            "Candidates",
            html_page.text_table(CANDIDATE_HEAD, candidate_rows(cands, res), {0, 1, 8, 9})
            + (html_page.note(note(res) + IN_SAMPLE) if res else "")
            + (html_page.note(LATENCY_READING) if any(c.latency for c in cands) else ""),
        ),
    ]
    charts = tradeoff_charts(cands, metric)
    if charts:
        text = (
            f"<p>Each setting's in-sample {escape(fmt.metric_label(metric))} against its latency per query. Larger "
            "points joined by the dashed line are the <b>Pareto front</b>: no other setting is at least as good on "
            "both axes and better on one.</p>"
        )
        sections.append(("tradeoff", "Trade-offs", text + charts))
    return html_page.page(title, "", sections)


__all__ = [
    "CANDIDATE_HEAD",
    "candidate_lines",
    "candidate_rows",
    "setting_name",
    "tradeoff_charts",
    "tune_html",
    "tune_lines",
    "tune_markdown",
]
