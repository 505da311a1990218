"""What weakens a system's numbers, gathered once for every place that shows them (terminal, report.md,
report.html, the PR comment): failed and missing queries, queries skipped for having no relevant document,
short rankings, and holes in the judgements.

The counts come from the coverage block the cell runner stores (`metrics/coverage.py`); the holes are
computed here from the run and the qrels, because the gate needs them as much as the report does.

Incomplete judgements: judged@k is the share of the top k documents that carry any label
(metrics/coverage.py). Pooled or LLM-made qrels and systems nobody pooled leave holes that every usual
measure reads as "not relevant", so their numbers can be biased low. Below JUDGED_THRESHOLD (0.9) at
k = 10, i.e. more than one document in ten of the top 10 unjudged on average, the report shows for that system:

- bpref (Buckley and Voorhees 2004): ranks relevant documents against judged non-relevant ones only;
- infAP (Yilmaz and Aslam 2006): AP estimated from the judged sample;
- nDCG@10 on the condensed list (Sakai and Kando 2008; trec_eval -J): unjudged documents removed first;
- RBP with p = 0.8 (Moffat and Zobel 2008) and its residual: the most RBP could still rise if every
  unjudged document were relevant.

The share and each measure are computed over the queries the system answered, from its run and the dataset's
qrels with the evaluation's own settings (-J added for the condensed nDCG): a failed or missing query has no
top 10 to judge, and it scores 0 on judged@10 and on holes@10 alike, so a mean over every counted query would
hide or inflate the holes. Without the run and qrels, the table's answered rows give the share, and the stored
means (over every counted query, said so) the rest.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from retbench.data import Qrels, Run
from retbench.data.status import UNANSWERED
from retbench.evaluation import Evaluation, evaluate
from retbench.metrics.judges import run_rows
from retbench.results.model import StudyResult

JUDGED_K = 10
JUDGED_THRESHOLD = 0.9
JUDGED = f"judged@{JUDGED_K}"
HOLES = f"holes@{JUDGED_K}"  # 1 - judged@k on the same documents: what is computed when neither is stored
# (label shown, metric name, condensed list?)
HOLE_MEASURES: tuple[tuple[str, str, bool], ...] = (
    ("bpref", "bpref", False),
    ("infAP", "infAP", False),
    ("nDCG@10 (condensed, -J)", "ndcg@10", True),
    # trec_eval 10.0's rbp_p=0.8 (graded: a hit gains its grade over the query's top grade); bare `rbp` is p = 0.9
    ("RBP p=0.8 (graded)", "rbp(p=0.8)", False),
    ("RBP residual", "rbp_resid(p=0.8)", False),
)
#: the stored means the holes are read from before anything is computed
HOLE_METRICS = frozenset({JUDGED, HOLES, *(name for _, name, condensed in HOLE_MEASURES if not condensed)})


@dataclass
class Holes:
    """A system whose top documents are too often unjudged, with the measures made for that."""

    system: str
    judged: float  # mean judged@JUDGED_K over the answered queries (`basis` says when it is over all counted)
    values: dict[str, float]  # HOLE_MEASURES label -> mean
    basis: str = "answered"  # "answered": over the queries the system answered; "counted": every counted query
    depth: int | None = None  # documents retrieved per query, when recorded (a shallower run has no top 10)
    #: the qrels judge no document below the relevance level (SciFact and many public collections): then a
    #: judged document is a relevant one, judged@10 is P@10 and bpref is recall, no extra evidence about holes
    relevant_only: bool = False

    def sentence(self) -> str:
        """The warning shown next to the numbers (of the top 10, or of the whole ranking when it is shorter)."""
        over = "of the answered queries " if self.basis == "answered" else ""
        top = (
            f"the top {self.depth} documents (the whole ranking: depth {self.depth})"
            if self.depth is not None and self.depth < JUDGED_K
            else f"the top {JUDGED_K} documents"
        )
        return (
            f"{self.system}: only {self.judged:.0%} of {top} {over}are judged (below "
            f"{JUDGED_THRESHOLD:.0%}); unjudged documents count as not relevant, so the usual measures may be too low."
        )


@dataclass
class Caveat:
    """One system's facts that weaken its numbers: its stored coverage counts and its holes (None: none found)."""

    system: str
    coverage: dict[str, Any] = field(default_factory=dict)
    holes: Holes | None = None


def table_means(table: Evaluation, names: list[str]) -> dict[str, float]:
    """The means of these columns of a per-query table (NaN when it counted no query)."""
    if not len(table.query_ids):
        return {n: float("nan") for n in names}
    return {n: float(table.values[:, table.metrics.index(n)].mean()) for n in names}


