"""`evaluate`: judge a run against relevance and fill the per-query table under the counting rules of the
package docstring (denominators, the `no_relevant` policy, unanswered queries scoring 0)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from retbench.data import Qrels, Run, Sample
from retbench.data.samples import sample_k, sample_map
from retbench.data.status import UNANSWERED
from retbench.errors import ConfigError
from retbench.evaluation.table import Evaluation
from retbench.metrics.gain import GainMatrix
from retbench.metrics.judges import Judgement, judge_qrels, run_rows
from retbench.metrics.judges.subtopics import SubtopicQrels
from retbench.metrics.registry import MetricContext, MetricSpec, parse_metrics, unanswered_value
from retbench.metrics.settings import EvalSettings, checked_level, with_overrides

Relevance = Qrels | Mapping[str, Mapping[str, int]] | Judgement


def _metric_specs(metrics: Sequence[str | MetricSpec], default_k: int) -> list[MetricSpec]:
    """The metrics asked for, parsed (specs first, then names), each name once."""
    specs = [m for m in metrics if isinstance(m, MetricSpec)]
    specs += parse_metrics([m for m in metrics if not isinstance(m, MetricSpec)], default_k)
    if not specs:
        raise ConfigError("no metrics asked for", field="metrics")
    if len({s.name for s in specs}) != len(specs):
        specs = list({s.name: s for s in specs}.values())
    return specs


def _own_levels(
    values: np.ndarray, specs: Sequence[MetricSpec], gm: GainMatrix, level: int, no_relevant: str, exempt: np.ndarray
) -> None:
    """The `no_relevant` policy at the level a metric sets itself (`recall@10(rel=2)`), in place.

    A query with no relevant document at a metric's own level gets what it gets at that level everywhere
    else: `skip` leaves it out of that metric (NaN: not in its mean), as `eval -l 2` leaves it out of every
    metric; `one` scores it 1.0; `zero` keeps the 0 trec_eval gives. `exempt` [rows, metrics]: cells that
    are not retrieval scores (unanswerable samples, answer metrics).
    """
    if no_relevant == "zero":
        return
    for j, spec in enumerate(specs):
        own = int(spec.params.get("rel", level))
        if own == level:
            continue
        none = (gm.n_relevant(own) == 0) & ~exempt[:, j]
        values[none, j] = np.nan if no_relevant == "skip" else 1.0


def evaluate(
    run: Run,
    relevance: Relevance,
    metrics: Sequence[str | MetricSpec],
    settings: EvalSettings | None = None,
    *,
    samples: Mapping[str, Sample] | Sequence[Sample] | None = None,
    texts: Any = None,
    system: str | None = None,
    answers: Mapping[str, Any] | None = None,
    judged: Mapping[str, Any] | None = None,
    scopes: Mapping[str, Callable[[str], bool]] | None = None,
    subtopics: SubtopicQrels | None = None,
    **overrides: Any,
) -> Evaluation:
    """Judge `run` against `relevance` (qrels or a `Judgement`) and compute `metrics` for every counted query.

    `settings` fix the counting (see the module docstring); a setting may also be given by name
    (`relevance_level=2`), which overrides the one in `settings`. `samples` (golden sets) give
    per-sample cutoffs, answers (containment) and support groups; `texts` (doc id -> text, or a
    Corpus) feed answer containment. `ignore_identical_ids` drops a retrieved doc whose id equals
    the query id before judging (as BEIR and MTEB do; by default in pytrec_eval mode only). `answers` (query id ->
    `SystemAnswer`) feed the answer metrics, `judged` (query id -> stored judge verdicts) the judged ones, `scopes`
    (query id -> "is this doc inside the scope chosen?") `scope_miss_rate`. `subtopics` (ndeval's subtopic
    qrels, `io/subtopics.py`) feed the diversity measures when `relevance` is ordinary qrels, as the TREC Web track
    ships ad-hoc and diversity qrels apart: a counted query they do not judge gets NaN for those measures (not
    applicable: ndeval does not score it). Samples marked
    `answerable: false` are counted even with no relevant document; retrieval metrics do not apply
    to them (NaN), answer metrics (abstention, hallucination) do.
    """
    st = with_overrides(settings, overrides)
    level = checked_level(st)
    n_identical_relevant = _identical_relevant(run, relevance, level) if st.identical_ids_ignored else 0
    run, n_identical = _prepared(run, st)
    specs = _metric_specs(metrics, st.default_k)
    judged_ = _judge(run, relevance, st, level)
    qids, n = judged_.qids, len(judged_.qids)
    status = run.status_values(qids, judged_.rows_in_run)
    failed = np.fromiter(map(UNANSWERED.__contains__, status), dtype=bool, count=n)
    smap = sample_map(samples)
    unanswerable = np.zeros(n, dtype=bool)
    if smap:  # only golden samples cost a Python step per query
        unanswerable = np.fromiter(((q in smap and smap[q].answerable is False) for q in qids), dtype=bool, count=n)
    rows, excluded, skipped = _counted(qids, failed, judged_.no_rel, unanswerable, st)
    everyone = len(rows) == n
    kept = qids if everyone else [qids[r] for r in rows.tolist()]
    row_samples = [smap.get(q) for q in kept] if smap else []
    items = judged_.items
    ctx = MetricContext(
        judged_.gains if everyone else judged_.gains.take(rows),
        max(level, 1),
        run,
        judged_.rows_in_run[rows],
        row_samples,
        texts,
        judged_.qrels,
        answers,
        judged,
        items=None if items is None else (items if everyone else items.take(rows)),
        collection_size=st.collection_size,
        recall_rounding=st.recall_rule,
        scopes=scopes,
        subtopics=subtopics,
    )
    ks = np.array([sample_k(s) or 0 for s in row_samples], dtype=np.int64) if smap else None
    graded = None
    if judged_.graded is not None:
        graded = replace(ctx, gm=judged_.graded if everyone else judged_.graded.take(rows), relevance_level=0)
    values = _values(
        ctx, specs, ks, st.no_relevant_policy, judged_.no_rel[rows], unanswerable[rows], failed[rows], items, graded
    )
    not_judged = np.ones(len(run), dtype=bool)
    not_judged[judged_.rows_in_run[judged_.rows_in_run >= 0]] = False
    return Evaluation(
        system=system if system is not None else run.name,
        metrics=[s.name for s in specs],
        query_ids=kept,
        values=values,
        status=status if everyone else [status[r] for r in rows.tolist()],
        skipped=skipped,
        mode=st.mode,
        n_duplicates=run.n_duplicates,
        excluded=excluded,
        unjudged=[run.query_ids[i] for i in np.flatnonzero(not_judged).tolist()],
        relevance_level=level,
        no_relevant=st.no_relevant_policy,
        default_k=st.default_k,
        trec_names=[s.trec_name for s in specs],
        ignore_identical_ids=st.identical_ids_ignored,
        n_identical=n_identical,
        n_identical_relevant=n_identical_relevant,
        judged_only=bool(st.judged_only),
        max_docs=st.max_docs,
        collection_size=st.collection_size,
        recall_rounding=st.recall_rule,
    )


def _identical_relevant(run: Run, relevance: object, level: int) -> int:
    """How many (query, doc) pairs BEIR's identical-id rule drops that the qrels judge relevant (grade >= level):
    the queries whose own id is a relevant document of theirs and sits in their ranking. 0 for other relevance
    (spans, anchors, text: they do not judge by document id)."""
    if not isinstance(relevance, Mapping):
        return 0
    own = [q for q in run.query_ids if q in relevance and (relevance[q].get(q) or 0) >= level]
    return sum(q in run.docs(q) for q in own)


def _prepared(run: Run, st: EvalSettings) -> tuple[Run, int]:
    """The run as judged: identical ids dropped when asked (with their count), cut at `max_docs` (trec_eval -M)."""
    n_identical = 0
    if st.identical_ids_ignored:
        n_identical = int(run.offsets[-1])
        run = run.without_identical_ids()
        n_identical -= int(run.offsets[-1])
    if st.max_docs is not None:
        run = run.truncate(int(st.max_docs))
    return run, n_identical


@dataclass(frozen=True)
class _Judged:
    """The run judged against its relevance: the judged queries, their gain matrix and rows in the run."""

    qids: list[str]
    rows_in_run: np.ndarray
    gains: GainMatrix
    no_rel: np.ndarray  # per judged query: nothing relevant at the relevance level (no gold item)
    items: Judgement | None  # a passage judge's judgement (None: qrels)
    qrels: Qrels | Mapping[str, Mapping[str, int]] | None
    graded: GainMatrix | None = None  # relevance level 0: the grades, for the measures that read them


def _judge(run: Run, relevance: Relevance, st: EvalSettings, level: int) -> _Judged:
    """Judge the run by qrels or take a passage judge's gains (binary: level 1, and no -J)."""
    if isinstance(relevance, Judgement):
        if level != 1:
            raise ConfigError(
                f"a passage judge's gains are binary (1 = matches a gold item); relevance level must be 1, got {level}",
                field="relevance_level",
            )
        if st.judged_only:
            raise ConfigError(
                "judged_only (-J) needs qrels: a passage judge labels every ranked chunk", field="judged_only"
            )
        qids = list(relevance.query_ids)
        return _Judged(qids, run_rows(run, qids), relevance.gains, relevance.n_items == 0, relevance, None)
    qids = list(relevance)
    rows_in_run = run_rows(run, qids)
    gm = judge_qrels(run, relevance, qids, rows_in_run)
    if st.judged_only:
        gm = gm.condensed()
    if level == 0:  # trec_eval -l 0: binary measures read the grades raised by 1 at level 1 (GainMatrix.shifted)
        return _Judged(qids, rows_in_run, gm.shifted(), gm.shifted().n_relevant(1) == 0, None, relevance, gm)
    return _Judged(qids, rows_in_run, gm, gm.n_relevant(level) == 0, None, relevance)


