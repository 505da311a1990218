"""Ship criteria judged on a label study's answer (`studies.labels.answer.estimate_study`): no per-query tables,
only each system's prediction-powered estimate and the paired difference B − A, each with its interval.

The rules are the gate's own (`gates.apply.limit_checks`), with the study's numbers standing in for the tables':
- a `threshold` is checked on the candidate's estimated mean (a floor; a ceiling where lower is better), as a
  floor on human-labelled numbers is checked on their mean;
- a `regression_max` is checked on the estimated change (candidate − baseline, the study's difference
  estimate, not the difference of the two means: PPI tunes each estimate on its own);
- `require_significance` lets a change past the limit through when it is not significant: here when the
  difference's interval holds 0. Its p is the two-sided normal p-value of that interval,
  p = 2 (1 − Φ(|d| / se)) with se = (high − low) / (2 z(1 − alpha/2)), so p < alpha exactly when the interval
  excludes 0 (the study's intervals are symmetric: normal, at the criteria's alpha).

A limit whose interval straddles it is undecided: the verdict follows the estimate as above, and the gate's
`estimate` block says so (`undecided`: the checks the interval cannot settle) so the comment can ask for more
human labels instead of pretending to certainty. A system whose top k is less than 90% labelled carries the
same incomplete-judgements caveat as every other gate.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from statistics import NormalDist
from typing import Any

from retbench.criteria import Criteria, resolve_metric
from retbench.errors import ConfigError
from retbench.gates.apply import Check, GateReport, GateResult, limit_checks
from retbench.results.caveats import JUDGED_THRESHOLD, Caveat, Holes

_KINDS = {"PPI": "ppi", "human": "human", "LLM": "llm"}


def interval_p(block: Mapping[str, Any], alpha: float) -> float | None:
    """The two-sided normal p-value of a symmetric interval's mean being 0 (None: no interval)."""
    low, high, mean = block.get("low"), block.get("high"), float(block["mean"])
    if low is None or high is None or math.isnan(low) or math.isnan(high):
        return None
    se = (high - low) / (2 * NormalDist().inv_cdf(1 - alpha / 2))
    if se <= 0:
        return 1.0 if mean == 0 else 0.0
    return 2 * (1 - NormalDist().cdf(abs(mean) / se))


def _undecided(check: Check, cand: Mapping[str, Any], diff: Mapping[str, Any] | None) -> bool:
    """Whether the interval behind a check holds its limit (more human labels could turn the verdict)."""
    if check.kind == "regression":
        if diff is None or diff.get("low") is None or math.isnan(diff["low"]):
            return True
        # the change at the limit: a drop of regression_max (a rise where lower is better)
        edge = check.limit if check.lower_is_better else -check.limit
        return bool(diff["low"] <= edge <= diff["high"])
    low, high = cand.get("low"), cand.get("high")
    if low is None or high is None or math.isnan(low):
        return True
    return bool(low <= check.limit <= high)


def _check_gates(criteria: Criteria, metric: str, has_baseline: bool) -> None:
    """Refuse what a study cannot answer: another metric, tag limits, a drop limit without a baseline."""
    for gate in criteria.gates:
        if gate.metric != metric:
            raise ConfigError(
                f"gate {gate.name!r} needs metric {gate.metric!r}; the label study estimates only {metric!r} "
                "(its study.json `metric`)",
                path=criteria.path,
                line=gate.line,
                field="metric",
            )
        if gate.tags:
            raise ConfigError(
                f"gate {gate.name!r} sets tag limits; a label study has no query tags",
                path=criteria.path,
                line=gate.line,
                field="tags",
            )
    if criteria.needs_baseline and not has_baseline:
        raise ConfigError(
            "the criteria set regression_max limits, which need a baseline: give the study a decision "
            "(`label init --decision A,B`) or name one with --baseline-system",
            path=criteria.path,
            field="regression_max",
        )


def study_gates(
    criteria: Criteria,
    answer: Mapping[str, Any],
    candidate: str,
    baseline: str | None,
    *,
    k: int,
    counts: Mapping[str, Mapping[str, int]],
    study: Mapping[str, Any],
) -> GateReport:
    """Apply the criteria to `candidate` (against `baseline`: the answer's `difference` is candidate − baseline).

    `answer` is `estimate_study(..., alpha=criteria.alpha, pair=(baseline, candidate))`; `counts` each side's
    {"queries", "answered"}; `study` what the report names the study by (path, metric, k, estimand)."""
    metric = resolve_metric(str(answer["metric"]))
    diff = answer.get("difference") if baseline is not None else None
    if diff is not None and (diff["a"], diff["b"]) != (baseline, candidate):
        raise ValueError(f"the answer's difference is {diff['b']} − {diff['a']}, not {candidate} − {baseline}")
    _check_gates(criteria, metric, baseline is not None)
    systems = answer["systems"]
    cand = systems[candidate]
    sides = [cand, *([systems[baseline]] if baseline is not None else [])]
    judged = min(float(s.get("judged", 0.0)) for s in sides)
    source = diff if diff is not None else cand
    p = interval_p(diff, criteria.alpha) if diff is not None else None
    change = float(diff["mean"]) if diff is not None else None
    ci = (diff["low"], diff["high"]) if diff is not None else None
    results = []
    for gate in criteria.gates:
        checks = limit_checks("all", gate.limits, float(cand["mean"]), change, p, gate, criteria.alpha)
        estimate = _estimate(source, cand, diff, judged, k, checks)
        base_mean = float(systems[baseline]["mean"]) if baseline is not None else None
        results.append(GateResult(gate, float(cand["mean"]), base_mean, change, ci, p, checks, [], estimate=estimate))
    report = GateReport(
        results,
        criteria,
        candidate,
        baseline,
        dict(counts[candidate]),
        dict(counts[baseline]) if baseline is not None else None,
        {},
        0,
        0,
        study=dict(study),
    )
    report.caveats = [_caveat(name, systems[name]) for name in (candidate, baseline) if name is not None]
    return report


def _estimate(
    source: Mapping[str, Any],
    cand: Mapping[str, Any],
    diff: Mapping[str, Any] | None,
    judged: float,
    k: int,
    checks: list[Check],
) -> dict[str, Any]:
    """The gate's `estimate` block: where the numbers come from, both intervals, and the undecided checks."""
    out: dict[str, Any] = {
        "source": _KINDS.get(str(source.get("estimate")), "llm"),
        "n_human": int(source.get("n_human", 0)),
        "n_llm": int(source.get("n_llm", 0)),
        "judged": judged,
        "k": k,
        "label_study": True,
        "candidate_low": cand.get("low"),
        "candidate_high": cand.get("high"),
        "undecided": [c.kind for c in checks if _undecided(c, cand, diff)],
    }
    if diff is not None:
        out.update(delta=diff["mean"], ci_low=diff.get("low"), ci_high=diff.get("high"))
    return out


def _caveat(system: str, block: Mapping[str, Any]) -> Caveat:
    """The incomplete-judgements caveat of a system whose top k is less than 90% labelled (none otherwise)."""
    share = float(block.get("judged", 1.0))
    holes = Holes(system, share, {}, basis="counted") if share < JUDGED_THRESHOLD else None
    return Caveat(system, {}, holes)
