"""Rank resolution in the reports: each system's bootstrap rank interval and the group tied for first.

The statistics live in `retbench.resolution` (`rank_intervals`); this module builds its input from stored
per-query tables and words its output for the terminal, Markdown and HTML views. A table here is
[queries x systems] on one metric, paired on the union of the systems' query ids: a query a system did not
answer (failed, timed out, missing) counts 0 for it, as in `comparison.align`, and NaN (the metric does not
apply to the query) is left out of that system's mean.
"""

from __future__ import annotations

from collections.abc import Sequence
from html import escape

import numpy as np

from retbench.data.status import UNANSWERED
from retbench.errors import InputError
from retbench.evaluation import Evaluation
from retbench.metrics.registry import lower_is_better, parse_metric
from retbench.resolution import RankResolution, queries_to_separate, rank_intervals
from retbench.results.model import StudyResult
from retbench.results.read import FolderTables

CONFIDENCE = 0.95
N_RESAMPLES = 2000
TIED_MARK = "tied 1st"  # printed beside the rank interval of every system tied for first
NOT_RANKED = "not ranked"  # a system shown beside the ranked ones without a value of the ranking metric


def paired_table(evaluations: Sequence[Evaluation], metric: str) -> np.ndarray:
    """[queries x systems] values of `metric`, rows the union of the systems' query ids (unanswered = 0)."""
    qids = list(dict.fromkeys(q for ev in evaluations for q in ev.query_ids))
    table = np.zeros((len(qids), len(evaluations)), dtype=np.float64)
    for j, ev in enumerate(evaluations):
        pos = {q: i for i, q in enumerate(ev.query_ids)}
        column = ev.column(metric)
        for i, q in enumerate(qids):
            r = pos.get(q)
            if r is None:
                continue
            value = float(column[r])
            table[i, j] = 0.0 if ev.status[r] in UNANSWERED and not np.isnan(value) else value
    return table


def has_tables(result: StudyResult) -> bool:
    """Whether the per-query tables can be read (results built from means alone have none to resample)."""
    return bool(result.tables) or result.source is not None


def has_value(ev: Evaluation, metric: str) -> bool:
    """Whether `ev` carries `metric` with a value on some query (scope_miss_rate is n/a for an unscoped system)."""
    return metric in ev.metrics and bool(np.isfinite(ev.column(metric)).any())


def resolve(evaluations: Sequence[Evaluation], metric: str) -> RankResolution | None:
    """Rank intervals on one dataset, paired over its queries, of the systems with a value of `metric` (the others
    are listed as not ranked); None for fewer than three such systems (two are settled by their paired comparison)."""
    ranked = [ev for ev in evaluations if has_value(ev, metric)]
    if len(ranked) < 3:
        return None
    table = paired_table(ranked, metric)
    res = rank_intervals(
        table,
        [ev.system for ev in ranked],
        n_resamples=N_RESAMPLES,
        confidence=CONFIDENCE,
        higher_is_better=not lower_is_better(metric),
    )
    res.unranked.extend(ev.system for ev in evaluations if not has_value(ev, metric))
    return res


def resolve_result(result: StudyResult, keys: Sequence[str], metric: str) -> RankResolution | None:
    """Rank intervals of a study's systems (`keys`, failed ones left out) on one dataset, from their per-query
    tables: held by the study, read through its source, else read from its results folder (a study that wrote
    its folder before rendering). None when fewer than three can be ranked or a table cannot be read."""
    ranked = [k for k in keys if k in result.systems and not result.systems[k].failed]
    if len(ranked) < 3:
        return None
    try:
        name = parse_metric(metric).name
        if has_tables(result):
            evs = [result.evaluation(k) for k in ranked]
        elif result.root is not None:
            folder = FolderTables(result.root, result.manifest)
            evs = [folder.evaluation(k) for k in ranked]
        else:
            return None
    except (InputError, OSError):  # ConfigError is an InputError: a metric the registry no longer knows
        return None
    for key, ev in zip(ranked, evs, strict=True):
        ev.system = key
    return resolve(evs, name)


def resolution_rows(res: RankResolution) -> list[list[str]]:
    """(system, mean, rank, rank interval, share of resamples ranked first), best first, then the systems not
    ranked (no value of the metric)."""
    sign = -1.0 if res.higher_is_better else 1.0
    order = sorted(range(len(res.names)), key=lambda i: (res.rank[i], sign * res.means[i]))
    ranked = [
        [
            res.names[i],
            f"{res.means[i]:.4f}",
            str(res.rank[i]),
            interval_cell(res, res.names[i]),
            f"{res.p_first[i]:.0%}",
        ]
        for i in order
    ]
    return ranked + [[name, "n/a", NOT_RANKED, NOT_RANKED, "—"] for name in res.unranked]


RESOLUTION_HEADER = ["system", "mean", "rank", "rank 95%", "P(first)"]


def resolution_markdown(res: RankResolution | None, metric_label: str) -> list[str]:
    """A Markdown section ranking the systems with their rank intervals (nothing when `res` is None)."""
    if res is None:
        return []
    head = ["| " + " | ".join(RESOLUTION_HEADER) + " |", "|" + "|".join("---" for _ in RESOLUTION_HEADER) + "|"]
    return [
        f"## Rank resolution: {metric_label}",
        "",
        *head,
        *("| " + " | ".join(r) + " |" for r in resolution_rows(res)),
        "",
        note(res),
        "",
    ]


