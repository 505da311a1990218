"""The history trend (results.history_read entries) as a terminal table and a one-file HTML page with a chart.

A column (and a chart line) is one series: the points of one (experiment, dataset, system), so runs on
other data or of another experiment never join a line; its label adds the dataset and the experiment
only where the entries shown hold more than one.
"""

from __future__ import annotations

import json
from html import escape
from typing import TYPE_CHECKING, Any

from retbench.anytime import WATCHING, series_sequence
from retbench.report import fmt, plots
from retbench.results.history import failed_point

if TYPE_CHECKING:
    from retbench.report.terminal import FittedTable
    from retbench.results.history_read import Entry

Series = tuple[str, str, str]  # (experiment, dataset identity JSON, system)


def _dataset_label(identity: str) -> str:
    d = json.loads(identity)
    name = f"{d.get('name')}/{d.get('split')}" if d.get("name") else "no dataset recorded"
    return (
        name
        + (f" {d['queries']}q" if d.get("queries") else "")
        + (f" {str(d['corpus_fingerprint'])[:6]}" if d.get("corpus_fingerprint") else "")
    )


def series_of(entries: list[Entry], metric: str) -> tuple[list[Series], dict[Series, str]]:
    """The series holding `metric`, in order of first appearance, and each one's label."""
    found: list[Series] = []
    for e in entries:
        held = [k for k in e.scores if metric in e.scores[k]] + [k for k in e.points if _failed(e, k)]
        found += [s for s in dict.fromkeys(e.series(k) for k in held) if s not in found]
    experiments = {s[0] for s in found}
    several = len({s[1] for s in found}) > 1
    labels = {}
    for s in found:
        label = s[2]
        if several:
            label += f" · {_dataset_label(s[1])}"
        if len(experiments) > 1:
            label += f" · {s[0]}"
        labels[s] = label
    return found, labels


def _failed(e: Entry, key: str) -> bool:
    return failed_point(e.coverage.get(key, {}))


def _counts(cov: dict[str, object]) -> str:
    """' (answered/judged)' when some judged query went unanswered, and the queries left out for having no
    relevant document, so the dataset's query count (`40q`) adds up: 40 = 39 judged + 1 skipped."""
    parts = []
    if cov.get("judged") and cov.get("answered") != cov.get("judged"):
        parts.append(f"{cov['answered']}/{cov['judged']}")
    if cov.get("skipped_no_relevant"):
        parts.append(f"{cov['skipped_no_relevant']} skipped")
    return f" ({', '.join(parts)})" if parts else ""


def _point(e: Entry, s: Series, metric: str) -> tuple[str | None, Any]:
    """(results key, (mean, lo, hi)) of the entry's point of series `s` (None: it holds none)."""
    for k, scores in e.scores.items():
        if e.series(k) == s and metric in scores:
            return k, scores[metric]
    return None, None


def trend_rows(entries: list[Any], metric: str) -> tuple[list[str], list[list[str]]]:
    """(header, rows): one row per run, oldest first; one column per series (mean [CI])."""
    series, labels = series_of(entries, metric)
    header = ["run", "date", "commit", "tag", "gate", *(labels[s] for s in series)]
    rows = []
    for e in entries:
        commit = (e.git_commit or "—")[:10] + ("*" if e.git_dirty else "")
        verdicts = e.gates
        gate = (
            next(iter(verdicts.values()))
            if len(verdicts) == 1 and len(e.points) == 1
            else ", ".join(f"{e.points.get(k, (k,))[0]} {v}" for k, v in verdicts.items())
        )
        cells = [str(e.id), e.created[:19].replace("T", " "), commit, e.tag or "", gate]
        for s in series:
            key, v = _point(e, s, metric)
            failed = [k for k in e.points if e.series(k) == s and _failed(e, k)]
            if failed:  # a failed run is no trend point: said, never a 0.0
                cov = e.coverage[failed[0]]
                cells.append("failed" + (f" ({cov['failed']}/{cov['judged']} queries)" if cov.get("judged") else ""))
                continue
            if v is None:
                cells.append("—")
                continue
            mean, lo, hi = v
            ci = f" [{fmt.num(lo, 3)}, {fmt.num(hi, 3)}]" if lo is not None and hi is not None else ""
            cells.append(f"{fmt.num(mean)}{ci}{_counts(e.coverage.get(key, {}))}")
        rows.append(cells)
    return header, rows


