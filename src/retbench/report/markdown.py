"""Markdown renderers: the A/B comparison and the results report.

Both are plain GitHub-flavoured Markdown (tables, no HTML beyond <details>), so they read in a
terminal, a PR, or a wiki. Every mean is shown next to its coverage ("scored N of M").
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from retbench.anytime import WATCHING
from retbench.data.status import FAILED_COUNT, MISSING, NOT_ANSWERED_COUNTS
from retbench.estimates import source_label
from retbench.metrics.coverage import mode_with_identical
from retbench.report import fmt
from retbench.report.holes import holes_markdown
from retbench.report.judge import judge_notes
from retbench.report.resolution import interval_cell, note, rank_label, resolution_markdown
from retbench.report.weakening import summary_caveats

if TYPE_CHECKING:
    from retbench.comparison import Comparison, MetricComparison
    from retbench.leaderboard import Leaderboard
    from retbench.report.model import ReportData


# Characters that make Markdown of plain text: backslash, code spans, emphasis, GFM strikethrough and table cells;
# a `]` that would close a link or image's text (followed by `(`, `[` or `:`; an interval like `[0.1, 0.3]` stays
# as written, as a bare `[...]` links nothing here); `_` only where it can open or close emphasis (not between two
# letters or digits, so `bm25_weak` stays as written). Each is backslash-escaped, as CommonMark allows for any
# ASCII punctuation.
_MARKDOWN = re.compile(r"[\\`*~|]|\](?=[(\[:])|(?<![^\W_])_|_(?![^\W_])")


def md_text(text: object) -> str:
    """User text (an experiment, system or dataset name, a query, an error message) as inert Markdown: `<`, `>`
    and `&` become entities, so a name holding HTML (`<img onerror=...>`) reads as text wherever report.md is
    rendered; the Markdown marks (`*`, `_`, backticks, a link's `]`, `~`, `|`, `\\`) are backslash-escaped, so a
    name cannot bold, link, open a code span or add a table column; a line break is a space."""
    text = str(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return _MARKDOWN.sub(lambda m: "\\" + m.group(), text).replace("\r", " ").replace("\n", " ")


class Md(str):
    """A table cell already written as Markdown (a bold best value): `md_table` writes it as it is."""


def md_code(text: object) -> str:
    """User text as a code span (literal: Markdown renders no HTML inside one), fenced with more backticks than
    the text holds in a row, so a name with a backtick cannot close the span and let HTML out."""
    text = str(text).replace("\n", " ")
    fence = "`" * (max((len(run) for run in re.findall(r"`+", text)), default=0) + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def _cell(text: object) -> str:
    return text if isinstance(text, Md) else md_text(text)


def _table(header: Sequence[str], rows: Sequence[Sequence[object]]) -> list[str]:
    out = ["| " + " | ".join(_cell(h) for h in header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    out += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in rows]
    return out


def md_table(header: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """A Markdown table with cells escaped: the one table writer every report.md uses."""
    return "\n".join(_table(header, rows))


def _side(name: str, counts: Mapping[str, int]) -> str:
    answered = counts["queries"] - counts[FAILED_COUNT] - counts[MISSING]
    extra = [f"{counts[k]} {k}" for k in NOT_ANSWERED_COUNTS if counts.get(k)]
    return f"{md_code(name)} {fmt.coverage(answered, counts['queries'])}" + (
        f" ({', '.join(extra)}: counted as 0)" if extra else ""
    )


def sequence_lines(metrics: Sequence[MetricComparison]) -> list[str]:
    """The anytime-valid sequence of each metric's Δ (when compare was asked for them), with what it allows."""
    out = []
    for m in metrics:
        if m.sequence:
            d = m.sequence["delta"]
            kind = "" if d["exact"] else ", asymptotic"
            out.append(
                f"- {fmt.metric_label(m.metric)} Δ confidence sequence ({1 - d['alpha']:.0%}, {d['n']} queries"
                f"{kind}): [{d['low']:+.4f}, {d['high']:+.4f}]; {WATCHING}."
            )
    return [*out, ""] if out else []


def comparison_markdown(
    cmp: Comparison, *, alpha: float = 0.05, top_metric: str | None = None, level: int = 1, options: Sequence[str] = ()
) -> str:
    """A comparison (compare.Comparison) as Markdown: what was tested (with `options`, the hints of widening
    options not given yet), one table per pair (headed "B vs A", as its columns are), then the most changed
    queries."""
    n_cells = cmp.family
    hint = f" ({'; '.join(options)})" if options else ""
    lines = [f"{'#' * level} A/B comparison", "", comparison_scope(cmp) + hint + ".", ""]
    if cmp.note:
        lines += [f"Note: {cmp.note}.", ""]
    for pair in cmp.pairs:
        a, b = pair.system_a, pair.system_b
        lines += [
            f"{'#' * (level + 1)} {md_code(b)} (B) vs {md_code(a)} (A)",
            "",
            f"{_side(a, pair.counts_a)}; {_side(b, pair.counts_b)}.",
            "",
        ]
        rows = []
        for m in pair.metrics:  # a pair whose metrics were all unpaired gets its note and no empty table
            sig = " *" if m.adjusted.get("randomization", 1.0) < alpha else ""
            rows.append(
                [
                    fmt.metric_label(m.metric),
                    fmt.num(m.mean_a),
                    fmt.num(m.mean_b),
                    f"{m.delta:+.4f}{sig}",
                    f"[{m.ci_low:+.4f}, {m.ci_high:+.4f}]",
                    fmt.p_short(m.pvalues["randomization"]),
                    fmt.p_short(m.adjusted.get("randomization")),
                    fmt.p_short(m.adjusted.get("ttest")),
                    fmt.p_short(m.adjusted.get("wilcoxon")),
                    fmt.num(m.effect_size, 2),
                    f"{m.wins}/{m.ties}/{m.losses}",
                ]
            )
        header = ["metric", f"A: {a}", f"B: {b}", "Δ (B − A)", f"{cmp.confidence:.0%} CI", "p rand."]
        header += ["p rand. Holm", "p t-test Holm", "p Wilcoxon Holm", "d_z", "win/tie/loss"]
        if rows:
            lines += [*_table(header, rows), ""]
        lines += sequence_lines(pair.metrics)
        if fmt.unpaired(pair.unpaired):
            lines += [f"{fmt.unpaired(pair.unpaired)}.", ""]
        focus = next((m for m in pair.metrics if m.metric == top_metric), pair.metrics[0] if pair.metrics else None)
        if focus is not None and focus.top_changes:
            lines += [
                f"Most changed queries on {fmt.metric_label(focus.metric)} (biggest gains, then biggest losses):",
                "",
            ]
            lines += _table(
                ["query", "text", f"A: {a}", f"B: {b}", "Δ", "status"],
                [
                    [
                        c.query_id,
                        _short(c.text),
                        fmt.num(c.a),
                        fmt.num(c.b),
                        f"{c.delta:+.4f}",
                        c.status_a if c.status_a == c.status_b else f"{c.status_a} → {c.status_b}",
                    ]
                    for c in focus.top_changes
                ],
            )
            lines.append("")
    lines += [
        f"Δ is B − A; `*` marks a Holm-corrected randomization p below {alpha:g}. Tests are paired over the same queries: "
        f"randomization (sign flip, {cmp.n_resamples:,} resamples, seed {cmp.seed}; its smallest p is "
        f"1/{cmp.n_resamples + 1:,}), t-test, and Wilcoxon signed-rank "
        f"(zero_method `{cmp.wilcoxon_zero_method}`: zero deltas dropped). Holm correction runs across all {n_cells} "
        f"(metric, pair) comparisons, separately for each test. CI: paired percentile bootstrap of the mean delta. "
        "d_z = mean delta / sd of deltas. Failed and unanswered queries count 0, never dropped.",
        "",
    ]
    return "\n".join(lines)


def comparison_scope(cmp: Comparison) -> str:
    """What a comparison tested (which pairs, on which metrics, how many tests), without a full stop."""
    bases = list(dict.fromkeys(p.system_a for p in cmp.pairs))
    metrics = ", ".join(fmt.metric_label(m) for m in cmp.metrics)
    pairs = len(cmp.pairs)
    who = (
        f"each system (B) against {md_code(bases[0])} (A)"
        if len(bases) == 1 and pairs > 1
        else f"{md_code(cmp.pairs[0].system_b)} (B) against {md_code(cmp.pairs[0].system_a)} (A)"
        if pairs == 1
        else f"{pairs} pairs"
    )
    if not metrics:  # every metric applies to one side only (comparison.PairComparison.unpaired says which)
        return f"Tested: {who}: no metric has a value for both systems on any query, so nothing was tested"
    return f"Tested: {who} on {metrics}: {cmp.family} test{'s' if cmp.family != 1 else ''}, Holm-corrected together"


def _short(text: str, n: int = 80) -> str:
    return text if len(text) <= n else text[: n - 1] + "…"


def leaderboard_markdown(board: Leaderboard) -> list[str]:
    """The leaderboard (retbench.leaderboard.Leaderboard) as a Markdown section."""
    lines = [f"## Leaderboard: {fmt.metric_label(board.metric)}", ""]
    best = {d: board.best(d) for d in board.datasets}
    rows = []
    for system, scores, mean, _rank in board.rows():
        cells = [
            Md(f"**{fmt.num(v)}**") if v is not None and v == best[d] else ("—" if v is None else fmt.num(v))
            for d, v in zip(board.datasets, scores, strict=True)
        ]
        interval = [interval_cell(board.resolution, system)] if board.resolution is not None else []
        rows.append(
            [system, *cells, "—" if mean is None else fmt.num(mean), rank_label(board.avg_rank.get(system)), *interval]
        )
    extra = ["rank 95%"] if board.resolution is not None else []
    lines += _table(["system", *board.datasets, "mean", "avg rank", *extra], rows)
    lines += [
        "",
        "Rank 1 = best on a dataset (ties share the average rank; no score ranks last); the mean is over datasets, "
        "shown only for systems scored on all of them. Best per dataset in bold.",
        *(["", note(board.resolution, over_datasets=True)] if board.resolution is not None else []),
        "",
    ]
    return lines


def report_markdown(data: ReportData) -> str:
    """A results report (report.model.ReportData) as Markdown: the HTML report's tables without its plots."""
    lines = [f"# {md_text(data.title)}", ""]
    ds = ", ".join(
        f"{d.get('name', '')} ({d.get('split', '')}, {d.get('queries', '?')} queries, "
        f"{d.get('documents', '?')} documents)"
        for d in data.datasets
    )
    lines += [f"{md_text(ds)} · {len(data.systems)} systems · {md_text(data.created)}", ""]
    if data.modes != {"trec_eval"}:
        lines += [
            "> **pytrec_eval mode**: means marked † are over *answered* queries only; unanswered queries are left "
            "out, not scored 0.",
            "",
        ]
    else:
        lines += ["Counting: trec_eval (every judged query counts; failed or unanswered queries score 0).", ""]
    if data.leaderboard is not None:
        lines += leaderboard_markdown(data.leaderboard)
    lines += resolution_markdown(getattr(data, "resolution", None), fmt.metric_label(data.primary))
    lines += ["## Summary", ""]
    rows = []
    for s in data.systems:
        dagger = " †" if s.mode == "pytrec_eval" else ""
        cells = [
            s.name,
            f"failed: {s.error}"
            if s.error
            else fmt.coverage(s.answered, s.judged)
            + (f" ({s.coverage['failed']} failed)" if s.coverage.get("failed") else ""),
        ]
        for m in data.metrics:
            v = s.means.get(m)
            ci = s.ci.get(m)
            bounds = fmt.interval(*ci) if ci else ""
            cells.append(
                "—"
                if v is None
                else (f"{v:.4f}{dagger}" + (f" {bounds}" if bounds else "") if fmt.finite(v) else fmt.NO_SCORE)
                + s.applies_note(m)
            )
        rows.append(cells)
    lines += _table(["system", "coverage", *(fmt.metric_label(m) for m in data.metrics)], rows)
    lines += ["", "Means with 95% percentile-bootstrap intervals over queries.", ""]
    lines += [line for c in summary_caveats(data) for line in (f"> **Note** {md_text(c)}", "")]
    lines += holes_markdown(getattr(data, "holes", []), md_text)
    if any(s.applies for s in data.systems):
        lines += [
            "A metric that concerns only some questions (answer metrics: reference answers, `answerable: false`) "
            "is averaged over those, shown as (n of M).",
            "",
        ]
    if any(s.judged_counts for s in data.systems):
        lines += [
            "LLM-judged metrics are averaged over the queries whose verdicts came back valid, shown as (judged N of M); "
            "a failed or unparseable verdict is counted there, never scored (verdicts in systems/<name>/judged.json).",
            "",
        ]
    notes = judge_notes(data.result or ())
    lines += [*(f"- {md_code(name)}: {md_text(text)}" for name, text in notes), *([""] if notes else [])]
    if any(source_label(e) for s in data.systems for e in s.estimates.values()):
        lines += [
            "A mean from LLM labels says so: (LLM labels, judge bias uncorrected), or (PPI m [low, high], "
            "n human / N LLM), the prediction-powered estimate of the mean under human labels from the queries "
            "labelled both ways (README: How sure is each number).",
            "",
        ]
    if data.comparison is not None:
        lines.append(comparison_markdown(data.comparison, top_metric=data.primary, level=2))
    lines += _latency_sections(data)
    from retbench.report.stages import (
        AGREEMENT_HEADER,
        AGREEMENT_NOTE,
        RERANK_HEADER,
        RERANK_NOTE,
        agreement_rows,
        rerank_rows,
    )
    from retbench.report.tables import COVERAGE_HEADER, RESOURCE_HEADER, SHORT_NOTE, resource_rows, short_runs

    reranks = rerank_rows(data)
    if reranks:
        lines += ["## Rerank stages", "", *_table(RERANK_HEADER, reranks), "", RERANK_NOTE, ""]
    resources = resource_rows(data.systems)
    if resources:
        lines += ["## Resources", "", *_table(RESOURCE_HEADER, resources), ""]
    agreement = agreement_rows(data)
    if agreement:
        lines += ["## Agreement with the reference system", "", *_table(AGREEMENT_HEADER, agreement), ""]
        lines += [AGREEMENT_NOTE, ""]
    lines += ["## Coverage", ""]
    lines += _table(
        list(COVERAGE_HEADER),
        [
            [s.name, f"failed as a whole: {s.error}", "—", "—", "—", "—", "—", s.mode]
            if s.error
            else [
                s.name,
                s.judged,
                s.answered,
                s.coverage.get("failed", 0),
                s.coverage.get(MISSING, 0),
                s.coverage.get("skipped_no_relevant", 0),
                short_runs(s.coverage),
                mode_with_identical(s.mode, s.coverage),
            ]
            for s in data.systems
        ],
    )
    lines += ["", SHORT_NOTE, ""]
    lines += ["", f"Versions: {', '.join(f'{k} {v}' for k, v in data.versions.items())}", ""]
    return "\n".join(lines)


def _latency_sections(data: ReportData) -> list[str]:
    """Query latency; breakdown by group per system, latency by stage, LLM usage and cost (each only when recorded)."""
    from retbench.report import breakdowns as b
    from retbench.report import latency as lat

    lines: list[str] = []
    timed = lat.latency_rows(data.systems)
    if timed:
        lines += ["## Latency", "", *_table(lat.LATENCY_HEADER, timed), "", lat.LATENCY_NOTE, ""]
        parts = lat.part_rows([(s.name, s.stages) for s in data.systems])
        if parts:
            lines += [*_table(lat.PARTS_HEADER, parts), "", lat.PARTS_NOTE, ""]
    grouped = [s for s in data.systems if s.breakdown]
    if grouped:
        lines += ["## Breakdown by group", "", b.BREAKDOWN_NOTE, ""]
        for s in grouped:
            lines += [
                f"### {md_code(s.name)}",
                "",
                *_table(b.breakdown_header(data.metrics, b.has_rates(s)), b.breakdown_rows(s, data.metrics)),
            ]
            lines.append("")
    stages = b.stage_rows(data.systems)
    if stages:
        lines += ["## Latency by stage", "", *_table(b.STAGE_HEADER, stages), "", b.STAGE_NOTE, ""]
    usage = b.usage_rows(data.systems)
    if usage:
        lines += ["## LLM tokens and cost", "", *_table(b.USAGE_HEADER, usage), "", b.USAGE_NOTE, ""]
    return lines