def _counted(
    qids: list[str], failed: np.ndarray, no_rel: np.ndarray, unanswerable: np.ndarray, st: EvalSettings
) -> tuple[np.ndarray, list[str], list[str]]:
    """The rows of the counted queries, the excluded ones (pytrec_eval mode: unanswered) and the skipped ones
    (`no_relevant: skip`: nothing relevant, unless the sample is marked unanswerable)."""
    keep = np.ones(len(qids), dtype=bool)
    excluded: list[str] = []
    if st.mode == "pytrec_eval":
        excluded = [qids[i] for i in np.flatnonzero(failed).tolist()]
        keep &= ~failed
    skipped: list[str] = []
    if st.no_relevant_policy == "skip":
        skipped = [qids[i] for i in np.flatnonzero(keep & no_rel & ~unanswerable).tolist()]
        keep &= ~no_rel | unanswerable
    return np.flatnonzero(keep), excluded, skipped


#: binary-capable rows whose value without `rel=` reads the grades (trec_eval's graded rbp; Rndcg's gains)
_GRADED_ROWS = frozenset({"rbp", "Rndcg"})


def _binary_at_level(spec: MetricSpec) -> bool:
    """Whether a measure counts documents at the evaluation's relevance level (not graded, no level of its own)."""
    return spec.row.binary and "rel" not in spec.params and spec.metric.name not in _GRADED_ROWS


