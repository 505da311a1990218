"""What weakens a number, said where the number is: one sentence per fact, the same in the terminal, report.md,
report.html and the PR comment.

Facts (from `results/caveats.py`): failed or missing queries (scored 0 in trec_eval counting, left out in
pytrec_eval mode), judged queries with no relevant document (left out of every mean by retbench's default in
trec_eval mode; trec_eval and pytrec_eval count them, 0 on the measures that divide by the relevant count),
retrieved documents the qrels judge relevant that BEIR's identical-id rule dropped (their id is their query's), rankings shorter than the depth asked for (a metric whose cutoff passes a ranking's length counts the
missing ranks as not relevant), holes in the judgements (judged@10 below 90%), and a shallow depth: below
`SHALLOW_DEPTH` documents per query, the measures without a cutoff (MAP, nDCG, bpref, MRR, R-precision, ...) are said
to stand on that many documents, since trec_eval reads a run as deep as it goes and BEIR and TREC rank 100 and
1,000. A clean system gets no line.
"""

from __future__ import annotations

from collections.abc import Sequence
from html import escape

from retbench.data.status import FAILED_COUNT, MISSING
from retbench.errors import InputError
from retbench.gates import GateReport
from retbench.metrics.primary import ranks_systems
from retbench.metrics.registry import lower_is_better, parse_metric
from retbench.report import fmt
from retbench.report.holes import holes_html
from retbench.report.model import ReportData
from retbench.results.caveats import Caveat

#: how many affected metrics a short-ranking sentence names before "and N more"
NAMED = 3
#: below this many documents per query (`retbench run`'s default depth, BEIR's), the uncut measures are caveated
SHALLOW_DEPTH = 100


def _unanswered(c: Caveat, metrics: Sequence[str] = ()) -> str:
    cov = c.coverage
    failed, missing = int(cov.get(FAILED_COUNT) or 0), int(cov.get(MISSING) or 0)
    if not failed and not missing:
        return ""
    parts = [f"{failed} failed"] if failed else []
    parts += [f"{missing} {'is' if missing == 1 else 'are'} missing from the run"] if missing else []
    what = " and ".join(parts)
    if cov.get("mode") == "pytrec_eval":
        effect = (
            f"pytrec_eval mode leaves them out, so the means stand on the {cov.get('answered', '?')} answered queries"
        )
    else:
        effect = f"{'it scores' if failed + missing == 1 else 'each scores'} 0 in every mean (trec_eval -c)"
        worse = [fmt.metric_label(m) for m in metrics if lower_is_better(m)]
        if worse:  # a failed answer is never a good one: the top of the range where lower is better
            effect += f", and the worst value (the top of its range) on {_listed(worse)}, where lower is better"
    return f"{c.system}: of {cov.get('judged', '?')} judged queries, {what}; {effect}."


def _identical(c: Caveat) -> str:
    n = int(c.coverage.get("identical_ids_relevant") or 0)
    if not n:
        return ""
    dropped = c.coverage.get("identical_ids_dropped", "?")
    return (
        f"{c.system}: BEIR's identical-id rule dropped {dropped} retrieved documents whose id equals their query's, "
        f"{n} of them judged relevant by the qrels; those queries lose a relevant document, so their scores are lower "
        f"than the qrels allow (evaluation: ignore_identical_ids: false keeps them)."
    )


def _skipped(c: Caveat) -> str:
    n = int(c.coverage.get("skipped_no_relevant") or 0)
    if not n:
        return ""
    scored = c.coverage.get("scored", c.coverage.get("counted", "?"))
    return (
        f"{c.system}: {fmt.counted(n, 'query has', 'queries have')} no relevant document and "
        f"{'is' if n == 1 else 'are'} left out of every mean (retbench's default in trec_eval mode; trec_eval itself "
        f"counts {'it' if n == 1 else 'them'}, mostly as 0: no_relevant zero); the means stand on {scored} queries."
    )


def _reaching(metrics: Sequence[str], shortest: int) -> list[str]:
    """The metrics that look past rank `shortest`: a cutoff above it, or none at all (a ranking metric uncut)."""
    out = []
    for m in metrics:
        try:
            spec = parse_metric(m)
        except InputError:
            continue
        if (spec.k is not None and spec.k > shortest) or (spec.k is None and spec.metric.cutoff == "optional"):
            out.append(fmt.metric_label(m))
    return out


