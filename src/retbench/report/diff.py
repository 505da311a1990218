"""`retbench diff` rendered: the label-free measures with their intervals, the queries that moved most (their two
top k side by side), documents that entered or left many queries' top k, and (where qrels judge some queries)
whether movement predicted the metric's change. One gathering (`_rows`), two renderings (Markdown, HTML), so
they cannot disagree."""

from __future__ import annotations

import math
from html import escape

from retbench.movement import RunDiff
from retbench.report.html_page import note, page, table_html, text_table


def _num(v: float, digits: int = 3) -> str:
    return "n/a" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{v:.{digits}f}"


def _headline(d: RunDiff) -> str:
    c = d.counts
    n = max(c["queries"], 1)
    return (
        f"{c['changed_set']} of {c['queries']} queries ({c['changed_set'] / n:.1%}) change their top {d.k} as a set, "
        f"{c['changed_order']} ({c['changed_order'] / n:.1%}) as an order"
    )


def _measure_rows(d: RunDiff) -> list[list[str]]:
    return [
        [
            m.name,
            _num(m.mean),
            f"[{_num(m.low)}, {_num(m.high)}]",
            str(m.n),
            m.meaning + (f" (p = {d.p:g})" if m.name.startswith("rbo") else ""),
        ]
        for m in d.summary
    ]


_MEASURE_HEADER = ["measure", "mean", "95% CI", "queries", "what it is"]


def _labelled_lines(d: RunDiff) -> list[str]:
    lab = d.labelled
    if lab is None:
        return []
    return [
        f"On the {lab.n} compared queries the qrels judge ({lab.n_changed} with a changed top {d.k}), {lab.metric} "
        f"moved on {_num(lab.metric_changed_when_changed * 100, 0)}% of the changed and "
        f"{_num(lab.metric_changed_when_unchanged * 100, 0)}% of the unchanged ones "
        f"(mean |Δ| {_num(lab.mean_abs_delta_changed)} vs {_num(lab.mean_abs_delta_unchanged)}); "
        f"Spearman's rho between 1 − RBO_EXT and |Δ {lab.metric}|: {_num(lab.spearman)}."
    ]


def diff_markdown(d: RunDiff) -> str:
    """The diff as Markdown (what the terminal prints)."""
    lines = [f"# {d.name_b} vs {d.name_a}: how much the top {d.k} moves (no labels)", "", _headline(d) + ".", ""]
    lines += ["| " + " | ".join(_MEASURE_HEADER) + " |", "|" + "---|" * len(_MEASURE_HEADER)]
    lines += ["| " + " | ".join(r) + " |" for r in _measure_rows(d)]
    lines += ["", f"Intervals: percentile bootstrap over queries, {d.n_resamples} resamples, seed {d.seed}."]
    if d.moved:
        lines += ["", "## Queries that moved most (lowest RBO_EXT)", ""]
        lines += [
            "| query | RBO_EXT | Jaccard | top of " + d.name_a + " | top of " + d.name_b + " |",
            "|---|---|---|---|---|",
        ]
        for m in d.moved:
            lines.append(
                f"| {m.qid} | {_num(m.rbo_ext)} | {_num(m.jaccard)} | {' '.join(m.top_a[:5])} | {' '.join(m.top_b[:5])} |"
            )
    for title, shifts in (
        (f"Documents that entered the top {d.k}", d.appeared),
        (f"Documents that left the top {d.k}", d.vanished),
    ):
        if shifts:
            lines += ["", f"## {title} of many queries", ""]
            lines += [f"- {s.doc}: {s.queries} queries" for s in shifts]
    if d.labelled is not None:
        lines += ["", "## Movement against the labelled queries", "", *_labelled_lines(d)]
    for n in d.notes:
        lines += ["", f"note: {n}"]
    return "\n".join(lines) + "\n"


def _side_by_side(top_a: list[str], top_b: list[str]) -> str:
    """Two top-k lists as one small table; a doc the other side lacks is marked."""
    sa, sb = set(top_a), set(top_b)
    rows = []
    for i in range(max(len(top_a), len(top_b))):
        da = top_a[i] if i < len(top_a) else ""
        db = top_b[i] if i < len(top_b) else ""
        ca = ' class="neg"' if da and da not in sb else ""
        cb = ' class="pos"' if db and db not in sa else ""
        rows.append(f'<tr><td class="num">{i + 1}</td><td{ca}>{escape(da)}</td><td{cb}>{escape(db)}</td></tr>')
    return '<table class="compare"><tbody>' + "".join(rows) + "</tbody></table>"


def diff_html(d: RunDiff) -> str:
    """The diff as one self-contained HTML page (the shared page kit)."""
    sections = [
        (
            "measures",
            "Measures",
            f"<p>{escape(_headline(d))}.</p>"
            + text_table(_MEASURE_HEADER, _measure_rows(d), left={0, 4})
            + note(f"Intervals: percentile bootstrap over queries, {d.n_resamples} resamples, seed {d.seed}."),
        )
    ]
    if d.moved:
        rows = [
            f'<tr><td>{escape(m.qid)}<span class="ci">{escape(m.text)}</span></td>'
            f'<td class="num">{_num(m.rbo_ext)}</td><td class="num">{_num(m.jaccard)}</td>'
            f"<td>{_side_by_side(m.top_a, m.top_b)}</td></tr>"
            for m in d.moved
        ]
        header = ["query", "RBO_EXT", "Jaccard", f"rank: {escape(d.name_a)} | {escape(d.name_b)}"]
        sections.append(
            (
                "moved",
                "Queries that moved most",
                table_html(header, rows, {1, 2})
                + note(
                    "Left: the current system's top k, a document the candidate dropped in red; right: the candidate's, "
                    "a new document in blue."
                ),
            )
        )
    shifts = []
    for title, items in (("entered", d.appeared), ("left", d.vanished)):
        if items:
            shifts.append(f"<h3>Documents that {title} the top {d.k}</h3>")
            shifts.append(text_table(["document", "queries"], [[s.doc, str(s.queries)] for s in items], left={0}))
    if shifts:
        sections.append(("documents", "Documents", "".join(shifts)))
    if d.labelled is not None:
        sections.append(("labelled", "Against the labels", "".join(f"<p>{escape(x)}</p>" for x in _labelled_lines(d))))
    intro = f'<p class="muted">{escape(d.name_b)} against {escape(d.name_a)}, top {d.k}, no labels needed.</p>'
    footer = "".join(note(n) for n in d.notes)
    return page(f"diff: {d.name_b} vs {d.name_a}", intro, sections, footer=footer)