def _score_unanswered(values: np.ndarray, specs: Sequence[MetricSpec], failed: np.ndarray) -> None:
    """Give every failed or missing row each metric's worst value (`unanswered_value`); NaN (does not apply) stays."""
    for j, spec in enumerate(specs):
        worst = unanswered_value(spec.metric)
        if worst is not None:
            column = values[failed, j]
            values[failed, j] = np.where(np.isnan(column), np.nan, worst)


def _values(
    ctx: MetricContext,
    specs: Sequence[MetricSpec],
    ks: np.ndarray | None,
    no_relevant: str,
    no_rel: np.ndarray,
    unanswerable: np.ndarray,
    failed: np.ndarray,
    items: Judgement | None,
    graded: MetricContext | None = None,
) -> np.ndarray:
    """The counted rows x metrics table, with the counting rules applied (arguments are per counted row).
    `graded`: at relevance level 0, the context with the grades themselves, for the measures that read them
    (`ctx` then holds the grades raised by 1, at level 1)."""
    values = np.empty((len(no_rel), len(specs)), dtype=np.float64)
    answer_side = np.array([s.row.answer_side for s in specs], dtype=bool)
    for j, spec in enumerate(specs):
        values[:, j] = spec.compute(ctx if graded is None or _binary_at_level(spec) else graded, ks)
    if graded is not None:
        ctx = graded
    values[np.ix_(unanswerable, ~answer_side)] = np.nan  # retrieval metrics do not apply
    if no_relevant == "one":
        values[np.ix_(no_rel & ~unanswerable, ~answer_side)] = 1.0
    if items is None:
        _own_levels(
            values, specs, ctx.gm, ctx.relevance_level, no_relevant, unanswerable[:, None] | answer_side[None, :]
        )
    # unanswered score 0, except measures of the judgements alone (num_rel, num_q), as trec_eval -c keeps them
    _score_unanswered(values, specs, failed)
    return values
