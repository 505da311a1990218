"""Ship criteria: absolute floors and regression limits against a baseline, with severities.

A typical criteria file lets recall@5 gate merges and keeps MRR as a diagnostic (a warning):

    alpha: 0.05                   # significance level for require_significance
    require_significance: false   # default for every gate
    max_failed_queries: 0         # candidate backend failures tolerated before exit 3
    gates:
      - name: retrieval_recall_at_5
        metric: recall@5          # optional: without it the name is read as a metric name
        threshold: 0.85           # absolute floor for the candidate's mean
        regression_max: 0.03      # may not drop more than 3 pp below the baseline
        severity: error           # error blocks the merge; warning only reports
        require_significance: true  # a drop beyond regression_max blocks only when p < alpha
        tags:                     # optional per-tag floors and drop limits
          multi_hop: {threshold: 0.70, regression_max: 0.05}

Outcome (and the CLI exit code): 2 when the criteria cannot be applied (unknown metric, a metric a
run lacks, a regression limit with no baseline); 3 when the candidate run recorded more backend
failures than allowed (its numbers cannot be trusted, whatever they say); else 1 when an error gate
fails; else 0, warnings included. The p-value is the two-sided paired randomization test on the
per-query deltas of the gate's metric (compare.randomization_test), not corrected across gates.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from retbench.compare import (
    FAILED_STATUSES,
    PerQueryScores,
    _finite,
    align,
    bootstrap_ci,
    randomization_test,
    side_counts,
)
from retbench.errors import EXIT_BACKEND, EXIT_GATE_FAILED, EXIT_OK, ConfigError
from retbench.metrics.registry import lower_is_better, parse_metric

SEVERITIES = ("error", "warning")
TOP_KEYS = {"gates", "alpha", "require_significance", "max_failed_queries", "description"}
GATE_KEYS = {"name", "metric", "threshold", "regression_max", "severity", "require_significance", "tags", "description"}
TAG_KEYS = {"threshold", "regression_max"}
EPS = 1e-12


@dataclass
class Limits:
    """A floor and a drop limit (either may be absent)."""

    threshold: float | None = None
    regression_max: float | None = None


@dataclass
class Gate:
    name: str
    metric: str  # canonical registry name, e.g. "recall@5"
    limits: Limits
    severity: str = "error"
    require_significance: bool = False
    tags: dict[str, Limits] = field(default_factory=dict)
    line: int | None = None


@dataclass
class Criteria:
    gates: list[Gate]
    alpha: float = 0.05
    max_failed_queries: int = 0
    path: str = "<criteria>"

    @property
    def needs_baseline(self) -> bool:
        return any(
            g.limits.regression_max is not None or any(t.regression_max is not None for t in g.tags.values())
            for g in self.gates
        )


# -- reading the criteria file ------------------------------------------------------------------
def _line_marks(text: str) -> list[dict[str, int]]:
    """Line (1-based) of each gate item and of each of its keys, from the YAML node tree."""
    import yaml

    try:
        root = yaml.compose(text)
    except yaml.YAMLError:
        return []
    out: list[dict[str, int]] = []
    if not isinstance(root, yaml.MappingNode):
        return out
    for key, value in root.value:
        if key.value == "gates" and isinstance(value, yaml.SequenceNode):
            for item in value.value:
                marks = {"": item.start_mark.line + 1}
                if isinstance(item, yaml.MappingNode):
                    marks.update({k.value: k.start_mark.line + 1 for k, _ in item.value})
                out.append(marks)
    return out


def value_range(name: str) -> tuple[float, float] | None:
    from retbench.metrics.registry import value_range as declared

    return declared(name)


def resolve_metric(name: str) -> str:
    """Canonical metric name from the registry, which also reads underscore spellings (`retrieval_recall_at_5`)."""

    return parse_metric(name).name


def _number(value: Any, where: str, path: str, line: int | None, *, lo: float = 0.0) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < lo:
        raise ConfigError(f"must be a number >= {lo:g}, got {value!r}", path=path, line=line, field=where)
    return float(value)


def _limits(obj: Any, where: str, path: str, line: int | None, span: tuple[float, float] | None = None) -> Limits:
    if not isinstance(obj, Mapping):
        raise ConfigError("must be a mapping with threshold and/or regression_max", path=path, line=line, field=where)
    unknown = set(obj) - TAG_KEYS
    if unknown:
        raise ConfigError(
            f"unknown key(s) {', '.join(sorted(unknown))} (allowed: threshold, regression_max)",
            path=path,
            line=line,
            field=where,
        )
    lim = Limits(
        _number(obj["threshold"], f"{where}.threshold", path, line) if obj.get("threshold") is not None else None,
        _number(obj["regression_max"], f"{where}.regression_max", path, line)
        if obj.get("regression_max") is not None
        else None,
    )
    if lim.threshold is None and lim.regression_max is None:
        raise ConfigError("needs a threshold or a regression_max", path=path, line=line, field=where)
    if span is not None:
        lo, hi = span
        if lim.threshold is not None and not lo <= lim.threshold <= hi:
            raise ConfigError(
                f"threshold {lim.threshold:g} is outside the metric's range [{lo:g}, {hi:g}]"
                + (" (write 0.85, not 85)" if hi == 1.0 and lim.threshold > 1 else ""),
                path=path,
                line=line,
                field=f"{where}.threshold",
            )
        if lim.regression_max is not None and lim.regression_max > hi - lo:
            raise ConfigError(
                f"regression_max {lim.regression_max:g} is larger than the metric's whole range [{lo:g}, {hi:g}]",
                path=path,
                line=line,
                field=f"{where}.regression_max",
            )
    return lim


def parse_criteria(raw: Any, path: str = "<criteria>", text: str = "") -> Criteria:
    """Validate a loaded criteria mapping; every error names the file, line and field."""
    if not isinstance(raw, Mapping):
        raise ConfigError("a criteria file is a mapping with a 'gates' list", path=path)
    unknown = set(raw) - TOP_KEYS
    if unknown:
        raise ConfigError(
            f"unknown key(s) {', '.join(sorted(unknown))} (allowed: {', '.join(sorted(TOP_KEYS))})", path=path
        )
    gates_raw = raw.get("gates")
    if not isinstance(gates_raw, list) or not gates_raw:
        raise ConfigError("must be a non-empty list of gates", path=path, field="gates")
    alpha = _number(raw.get("alpha", 0.05), "alpha", path, None)
    if not 0.0 < alpha < 1.0:
        raise ConfigError(f"must be between 0 and 1, got {alpha}", path=path, field="alpha")
    default_sig = raw.get("require_significance", False)
    if not isinstance(default_sig, bool):
        raise ConfigError("must be true or false", path=path, field="require_significance")
    max_failed = raw.get("max_failed_queries", 0)
    if isinstance(max_failed, bool) or not isinstance(max_failed, int) or max_failed < 0:
        raise ConfigError(f"must be an integer >= 0, got {max_failed!r}", path=path, field="max_failed_queries")
    marks = _line_marks(text)
    gates: list[Gate] = []
    seen: set[str] = set()
    for i, g in enumerate(gates_raw):
        gates.append(_parse_gate(g, i, marks[i] if i < len(marks) else {}, path, default_sig, seen))
    return Criteria(gates, alpha, max_failed, path)


def _parse_gate(g: Any, i: int, mk: Mapping[str, int], path: str, default_sig: bool, seen: set[str]) -> Gate:
    """One entry of `gates:` (`mk`: the line of each of its keys; `seen`: the names taken so far)."""
    where = f"gates[{i}]"
    line = mk.get("")
    if not isinstance(g, Mapping):
        raise ConfigError(
            "each gate is a mapping (name, metric, threshold, regression_max, severity)",
            path=path,
            line=line,
            field=where,
        )
    unknown = set(g) - GATE_KEYS
    if unknown:
        raise ConfigError(
            f"unknown key(s) {', '.join(sorted(unknown))} (allowed: {', '.join(sorted(GATE_KEYS))})",
            path=path,
            line=line,
            field=where,
        )
    name = g.get("name")
    if not isinstance(name, str) or not name.strip():
        raise ConfigError("every gate needs a name", path=path, line=line, field=f"{where}.name")
    if name in seen:
        raise ConfigError(
            f"gate name {name!r} is used twice", path=path, line=mk.get("name", line), field=f"{where}.name"
        )
    seen.add(name)
    metric_key = "metric" if g.get("metric") is not None else "name"
    try:
        metric = resolve_metric(str(g[metric_key]))
    except ConfigError as exc:
        raise ConfigError(exc.reason, path=path, line=mk.get(metric_key, line), field=f"{where}.{metric_key}") from None
    severity = g.get("severity", "error")
    if severity not in SEVERITIES:
        raise ConfigError(
            f"must be 'error' or 'warning', got {severity!r}",
            path=path,
            line=mk.get("severity", line),
            field=f"{where}.severity",
        )
    sig = g.get("require_significance", default_sig)
    if not isinstance(sig, bool):
        raise ConfigError(
            "must be true or false",
            path=path,
            line=mk.get("require_significance", line),
            field=f"{where}.require_significance",
        )
    span = value_range(metric)
    limits = _limits({k: g.get(k) for k in TAG_KEYS}, where, path, line, span)
    tags_raw = g.get("tags") or {}
    if not isinstance(tags_raw, Mapping):
        raise ConfigError(
            "must map tag -> {threshold, regression_max}",
            path=path,
            line=mk.get("tags", line),
            field=f"{where}.tags",
        )
    tags = {str(t): _limits(v, f"{where}.tags.{t}", path, mk.get("tags", line), span) for t, v in tags_raw.items()}
    return Gate(name, metric, limits, severity, sig, tags, line)


def load_criteria(path: str | Path) -> Criteria:
    """Read and validate a ship-criteria YAML file."""
    from retbench.io.files import load_yaml_text

    p = Path(path)
    if not p.is_file():
        raise ConfigError("criteria file not found", path=p)
    try:
        text = p.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"not UTF-8 text (byte {exc.start}: {exc.reason})", path=p) from None
    return parse_criteria(load_yaml_text(text, p), str(p), text)


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

    @property
    def backend_failed(self) -> bool:
        return len(self.failures) > self.criteria.max_failed_queries

    @property
    def exit_code(self) -> int:
        if self.backend_failed:
            return EXIT_BACKEND
        if any(r.blocks for r in self.results):
            return EXIT_GATE_FAILED
        return EXIT_OK

    @property
    def verdict(self) -> str:
        if self.backend_failed:
            return "backend_failed"
        if any(r.blocks for r in self.results):
            return "fail"
        return "warn" if any(not r.passed for r in self.results) else "pass"

    def to_dict(self) -> dict[str, Any]:
        """JSON for machines: verdict, exit code, each gate's numbers and checks."""

        return _finite(
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
                        "passed": r.passed,
                        "blocks": r.blocks,
                        "checks": [c.__dict__ for c in r.checks],
                        "tags": [t.__dict__ for t in r.tags],
                    }
                    for r in self.results
                ],
            }
        )


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
    n_resamples: int = 10_000,
    seed: int = 0,
) -> GateReport:
    """Apply every gate to the candidate (against the baseline where one is given).

    `groups` maps tag -> query ids (tag breakdowns and per-tag limits); `failures` maps the
    candidate's failed query ids to their status (the CLI reads them from the run; by default they
    come from the evaluation: failed statuses, plus the queries pytrec_eval mode left out).
    """
    if baseline is None and criteria.needs_baseline:
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
        results.append(_apply(gate, a, b, baseline is not None, groups, gpos, criteria.alpha, n_resamples, seed))
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