def _listed(names: list[str]) -> str:
    """'a', 'a and b', 'a, b and c', 'a, b, c and 2 more'."""
    shown, rest = names[:NAMED], len(names) - NAMED
    if rest > 0:
        return ", ".join(shown) + f" and {rest} more"
    return shown[0] if len(shown) == 1 else ", ".join(shown[:-1]) + " and " + shown[-1]


def _short(c: Caveat, metrics: Sequence[str]) -> str:
    cov = c.coverage
    n = int(cov.get("short") or 0)
    lo, hi = cov.get("short_min"), cov.get("short_max")
    reached = _reaching(metrics, int(lo) if lo is not None else 0)
    if not n or not reached:
        return ""
    span = "" if lo is None else f" ({lo})" if lo == hi else f" ({lo}-{hi})"
    named = _listed(reached)
    past = f"rank {lo}" if lo is not None else "what they returned"
    scored = cov.get("scored", cov.get("counted", "?"))
    one = len(reached) == 1
    return (
        f"{c.system}: {n} of {scored} queries returned fewer than {cov.get('depth', '?')} documents{span}; "
        f"{named} {'looks' if one else 'look'} past {past} and {'counts' if one else 'count'} the missing ranks as "
        f"not relevant, so {'it' if one else 'they'} can read lower than a full ranking would score."
    )


def depth_bound(metrics: Sequence[str]) -> list[str]:
    """The labels of the metrics that read the whole ranking: no cutoff, ranking side (not answers, counts or the
    labels' coverage)."""
    out = []
    for m in metrics:
        try:
            spec = parse_metric(m)
        except InputError:
            continue
        if spec.k is None and not spec.row.answer_side and ranks_systems(m):
            out.append(fmt.metric_label(m))
    return out


def _shallow(caveats: Sequence[Caveat], metrics: Sequence[str]) -> list[str]:
    """One sentence per depth below SHALLOW_DEPTH: the uncut metrics stand on that many documents per query."""
    bound = depth_bound(metrics)
    depths: dict[int, list[str]] = {}
    for c in caveats:
        depth = c.coverage.get("depth")
        if isinstance(depth, int) and depth < SHALLOW_DEPTH:
            depths.setdefault(depth, []).append(c.system)
    out = []
    for depth, systems in depths.items():
        if not bound:
            break
        who = "" if len(systems) == len(caveats) else f"{_listed(systems)}: "
        one = len(bound) == 1
        out.append(
            f"{who}depth {depth}: {_listed(bound)} {'has' if one else 'have'} no cutoff and {'was' if one else 'were'} "
            f"computed on the {depth} documents retrieved per query; a deeper ranking (BEIR ranks 100, TREC 1,000) "
            f"can score {'it' if one else 'them'} differently."
        )
    return out


def caveat_lines(
    caveats: Sequence[Caveat], metrics: Sequence[str], *, holes: bool = True, unanswered: bool = True
) -> list[str]:
    """The sentences for these systems and metrics, in system order (empty for clean runs).

    `holes`: include the incomplete-judgement warning (report.md and report.html show it with its own table);
    `unanswered`: include failed and missing queries (the PR comment says them beside each side's coverage)."""
    out = []
    for c in caveats:
        found = [_unanswered(c, metrics) if unanswered else "", _skipped(c), _identical(c), _short(c, metrics)]
        if holes and c.holes is not None:
            found.append(c.holes.sentence())
        out += [line for line in found if line]
    return out + _shallow(caveats, metrics)


def summary_caveats(data: ReportData) -> list[str]:
    """The sentences under a results report's summary table; its holes have their own
    section right after it (report/holes.py), so they are left out here."""
    caveats = [Caveat(s.name, dict(s.coverage)) for s in data.systems if s.error is None]
    return caveat_lines(caveats, data.metrics, holes=False)


def summary_notes_html(data: ReportData) -> str:
    """What the HTML report shows under its summary table: the sentences as warning notes, then the holes
    (warning and table; nothing for clean runs)."""
    lines = "".join(f'<p class="note warn" data-caveat>{escape(line)}</p>' for line in summary_caveats(data))
    return lines + holes_html(data.holes)


def gate_caveats(report: GateReport) -> list[str]:
    """The sentences beside a gate's rows: skipped queries, short rankings and holes of either
    side on the gated metrics (failed and missing queries are said with each side's coverage)."""
    metrics = list(dict.fromkeys(r.gate.metric for r in report.results))
    return caveat_lines(report.caveats, metrics, unanswered=False)
