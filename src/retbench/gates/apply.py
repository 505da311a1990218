"""Applying ship criteria (see retbench.criteria for the file) to a candidate run and a baseline.

Outcome (and the CLI exit code): 2 when the criteria cannot be applied (unknown metric, a metric a
run lacks, a regression limit with no baseline); 3 when the candidate run recorded more backend
failures than allowed (its numbers cannot be trusted, whatever they say); else 1 when an error gate
fails; else 0, warnings included. The p-value is the two-sided paired randomization test on the
per-query deltas of the gate's metric (compare.randomization_test), not corrected across gates.

Beside each comparison the gate reports the drop its queries can detect ("detectable"): the minimum
detectable effect of that test at the criteria's alpha and 80% power, from the spread of the per-query
deltas (retbench.power; `retbench plan` gives the same figure and the labelled queries a target needs).

Each gate also says which labels its numbers come from (`estimate`): `human` (qrels, references), `llm`
(an LLM-judged answer metric: judge bias not corrected), or `ppi` when the caller also gives both systems
scored with human labels on some queries (`human=`): the paired difference is then estimated by
prediction-powered inference over those doubly labelled queries (stats.ppi_mean_diff), beside the plain one.

A gate with `sequential: true` also carries anytime-valid confidence sequences (`sequence`: the candidate's
mean and, with a baseline, the baseline's and the change's; retbench.anytime), and its require_significance
asks whether the change's sequence excludes 0 on the worse side: a job that re-runs the gate after every
batch of queries and stops at the first failure then keeps alpha, which p < alpha at every look does not.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from retbench.alignment import FAILED_STATUSES, PerQueryScores, align, side_counts
from retbench.anytime import paired_sequences
from retbench.criteria import EPS, Criteria, Gate, Limits
from retbench.errors import EXIT_BACKEND, EXIT_GATE_FAILED, EXIT_OK, ConfigError
from retbench.gates.movement import MovementCheck
from retbench.io.files import json_safe
from retbench.metrics.registry import lower_is_better, value_range
from retbench.planning import DEFAULT_POWER as DETECT_POWER
from retbench.planning import drop_model
from retbench.power import detectable
from retbench.results.caveats import Caveat
from retbench.sequential import diff_cs, mean_cs
from retbench.stats.paired import bootstrap_ci, randomization_test
from retbench.stats.ppi import ppi_mean_diff


# -- applying the criteria ----------------------------------------------------------------------
@dataclass
class Check:
    """One limit applied to one scope (the whole set, or one tag's queries)."""

    scope: str  # "all" or a tag
    kind: str  # "floor", "ceiling" (a lower-is-better metric's threshold) or "regression"
    limit: float
    value: float  # the candidate mean (floor/ceiling) or the worsening in metric units (regression)
    passed: bool
    #: a regression past its limit that is let through because the drop is not significant (p >= alpha)
    waived: bool = False
    p: float | None = None
    alpha: float | None = None
    lower_is_better: bool = False  # the metric's direction: its regression is a rise
    sequential: bool = False  # significance came from the anytime-valid sequence, not from p


@dataclass
class TagRow:
    tag: str
    n: int
    baseline: float | None
    candidate: float
    delta: float | None
    p: float | None


@dataclass
class GateResult:
    gate: Gate
    candidate: float
    baseline: float | None
    delta: float | None
    ci: tuple[float, float] | None
    p: float | None
    checks: list[Check]
    tags: list[TagRow]
    #: the smallest drop this comparison detects at alpha with DETECT_POWER (None without a baseline)
    detectable: float | None = None
    #: where its spread came from: "paired" (the per-query deltas) or "lost" (no query changed: the
    #: lost-queries model of retbench.power stands in)
    detectable_model: str | None = None
    #: which labels the numbers come from: {"source": human|llm|ppi, "n_human", "n_llm"}; with ppi also the
    #: prediction-powered "delta" and its "ci_low", "ci_high"
    estimate: dict[str, Any] | None = None
    #: with `sequential: true`, the anytime-valid sequences ({"b"} and, with a baseline, {"a", "delta"})
    sequence: dict[str, Any] | None = None

    @property
    def passed(self) -> bool:
        return all(c.passed for c in self.checks)

    @property
    def blocks(self) -> bool:
        return not self.passed and self.gate.severity == "error"

    @property
    def outcome(self) -> str:
        if self.passed:
            return "passes"
        return "blocks merge" if self.blocks else "warning, does not block merge"


@dataclass
class GateReport:
    results: list[GateResult]
    criteria: Criteria
    candidate: str
    baseline: str | None
    candidate_counts: dict[str, int]
    baseline_counts: dict[str, int] | None
    failures: dict[str, str]  # candidate qid -> failure status
    n_resamples: int
    seed: int
    mode: str = "trec_eval"
    caveats: list[Caveat] = field(default_factory=list)  # what weakens either side's numbers (the flow fills it)
    #: the label study the numbers come from (`gates.labels`: its path, metric, k, estimand); None: tables
    study: dict[str, Any] | None = None
    #: the label-free limits (`movement:` in the criteria, `gates.movement`), checked beside the metric gates
    movement: list[MovementCheck] = field(default_factory=list)

    @property
    def backend_failed(self) -> bool:
        return len(self.failures) > self.criteria.max_failed_queries

    @property
    def _blocks(self) -> bool:
        """Whether a metric gate or a movement limit blocks the merge."""
        return any(r.blocks for r in self.results) or any(m.blocks for m in self.movement)

    @property
    def exit_code(self) -> int:
        if self.backend_failed:
            return EXIT_BACKEND
        if self._blocks:
            return EXIT_GATE_FAILED
        return EXIT_OK

    @property
    def verdict(self) -> str:
        if self.backend_failed:
            return "backend_failed"
        if self._blocks:
            return "fail"
        passed = [r.passed for r in self.results] + [m.passed for m in self.movement]
        return "warn" if not all(passed) else "pass"

    def to_dict(self) -> dict[str, Any]:
        """JSON for machines: verdict, exit code, each gate's numbers and checks."""

        return json_safe(
            {
                "verdict": self.verdict,
                "exit_code": self.exit_code,
                "candidate": {"system": self.candidate, **self.candidate_counts},
                "baseline": {"system": self.baseline, **(self.baseline_counts or {})} if self.baseline else None,
                "backend_failures": {
                    "count": len(self.failures),
                    "allowed": self.criteria.max_failed_queries,
                    "queries": self.failures,
                },
                "mode": self.mode,
                "counting": "every judged query of either side; failed or unanswered queries score 0",
                "alpha": self.criteria.alpha,
                "test": {
                    "name": "paired randomization (sign flip), two-sided",
                    "n_resamples": self.n_resamples,
                    "seed": self.seed,
                },
                **(_study_fields(self.study) if self.study else {}),
                "gates": [
                    {
                        "name": r.gate.name,
                        "metric": r.gate.metric,
                        "severity": r.gate.severity,
                        "threshold": r.gate.limits.threshold,
                        "regression_max": r.gate.limits.regression_max,
                        "require_significance": r.gate.require_significance,
                        "baseline": r.baseline,
                        "candidate": r.candidate,
                        "delta": r.delta,
                        "ci_low": r.ci[0] if r.ci else None,
                        "ci_high": r.ci[1] if r.ci else None,
                        "p": r.p,
                        "detectable": r.detectable,
                        "detectable_model": r.detectable_model,
                        "detectable_power": DETECT_POWER,
                        "estimate": r.estimate,
                        "sequence": r.sequence,
                        "passed": r.passed,
                        "blocks": r.blocks,
                        "checks": [c.__dict__ for c in r.checks],
                        "tags": [t.__dict__ for t in r.tags],
                    }
                    for r in self.results
                ],
                **({"movement": [m.to_dict() for m in self.movement]} if self.movement else {}),
            }
        )


def _study_fields(study: dict[str, Any]) -> dict[str, Any]:
    """What a gate judged on a label study says instead of the paired test: its counting, its test, itself."""
    return {
        "counting": "every pooled query of the study; a query a system did not answer scores 0",
        "test": {"name": "prediction-powered inference (label study), normal interval, two-sided"},
        "study": study,
    }


def _check_metric(ev: PerQueryScores, gate: Gate, side: str, path: str) -> None:
    if gate.metric not in ev.metrics:
        raise ConfigError(
            f"gate {gate.name!r} needs metric {gate.metric!r}, which the {side} run {ev.system!r} does not have "
            f"(has: {', '.join(ev.metrics)}); add it to the experiment's metrics and run again",
            path=path,
            line=gate.line,
            field="metric",
        )


def run_gates(
    criteria: Criteria,
    candidate: PerQueryScores,
    baseline: PerQueryScores | None = None,
    *,
    groups: Mapping[str, Sequence[str]] | None = None,
    failures: Mapping[str, str] | None = None,
    human: tuple[PerQueryScores, PerQueryScores] | None = None,
    n_resamples: int = 10_000,
    seed: int = 0,
    first: bool = False,
) -> GateReport:
    """Apply every gate to the candidate (against the baseline where one is given).

    `first`: a `history:last-pass` baseline was asked for but the history holds no earlier passing run of
    the candidate's experiment, dataset and system yet, so regression limits have nothing to compare
    with and only thresholds are checked (the caller says so).

    `groups` maps tag -> query ids (tag breakdowns and per-tag limits); `failures` maps the
    candidate's failed query ids to their status (the CLI reads them from the run; by default they
    come from the evaluation: failed statuses, plus the queries pytrec_eval mode left out). `human`:
    (baseline, candidate) scored with human labels on the queries that carry them, when the gated tables
    come from LLM labels: each gate then also carries the prediction-powered paired difference.
    """
    if baseline is None and criteria.needs_baseline and not first:
        raise ConfigError(
            "the criteria set regression_max limits, which need a baseline (--baseline)",
            path=criteria.path,
            field="regression_max",
        )
    groups = dict(groups or {})
    for gate in criteria.gates:
        _check_metric(candidate, gate, "candidate", criteria.path)
        if baseline is not None:
            _check_metric(baseline, gate, "baseline", criteria.path)
        for tag in gate.tags:
            if not groups.get(tag):
                have = ", ".join(sorted(groups)) or "none recorded"
                raise ConfigError(
                    f"gate {gate.name!r} sets limits for tag {tag!r}, but no query has that tag (tags: {have})",
                    path=criteria.path,
                    line=gate.line,
                    field=f"tags.{tag}",
                )
    metrics = list(dict.fromkeys(g.metric for g in criteria.gates))
    al = align(baseline if baseline is not None else candidate, candidate, metrics)
    if failures is None:
        failures = {q: s for q, s in zip(candidate.query_ids, candidate.status, strict=True) if s in FAILED_STATUSES}
        # pytrec_eval mode leaves failed queries out of the table; they are listed in `excluded`
        failures.update({q: "unanswered" for q in getattr(candidate, "excluded", None) or []})

    results = []
    for gate in criteria.gates:
        j = al.metrics.index(gate.metric)
        rows = np.flatnonzero(~np.isnan(al.b[:, j]))  # the queries the metric applies to (NaN: it does not)
        a, b = al.a[rows, j], al.b[rows, j]
        gpos = {al.query_ids[r]: i for i, r in enumerate(rows.tolist())}
        result = _apply(gate, a, b, baseline is not None, groups, gpos, criteria.alpha, n_resamples, seed)
        result.estimate = _label_source(gate.metric, a, b, gpos, human, baseline is not None, criteria.alpha)
        results.append(result)
    return GateReport(
        results,
        criteria,
        candidate.system,
        baseline.system if baseline is not None else None,
        side_counts(candidate, al, "b"),
        side_counts(baseline, al, "a") if baseline is not None else None,
        dict(failures),
        n_resamples,
        seed,
        getattr(candidate, "mode", "trec_eval"),
    )


def _label_source(
    metric: str,
    a: np.ndarray,
    b: np.ndarray,
    qpos: Mapping[str, int],
    human: tuple[PerQueryScores, PerQueryScores] | None,
    paired: bool,
    alpha: float,
) -> dict[str, Any]:
    """The gate's `estimate`: PPI on the paired differences when human-labelled tables are given and at least
    2 queries carry both label sources and 1 carries LLM labels only; else llm for an LLM-judged metric, human."""
    from retbench.metrics.judged import JUDGED_METRICS

    if paired and human is not None and all(metric in h.metrics for h in human):
        hal = align(human[0], human[1], [metric])
        both = [(i, qpos[q]) for i, q in enumerate(hal.query_ids) if q in qpos and not np.isnan(hal.a[i, 0])]
        lab = np.array([r for _, r in both], dtype=np.int64)
        unl = np.setdiff1d(np.arange(a.size), lab)
        if lab.size >= 2 and unl.size >= 1:
            hrows = [i for i, _ in both]
            est, low, high = ppi_mean_diff(
                hal.a[hrows, 0], hal.b[hrows, 0], a[lab], b[lab], a[unl], b[unl], alpha=alpha
            )
            return {
                "source": "ppi",
                "n_human": int(lab.size),
                "n_llm": int(a.size),
                "delta": est,
                "ci_low": low,
                "ci_high": high,
            }
    if metric in JUDGED_METRICS or human is not None:
        return {"source": "llm", "n_human": 0, "n_llm": int(a.size)}
    return {"source": "human", "n_human": int(a.size), "n_llm": 0}


def _scope_checks(
    scope: str, lim: Limits, base: np.ndarray | None, cand: np.ndarray, p: float | None, gate: Gate, alpha: float
) -> list[Check]:
    cmean = float(cand.mean()) if cand.size else math.nan
    change = None if base is None else float(cand.mean() - base.mean()) if cand.size else math.nan
    certain = None
    if gate.sequential and base is not None and cand.size:
        seq = diff_cs(base, cand, value_range(gate.metric), alpha)
        certain = bool(seq.low[-1] > 0) if lower_is_better(gate.metric) else bool(seq.high[-1] < 0)
    return limit_checks(scope, lim, cmean, change, p, gate, alpha, certain=certain)


def limit_checks(
    scope: str,
    lim: Limits,
    cmean: float,
    change: float | None,
    p: float | None,
    gate: Gate,
    alpha: float,
    *,
    certain: bool | None = None,
) -> list[Check]:
    """The checks of one scope from the candidate's mean and its change from the baseline (candidate − baseline;
    None: no baseline), with `p` the change's two-sided p-value: the one rule every estimate is judged by.

    `certain` (sequential gates): whether the anytime-valid sequence of the change excludes 0 on the worse
    side; when given it decides require_significance instead of p < alpha."""
    out = []
    lower = lower_is_better(gate.metric)  # then the threshold is a ceiling and a rise is the regression
    if lim.threshold is not None:
        ok = cmean <= lim.threshold + EPS if lower else cmean >= lim.threshold - EPS
        out.append(Check(scope, "ceiling" if lower else "floor", lim.threshold, cmean, bool(ok)))
    if lim.regression_max is not None and change is not None:
        drop = change if lower else -change
        too_big = drop > lim.regression_max + EPS
        shown = certain if certain is not None else p is not None and p < alpha
        waived = bool(too_big and gate.require_significance and not shown)
        passed = not too_big or waived
        out.append(
            Check(scope, "regression", lim.regression_max, drop, passed, waived, p, alpha, lower, certain is not None)
        )
    return out


def _apply(
    gate: Gate,
    a: np.ndarray,
    b: np.ndarray,
    has_baseline: bool,
    groups: Mapping[str, Sequence[str]],
    qpos: Mapping[str, int],
    alpha: float,
    n_resamples: int,
    seed: int,
) -> GateResult:
    base = a if has_baseline else None
    p = ci = delta = mde = None
    model = None
    if base is not None:
        d = b - a
        delta = float(d.mean())
        p = randomization_test(d, n_resamples, seed)
        ci = bootstrap_ci(d, n_resamples, seed)
        if a.size:
            dm = drop_model(gate.metric, a, b)
            mde, model = detectable(dm, int(a.size), alpha, DETECT_POWER), dm.kind
    checks = _scope_checks("all", gate.limits, base, b, p, gate, alpha)
    rows = []
    for tag, qids in groups.items():
        idx = np.array([qpos[q] for q in qids if q in qpos], dtype=np.int64)
        if idx.size == 0:
            continue
        tb = base[idx] if base is not None else None
        tc = b[idx]
        tp = randomization_test(tc - tb, n_resamples, seed) if tb is not None else None
        rows.append(
            TagRow(
                tag,
                int(idx.size),
                float(tb.mean()) if tb is not None else None,
                float(tc.mean()),
                float((tc - tb).mean()) if tb is not None else None,
                tp,
            )
        )
        if tag in gate.tags:
            checks += _scope_checks(tag, gate.tags[tag], tb, tc, tp, gate, alpha)
    result = GateResult(
        gate, float(b.mean()), float(a.mean()) if has_baseline else None, delta, ci, p, checks, rows, mde, model
    )
    if gate.sequential and b.size:
        span = value_range(gate.metric)
        result.sequence = paired_sequences(a, b, gate.metric, alpha) if has_baseline else None
        result.sequence = result.sequence or {"b": mean_cs(b, span, alpha).summary()}
    return result