def sequence_lines(entries: list[Entry], metric: str, alpha: float = 0.05) -> list[str]:
    """Per series: the anytime-valid sequence of its level over its runs, oldest first (each run's mean is one
    observation; a failed run holds no number and is not one). The latest interval may be read after every
    nightly run; a run far outside it says the level moved."""
    series, labels = series_of(entries, metric)
    out = []
    for s in series:
        values = [v[0] for e in entries if (v := _point(e, s, metric)[1]) is not None and v[0] is not None]
        if not values:
            continue
        seq = series_sequence(values, metric, alpha)
        est, low, high = seq.at(seq.n)
        kind = "" if seq.exact else ", asymptotic"
        out.append(
            f"{labels[s]}: level {fmt.num(est)}, {1 - alpha:.0%} confidence sequence [{fmt.num(low)}, {fmt.num(high)}]"
            f" over {fmt.counted(seq.n, 'run', 'runs')}{kind}; {WATCHING.replace('query', 'run')}"
        )
    return out


def render_trend(entries: list[Entry], metric: str) -> FittedTable:
    """The trend as a terminal table that fits the console: many series transpose (one row per series,
    one column per run) or split into parts, never cutting a label (`report.terminal.FittedTable`)."""
    from retbench.report.terminal import FittedTable

    header, rows = trend_rows(entries, metric)
    title = (
        f"history: {fmt.metric_label(metric)} (mean [95% CI]; * = uncommitted changes; "
        "one column per experiment, dataset and system)"
    )
    return FittedTable(header, [list(r) for r in rows], title=title, keys=1, left={1, 2, 3, 4}, corner="run")


def _dataset_name(identity: dict[str, object]) -> str:
    return f"{identity.get('name')}/{identity.get('split')}" if identity.get("name") else "no dataset recorded"


def _listing(label: str, values: set[str]) -> str:
    return f"{label} {', '.join(sorted(values))}" if values else f"no {label}"


def what_is_recorded(entries: list[Entry]) -> str:
    """The experiments, systems, datasets and metrics `entries` hold: said when a filter matched nothing."""
    points = [p for e in entries for p in e.points.values()]
    return "; ".join(
        [
            _listing("experiments", {e.experiment for e in entries}),
            _listing("systems", {name for name, _ in points}),
            _listing("datasets", {_dataset_name(ds) for _, ds in points}),
            _listing("metrics", {m for e in entries for scores in e.scores.values() for m in scores}),
        ]
    )


def nothing_matched(
    filters: dict[str, str | None], everything: list[Entry], kept: list[Entry], metric: str | None
) -> str:
    """Why a `history` query has nothing to show, and what it could ask for instead.

    `everything`: the history unfiltered; `kept`: the runs the filters kept (all their metrics), so a metric
    none of them recorded is told apart from filters that matched no run."""
    asked = " ".join(f"{k} {v}" for k, v in filters.items() if v is not None)
    if not everything:
        return "the history holds no run yet (every `retbench run` adds one)"
    if not kept:
        return f"no run in the history matches {asked}; it holds {what_is_recorded(everything)}"
    where = f"runs matching {asked}" if asked else "runs"
    have = sorted({m for e in kept for scores in e.scores.values() for m in scores})
    failed = sum(_failed(e, k) for e in kept for k in e.points)
    why = (
        f" ({fmt.counted(failed, 'failed point holds', 'failed points hold')} no number; --metric NAME shows them)"
        if failed
        else ""
    )
    return f"no {where} recorded {metric or 'a metric'}; they recorded: {', '.join(have) or 'no metric'}{why}"


def trend_html(entries: list[Entry], metric: str) -> str:
    """A self-contained page: the metric per series across runs (SVG) and the same numbers as a table."""
    header, rows = trend_rows(entries, metric)
    series, labels = series_of(entries, metric)
    lines = []
    for s in series:
        pts = [(e.id, _point(e, s, metric)[1][0]) for e in entries if _point(e, s, metric)[1] is not None]
        if pts:
            lines.append(plots.Series(labels[s], [float(x) for x, _ in pts], [y for _, y in pts]))
    svg = plots.line_chart(
        lines, title=f"{fmt.metric_label(metric)} per run", x_label="history run", y_label=fmt.metric_label(metric)
    )
    th = "".join(f"<th>{escape(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{escape(c)}</td>" for c in r) + "</tr>" for r in rows)
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>retbench history</title>'
        "<style>body{font:14px system-ui,sans-serif;margin:24px}table{border-collapse:collapse}"
        "td,th{padding:4px 8px;border-bottom:1px solid #ddd;text-align:left}</style></head><body>"
        f"<h1>History: {escape(fmt.metric_label(metric))}</h1>"
        "<p>Each line joins the runs of one experiment, dataset (name, split, queries, corpus and qrels "
        "fingerprints) and system.</p>"
        f"<figure>{svg}</figure>"
        f'<table id="history"><thead><tr>{th}</tr></thead><tbody>{body}</tbody></table></body></html>\n'
    )