def resolution_html(res: RankResolution, metric_label: str) -> str:
    """The same as an HTML table; the tied-for-first systems carry class "tied-first"."""
    body = "".join(
        f"<tr><td><b>{escape(r[0])}</b></td>"
        + "".join(f'<td class="num">{escape(c)}</td>' for c in r[1:3])
        + resolution_td(res, r[0])
        + f'<td class="num">{escape(r[4])}</td></tr>'
        for r in resolution_rows(res)
    )
    th = "".join(
        f"<th>{h}</th>" if i == 0 else f'<th class="num">{escape(h)}</th>' for i, h in enumerate(RESOLUTION_HEADER)
    )
    return (
        f"<p>{escape(metric_label)}: each system's rank and how far the data lets it move.</p>"
        f'<div class="table-wrap"><table class="resolution"><thead><tr>{th}</tr></thead><tbody>{body}</tbody></table></div>'
        + resolution_p(res)
    )


def resolve_suite(
    result: StudyResult, datasets: Sequence[str], systems: Sequence[str], metric: str, separator: str = "/"
) -> RankResolution | None:
    """Rank intervals over datasets and queries (two-stage bootstrap) of the systems scored on every dataset.

    None when fewer than two systems have a table on every dataset: there is nothing to rank."""
    ranked = [s for s in systems if all(f"{d}{separator}{s}" in result.systems for d in datasets)]
    ranked = [s for s in ranked if not any(result.systems[f"{d}{separator}{s}"].failed for d in datasets)]
    if len(ranked) < 2 or not has_tables(result):
        return None
    evs = {(d, s): result.evaluation(f"{d}{separator}{s}") for d in datasets for s in ranked}
    unranked = [s for s in ranked if not all(has_value(evs[d, s], metric) for d in datasets)]
    ranked = [s for s in ranked if s not in unranked]
    if len(ranked) < 2:
        return None
    tables = [paired_table([evs[d, s] for s in ranked], metric) for d in datasets]
    res = rank_intervals(
        tables, ranked, n_resamples=N_RESAMPLES, confidence=CONFIDENCE, higher_is_better=not lower_is_better(metric)
    )
    res.unranked.extend(unranked)
    return res


def separation_line(evaluations: Sequence[Evaluation], metric: str, power: float = 0.8) -> str | None:
    """How many labelled queries a paired test needs to separate the two best systems on `metric` (None for
    fewer than two systems carrying it)."""
    evs = [ev for ev in evaluations if metric in ev.metrics]
    if len(evs) < 2:
        return None
    table = paired_table(evs, metric)
    means = np.nanmean(table, axis=0)
    order = np.argsort(means if lower_is_better(metric) else -means, kind="stable")
    a, b = int(order[0]), int(order[1])
    n = queries_to_separate(table[:, a], table[:, b], power=power)
    head = f"first two on {metric}: {evs[a].system} ({means[a]:.4f}) and {evs[b].system} ({means[b]:.4f}); "
    if n is None:
        return head + "they score the same on every query: no number of labelled queries separates them."
    return head + (
        f"a paired test at {power:.0%} power separates them with about {n:,} labelled queries "
        f"(these results have {table.shape[0]:,})."
    )


def interval_cell(res: RankResolution | None, name: str) -> str:
    """`1-2 (tied 1st)`, `3`, `not ranked` for a system the resolution left out (no value of its metric, not
    scored on every dataset), or `—` where there is no resolution."""
    if res is None:
        return "—"
    if name not in res.names:
        return NOT_RANKED
    label = res.interval(name)
    tied = len(res.tied_first) > 1 and name in res.tied_first  # one system alone at rank 1 is not a tie
    return f"{label} ({TIED_MARK})" if tied else label


def note(res: RankResolution, over_datasets: bool = False) -> str:
    """One sentence saying what the interval is and who is tied for first."""
    drawn = "datasets, then queries within each" if over_datasets else "queries"
    tied = res.tied_first
    verdict = (
        f"Only {tied[0]} reaches rank 1: the data separates the best system from the rest."
        if len(tied) == 1
        else f"Tied for first: {', '.join(tied)} (the data cannot tell which of them is best)."
    )
    left = (
        f" Not ranked (no value of the ranking metric{' on every dataset' if over_datasets else ''}): "
        f"{', '.join(res.unranked)}."
        if res.unranked
        else ""
    )
    best = "smallest" if not res.higher_is_better else "largest"
    return (
        f"Rank interval: the {CONFIDENCE:.0%} range of a system's rank by mean ({best} first) over "
        f"{res.n_resamples} paired bootstrap resamples of the {drawn}. {verdict}{left}"
    )


def resolution_td(res: RankResolution | None, name: str) -> str:
    """The rank interval as an HTML cell, marked (class "tied-first") when the system is tied for first."""
    tied = res is not None and name in res.tied_first
    klass = "num tied-first" if tied else "num"
    data = f' data-interval="{escape(res.interval(name))}"' if res is not None and name in res.names else ""
    return f'<td class="{klass}"{data}>{"<b>" if tied else ""}{escape(interval_cell(res, name))}{"</b>" if tied else ""}</td>'


def resolution_p(res: RankResolution, over_datasets: bool = False) -> str:
    """The note under an HTML table with a rank-interval column."""
    return f'<p class="small muted resolution">{escape(note(res, over_datasets))}</p>'


__all__ = [
    "NOT_RANKED",
    "RESOLUTION_HEADER",
    "has_value",
    "interval_cell",
    "note",
    "paired_table",
    "resolution_html",
    "resolution_markdown",
    "resolution_p",
    "resolution_rows",
    "resolution_td",
    "resolve",
    "resolve_result",
    "resolve_suite",
    "separation_line",
]