def _answered_rows(ev: Evaluation) -> np.ndarray:
    """The table rows of queries the system answered (failed and missing ones say nothing about holes)."""
    return np.fromiter((st not in UNANSWERED for st in ev.status), dtype=bool, count=len(ev.status))


def _table_share(ev: Evaluation | None) -> float | None:
    """judged@k over the answered rows of a per-query table that holds judged@k or holes@k; else None.

    A failed or missing query scores 0 on both judged@k ("nothing judged") and holes@k ("no holes"), so a
    mean over every row is biased either way; only the answered rows measure the judgements."""
    if ev is None:
        return None
    rows = _answered_rows(ev)
    for name, flip in ((JUDGED, False), (HOLES, True)):
        if name in ev.metrics and rows.any():
            mean = float(np.nanmean(ev.values[rows, ev.metrics.index(name)]))
            return 1.0 - mean if flip else mean
    return None


def _judged_share(
    stored: Mapping[str, float], got: Mapping[str, float], ev: Evaluation | None
) -> tuple[float, str] | None:
    """(judged@k, basis): computed over the answered queries, else from the table's answered rows, else the
    stored mean over every counted query (judged@k, else 1 - holes@k); None when nothing says."""
    if JUDGED in got:
        return got[JUDGED], "answered"
    share = _table_share(ev)
    if share is not None:
        return share, "answered"
    if JUDGED in stored:
        return stored[JUDGED], "counted"
    return (1.0 - stored[HOLES], "counted") if HOLES in stored else None


def system_holes(
    system: str,
    stored: Mapping[str, float],
    ev: Evaluation | None = None,
    run: Run | None = None,
    qrels: Qrels | None = None,
) -> Holes | None:
    """The system's holes when its judged@10 is below the threshold, else None. With its table, run and qrels,
    the share and the hole measures are computed over the queries it answered (a failed or missing query has
    no top 10 to judge); else they are its table's answered rows or its stored means."""
    got: dict[str, float] = {}
    sub = None
    if ev is not None and run is not None and qrels is not None:
        wanted = [JUDGED] + [n for _, n, condensed in HOLE_MEASURES if not condensed]
        judged = [q for q in [*ev.query_ids, *ev.excluded, *ev.skipped] if q in qrels]
        status = run.status_values(judged, run_rows(run, judged))
        sub = qrels.subset([q for q, st in zip(judged, status, strict=True) if st not in UNANSWERED])
        got = table_means(evaluate(run, sub, wanted, ev.settings()), wanted) if len(sub) else {}
    found = _judged_share(stored, got, ev)
    if found is None or not found[0] < JUDGED_THRESHOLD:
        return None
    share, basis = found
    if sub is not None and ev is not None and run is not None and len(sub):  # the condensed list of the same queries
        got |= table_means(evaluate(run, sub, ["ndcg@10"], ev.settings(), judged_only=True), ["ndcg@10"])
    values = {
        label: (got[name] if condensed or name in got else stored.get(name, float("nan")))
        for label, name, condensed in HOLE_MEASURES
        if (condensed and name in got) or (not condensed and (name in stored or name in got))
    }
    level = ev.relevance_level if ev is not None else 1
    only = qrels is not None and bool(qrels.n_judgements) and min(qrels.grade_histogram()) >= level
    return Holes(system, float(share), values, basis, _depth(ev.coverage if ev is not None else {}), only)


def _depth(coverage: Mapping[str, Any]) -> int | None:
    """The depth a coverage block records (None when the run's depth was not recorded)."""
    depth = coverage.get("depth")
    return int(depth) if isinstance(depth, (int, float)) and not isinstance(depth, bool) else None


def find_holes(
    evs: Mapping[str, Evaluation],
    runs: Mapping[str, Run],
    qrels: Qrels | None,
    means: Mapping[str, Mapping[str, float]],
) -> list[Holes]:
    """The systems with judged@10 below the threshold, each with the hole measures (stored means first)."""
    out = []
    for system, ev in evs.items():
        found = system_holes(system, means.get(system, {}), ev, runs.get(system), qrels)
        if found is not None:
            out.append(found)
    return out


def study_caveats(result: StudyResult) -> list[Caveat]:
    """Each scored system's caveats: its stored coverage, and its holes from the stored judged@10 mean or,
    for a one-dataset study that holds its qrels in memory (a study that just ran), from its run."""
    qrels = result.texts.qrels if result.texts is not None and len(result.manifest.datasets) <= 1 else None
    out = []
    for s in result:
        if s.error is None:
            tables = (result.evaluation(s.name), result.run(s.name), qrels) if qrels is not None else ()
            holes = system_holes(s.name, s.means(), *tables)
            if holes is not None and holes.depth is None:
                holes.depth = _depth(s.coverage)
            out.append(Caveat(s.name, dict(s.coverage), holes))
    return out
