"""Rank resolution in the reports: each system's bootstrap rank interval and the group tied for first.

The statistics, and the paired tables they resample, live in `retbench.resolution` (`resolve`, `resolve_result`,
`resolve_suite`); this module words their output for the terminal, Markdown and HTML views.
"""

from __future__ import annotations

from html import escape

from retbench.resolution import CONFIDENCE, RankResolution, Separation

TIED_MARK = "tied 1st"  # printed beside the rank interval of every system tied for first
NOT_RANKED = "not ranked"  # a system shown beside the ranked ones without a value of the ranking metric


def rank_label(rank: float | None) -> str:
    """An average rank as shown (`1.50`), or `not ranked` for a system with no score of the metric."""
    return NOT_RANKED if rank is None else f"{rank:.2f}"


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


def separation_line(sep: Separation | None) -> str | None:
    """How many labelled queries a paired test needs to separate the two best systems (`resolution.
    first_two_separation`); None when fewer than two systems carry the metric."""
    if sep is None:
        return None
    head = f"first two on {sep.metric}: {sep.first} ({sep.first_mean:.4f}) and {sep.second} ({sep.second_mean:.4f}); "
    if sep.queries_needed is None:
        return head + "they score the same on every query: no number of labelled queries separates them."
    return head + (
        f"a paired test at {sep.power:.0%} power separates them with about {sep.queries_needed:,} labelled queries "
        f"(these results have {sep.queries:,})."
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
    "interval_cell",
    "note",
    "resolution_html",
    "resolution_markdown",
    "resolution_p",
    "resolution_rows",
    "resolution_td",
    "separation_line",
]