def _scope_checks(
    scope: str, lim: Limits, base: np.ndarray | None, cand: np.ndarray, p: float | None, gate: Gate, alpha: float
) -> list[Check]:
    out = []
    cmean = float(cand.mean()) if cand.size else math.nan
    lower = lower_is_better(gate.metric)  # then the threshold is a ceiling and a rise is the regression
    if lim.threshold is not None:
        ok = cmean <= lim.threshold + EPS if lower else cmean >= lim.threshold - EPS
        out.append(Check(scope, "ceiling" if lower else "floor", lim.threshold, cmean, bool(ok)))
    if lim.regression_max is not None and base is not None:
        worse = (cand.mean() - base.mean()) if lower else (base.mean() - cand.mean())
        drop = float(worse) if cand.size else math.nan
        too_big = drop > lim.regression_max + EPS
        waived = bool(too_big and gate.require_significance and not (p is not None and p < alpha))
        passed = not too_big or waived
        out.append(Check(scope, "regression", lim.regression_max, drop, passed, waived, p, alpha, lower))
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
    p = ci = delta = None
    if base is not None:
        d = b - a
        delta = float(d.mean())
        p = randomization_test(d, n_resamples, seed)
        ci = bootstrap_ci(d, n_resamples, seed)
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
    return GateResult(gate, float(b.mean()), float(a.mean()) if has_baseline else None, delta, ci, p, checks, rows)
