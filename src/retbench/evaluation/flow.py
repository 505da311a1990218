"""`retbench eval`'s whole flow: judgements and a system's outputs read, LLM labels combined with human ones, the
metrics chosen and scored under `EvalSettings`, each metric's label estimate (human, LLM or prediction-powered)
and the notes on what the numbers do not show.

`retbench eval` parses its options into `EvalSettings`, calls these steps and renders; a Python caller gets the
same `EvalRun` from `evaluate_files` (the steps in one call). The CLI's `--format trec` adds trec_eval's own rules
for naming measures (`report.trec`) between reading and scoring; nothing else happens outside this module.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from retbench.data import Qrels, Run
from retbench.data.answers import SystemAnswer
from retbench.data.corpus import Sample
from retbench.errors import ConfigError, InputError
from retbench.estimates import Estimate, doubly_labelled, estimate_block, label_estimates
from retbench.evaluation.scoring import Relevance, evaluate
from retbench.evaluation.table import Evaluation
from retbench.io.judgements import combine_labels, read_judgements, read_llm_qrels, read_system
from retbench.metrics.judges.subtopics import SubtopicQrels
from retbench.metrics.registry import DEFAULT_ANSWER_METRICS, EVAL_METRICS, MetricSpec, parse_metrics
from retbench.metrics.settings import EvalSettings

#: judge-relevance's default pool depth: the depth PPI checks for LLM qrels that came without a provenance file
LABEL_DEPTH = 10


@dataclass
class EvalInputs:
    """What an evaluation reads: the labels that score (`judged`: human, LLM or both, as `labels` says), the human
    and LLM qrels apart (PPI compares them), golden-set samples, the system's run, texts and answers, and subtopic
    qrels for the diversity measures."""

    judged: Qrels
    human: Qrels
    run: Run
    labels: str = "human"
    llm: Qrels | None = None
    llm_qrels: Path | None = None
    depth: int = LABEL_DEPTH  # the LLM labels' pool depth (their provenance file's `depth`)
    samples: list[Sample] | None = None
    texts: dict[str, str] = field(default_factory=dict)
    answers: dict[str, SystemAnswer] = field(default_factory=dict)
    subtopics: SubtopicQrels | None = None

    def default_metrics(self) -> list[str]:
        """Metrics when none are named: the golden-set retrieval suite (plus answer containment when every
        answerable sample has an answer and the outputs carry texts, and the answer metrics when they carry
        answers), else trec_eval's headline measures."""
        if self.samples is None:
            return list(EVAL_METRICS)
        names = ["retrieval-hit-at-k", "retrieval-recall-at-k", "retrieval-mrr", "retrieval-ndcg-at-k"]
        if self.texts and all(s.answer for s in self.samples if s.answerable is not False):
            names.append("answer-containment-at-k")
        if self.answers:
            names += DEFAULT_ANSWER_METRICS
        return names


def read_inputs(
    qrels: str | Path,
    run: str | Path,
    *,
    split: str = "test",
    labels: str = "human",
    llm_qrels: str | Path | None = None,
    subtopic_qrels: str | Path | None = None,
) -> EvalInputs:
    """Read what `retbench eval QRELS RUN` scores: judgements with nothing in them are refused (every mean would be
    NaN), LLM qrels are combined with the human ones as `labels` says (`io.judgements.combine_labels`)."""
    human, samples = read_judgements(qrels, split)
    if not samples and not len(human):
        where = f" for split {split!r}" if Path(qrels).is_dir() else ""
        raise InputError(f"holds no judgements{where}: nothing to score the run against", path=qrels)
    llm: Qrels | None = None
    depth = LABEL_DEPTH
    judged = human
    if llm_qrels is not None or labels != "human":
        if llm_qrels is not None:
            llm, provenance = read_llm_qrels(llm_qrels)
            depth = int(provenance.get("depth") or LABEL_DEPTH)
        judged = combine_labels(labels, Qrels(human), llm)
    system, texts, answers = read_system(run)
    subtopics = None
    if subtopic_qrels is not None:
        from retbench.io.subtopics import read_subtopic_qrels  # deferred: only the diversity measures read them

        subtopics = read_subtopic_qrels(subtopic_qrels)
    where_llm = Path(llm_qrels) if llm_qrels is not None else None
    return EvalInputs(judged, human, system, labels, llm, where_llm, depth, samples, texts, answers, subtopics)


def usable_metrics(names: Sequence[str], default_k: int) -> tuple[list[str], list[str]]:
    """The metric names that parse, and one message per name that does not: several names succeed or fail one by
    one (the caller still fails, naming each refused one). When none parses, the first one's error is raised."""
    good: list[str] = []
    refused: list[str] = []
    first: ConfigError | None = None
    for name in names:
        try:
            parse_metrics([name], default_k)
        except ConfigError as exc:
            first = first or exc
            refused.append(f"-m {name}: {exc}")
            continue
        good.append(name)
    if first is not None and not good:
        raise first
    return good, refused


@dataclass
class EvalRun:
    """What an evaluation came to: the per-query table, each metric's label estimate where LLM labels scored it,
    the notes on what the numbers do not show, and the metric names refused (exit 2 once the rest is shown)."""

    inputs: EvalInputs
    evaluation: Evaluation
    estimates: dict[str, Estimate] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)

    @property
    def exit_code(self) -> int:
        return 2 if self.refused else 0

    def estimate(self, metric: str, agg: Mapping[str, Any]) -> Estimate:
        """A metric's `estimate` entry given its aggregate: computed from the label sources, an LLM-judged
        metric's own, else human labels over its n queries."""
        if metric in self.estimates:
            return self.estimates[metric]
        if "estimate" in agg:
            return dict(agg["estimate"])
        nan = float("nan")
        n, mean = int(agg["n"]), agg["mean"]
        return estimate_block("human", n, 0, mean, agg.get("ci_low", nan), agg.get("ci_high", nan))


