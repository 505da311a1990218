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

Each is the stored mean when the study asked for it, else computed from the stored run and the dataset's qrels
with the evaluation's own settings (-J added for the condensed nDCG).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from retbench.data import Qrels, Run
from retbench.evaluation import Evaluation, evaluate
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
    ("RBP(p=0.8)", "rbp(p=0.8)", False),  # the canonical name: bare `rbp` is trec_eval's p = 0.9
    ("RBP residual", "rbp_resid(p=0.8)", False),
)
#: the stored means the holes are read from before anything is computed
HOLE_METRICS = frozenset({JUDGED, HOLES, *(name for _, name, condensed in HOLE_MEASURES if not condensed)})


@dataclass
class Holes:
    """A system whose top documents are too often unjudged, with the measures made for that."""

    system: str
    judged: float  # mean judged@JUDGED_K over the counted queries
    values: dict[str, float]  # HOLE_MEASURES label -> mean

    def sentence(self) -> str:
        """The warning shown next to the numbers."""
        return (
            f"{self.system}: only {self.judged:.0%} of the top {JUDGED_K} documents are judged (below "
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


def _judged_share(stored: Mapping[str, float], got: Mapping[str, float]) -> float | None:
    """judged@k as stored, else 1 - holes@k (stored or computed); None when neither is known."""
    if JUDGED in stored:
        return stored[JUDGED]
    holes = stored.get(HOLES, got.get(HOLES))
    return None if holes is None else 1.0 - holes


def system_holes(
    system: str,
    stored: Mapping[str, float],
    ev: Evaluation | None = None,
    run: Run | None = None,
    qrels: Qrels | None = None,
) -> Holes | None:
    """The system's holes when its judged@10 is below the threshold, else None: from its stored means, and
    computed from its table, run and qrels where all three are given."""
    wanted = [HOLES] + [n for _, n, condensed in HOLE_MEASURES if not condensed and n not in stored]
    got: dict[str, float] = {}
    sub = None
    if ev is not None and run is not None and qrels is not None:
        judged = [q for q in [*ev.query_ids, *ev.excluded, *ev.skipped] if q in qrels]
        sub = qrels.subset(judged)
        got = table_means(evaluate(run, sub, wanted, ev.settings()), wanted)
    share = _judged_share(stored, got)
    if share is None or not share < JUDGED_THRESHOLD:
        return None
    if sub is not None and ev is not None and run is not None:  # the condensed list of the same queries
        got |= table_means(evaluate(run, sub, ["ndcg@10"], ev.settings(), judged_only=True), ["ndcg@10"])
    values = {
        label: (got[name] if condensed else stored.get(name, got.get(name, float("nan"))))
        for label, name, condensed in HOLE_MEASURES
        if (condensed and name in got) or (not condensed and (name in stored or name in got))
    }
    return Holes(system, float(share), values)


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
            out.append(Caveat(s.name, dict(s.coverage), system_holes(s.name, s.means(), *tables)))
    return out