def score(
    inputs: EvalInputs,
    metrics: Sequence[str | MetricSpec],
    settings: EvalSettings | None = None,
    *,
    refused: Sequence[str] = (),
) -> EvalRun:
    """Score the inputs' run on `metrics` under `settings`; when LLM labels scored it, each metric's estimate
    from the run scored with the LLM qrels alone and the human qrels alone (PPI over the doubly labelled queries,
    `estimates.label_estimates`)."""
    st = settings if settings is not None else EvalSettings()
    ev = _evaluate(inputs, inputs.judged, metrics, st)
    estimates: dict[str, Estimate] = {}
    if inputs.labels != "human" and inputs.llm is not None:
        estimates = _label_estimates(inputs, ev, st)
    notes = _notes(ev, inputs) + _source_notes(estimates) + _subtopic_notes(ev, inputs.subtopics)
    return EvalRun(inputs, ev, estimates, notes, list(refused))


def evaluate_files(
    qrels: str | Path,
    run: str | Path,
    metrics: Sequence[str] | None = None,
    settings: EvalSettings | None = None,
    *,
    split: str = "test",
    labels: str = "human",
    llm_qrels: str | Path | None = None,
    subtopic_qrels: str | Path | None = None,
) -> EvalRun:
    """`retbench eval QRELS RUN -m ...` as one call (table and JSON formats): read, choose the metrics (the
    defaults when none are named), refuse the names that do not parse one by one, score."""
    st = settings if settings is not None else EvalSettings()
    inputs = read_inputs(qrels, run, split=split, labels=labels, llm_qrels=llm_qrels, subtopic_qrels=subtopic_qrels)
    names, refused = usable_metrics(list(metrics) if metrics else inputs.default_metrics(), st.default_k)
    return score(inputs, names, st, refused=refused)


def _evaluate(
    inputs: EvalInputs, relevance: Relevance, metrics: Sequence[str | MetricSpec], st: EvalSettings
) -> Evaluation:
    return evaluate(
        inputs.run,
        relevance,
        metrics,
        st,
        samples=inputs.samples,
        texts=inputs.texts or None,
        answers=inputs.answers or None,
        subtopics=inputs.subtopics,
    )


def _label_estimates(inputs: EvalInputs, ev: Evaluation, st: EvalSettings) -> dict[str, Estimate]:
    llm = inputs.llm
    by_llm = _evaluate(inputs, llm, ev.metrics, st) if llm is not None and len(llm) else None
    if by_llm is None or llm is None:
        return label_estimates(ev, ev, None, [])
    by_human = _evaluate(inputs, inputs.human, ev.metrics, st) if len(inputs.human) else None
    return label_estimates(ev, by_llm, by_human, doubly_labelled(inputs.run, inputs.human, llm, inputs.depth))


def _subtopic_notes(ev: Evaluation, subtopics: SubtopicQrels | None) -> list[str]:
    """How many counted queries the subtopic qrels judge (the diversity measures' n), when given."""
    if subtopics is None:
        return []
    judged = sum(q in subtopics for q in ev.query_ids)
    if judged == len(ev.query_ids):
        return []
    return [
        f"subtopic qrels judge {judged} of the {len(ev.query_ids)} counted queries: "
        "the diversity measures are averaged over those"
    ]


def _notes(ev: Evaluation, inputs: EvalInputs) -> list[str]:
    """What the numbers do not show: label source, unanswered, skipped, duplicate and unjudged queries."""
    labels = inputs.labels
    notes = [f"labels: {labels}" + (f" (LLM labels from {inputs.llm_qrels})" if labels != "human" else "")]
    counts = ev.status_counts()
    unanswered = {s: c for s, c in counts.items() if s not in ("ok", "empty") and c}
    if unanswered:
        notes.append(
            "unanswered judged queries scored 0 (the worst value, top of the range, where lower is better): "
            + ", ".join(f"{c} {s}" for s, c in unanswered.items())
        )
    if ev.excluded:
        notes.append(f"{len(ev.excluded)} unanswered judged queries not counted ({ev.mode} mode)")
    if ev.skipped:
        notes.append(
            f"{len(ev.skipped)} judged queries with no relevant document skipped (--no-relevant zero counts them, as trec_eval does)"
        )
    if ev.ignore_identical_ids:
        notes.append(
            f"identical query/doc ids ignored, as BEIR does: {ev.n_identical} retrieved doc(s) dropped"
            + (f", {ev.n_identical_relevant} of them judged relevant by the qrels" if ev.n_identical_relevant else "")
            + " (--keep-identical-ids keeps them)"
        )
    if ev.n_duplicates:
        notes.append(f"{ev.n_duplicates} duplicate doc ids dropped from rankings (first kept)")
    if ev.unjudged:
        notes.append(f"{len(ev.unjudged)} answered queries have no judgements (ignored)")
    return notes


def _source_notes(estimates: dict[str, Estimate]) -> list[str]:
    """What the label sources mean for the numbers shown (nothing when every number is from human labels)."""
    sources = {e["source"] for e in estimates.values()}
    notes = []
    if "ppi" in sources:
        notes.append(
            "PPI: prediction-powered estimate of the mean under human labels (LLM labels on every query, corrected "
            "by the human-minus-LLM difference on the queries both label), with its 95% interval"
        )
    if "llm" in sources:
        notes.append(
            "LLM labels: judge bias is not corrected (no query carries both human and LLM labels for all its judged "
            "top documents)"
        )
    return notes
