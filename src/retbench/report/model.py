"""What a results report shows, gathered once from a study's typed results (`StudyResult`) for every renderer.

The HTML and Markdown renderers format this object and nothing else, so both always show the same
numbers: the values exactly as in metrics.json, with their confidence intervals, the
coverage behind each ("scored N of M"), the counting mode, latencies where recorded, and paired
comparisons of every system against a baseline on the primary metrics.

The gathering computes nothing itself: the pairs come from `results.layout`, their comparison from `comparison`,
rank intervals from `resolution`, P-R curves from `evaluation.curves`, cutoff families from `metrics.cutoffs`,
latency percentiles from `results.usage`, holes from `results.caveats`, and the dataset's qrels and the judge's
reasons from `results.read`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from retbench.alignment import align
from retbench.comparison import Comparison, compare
from retbench.data import Run
from retbench.errors import InputError
from retbench.estimates import source_label
from retbench.evaluation import Evaluation
from retbench.evaluation.curves import curve_rounding, k_curves, pr_curves
from retbench.inputs import canonical_metrics
from retbench.metrics.coverage import coverage
from retbench.metrics.cutoffs import metric_curves
from retbench.metrics.primary import default_primary
from retbench.report import fmt
from retbench.resolution import RankResolution, resolve
from retbench.results.caveats import find_holes
from retbench.results.layout import comparison_pairs
from retbench.results.model import StudyResult, SystemResult
from retbench.results.read import judge_reasons, judgements
from retbench.results.usage import latency_summary

if TYPE_CHECKING:
    from retbench.data import Corpus, Qrels
    from retbench.leaderboard import Leaderboard
    from retbench.report.drilldown import Drill
    from retbench.results.caveats import Holes


@dataclass
class SystemSummary:
    name: str
    means: dict[str, float]
    ci: dict[str, tuple[float, float]]
    coverage: dict[str, int]  # judged, answered, failed, missing, counted, skipped_no_relevant
    mode: str
    latencies_ms: list[float] = field(default_factory=list)  # sorted ascending
    latency: dict[str, float] = field(default_factory=dict)  # p50, p95, p99, mean, max (ms), n
    describe: dict[str, Any] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)
    resources: dict[str, Any] = field(default_factory=dict)  # the manifest's resource figures
    applies: dict[str, tuple[int, int]] = field(default_factory=dict)  # metric -> (n, of) when it applies to some
    judged_counts: dict[str, tuple[int, int]] = field(default_factory=dict)  # judged metric -> (verdicts ok, of)
    # blocks of the system's result (results/usage.py, studies/cell.breakdown)
    breakdown: dict[str, Any] = field(default_factory=dict)  # group -> {"n", "means"}
    stages: dict[str, Any] = field(default_factory=dict)  # {"stages": {stage: {p50_s, ...}}, "suite_seconds"}
    latency_query: dict[str, Any] = field(default_factory=dict)  # what the latency measured (results/usage.py)
    usage: dict[str, Any] = field(default_factory=dict)  # LLM stage -> {calls, tokens, cost}
    error: str | None = None  # the system failed as a whole (not built, not indexed): no scores, shown as failed
    estimates: dict[str, dict[str, Any]] = field(default_factory=dict)  # metric -> its value's `estimate`

    @property
    def short(self) -> int | None:
        """Counted queries that returned fewer documents than the depth asked for (None: not recorded)."""
        v = self.coverage.get("short")
        return None if v is None else int(v)

    def applies_note(self, metric: str) -> str:
        """ " (judged N of M)" for an LLM-judged metric, " (n of M)" for one that applies to some queries, else "";
        then the label source where it is not human (" (LLM labels, judge bias uncorrected)")."""
        source = source_label(self.estimates.get(metric), value=True)
        tail = f" ({source})" if source else ""
        if metric in self.judged_counts:
            return f" ({fmt.judged(*self.judged_counts[metric])})" + tail
        if metric not in self.applies:
            return tail
        n, of = self.applies[metric]
        return f" ({fmt.applicable(n, of)})" + tail

    @property
    def answered(self) -> int:
        return int(self.coverage.get("answered", 0))

    @property
    def judged(self) -> int:
        return int(self.coverage.get("judged", 0))


@dataclass
class ReportData:
    title: str
    root: str
    created: str
    datasets: list[dict[str, Any]]
    versions: dict[str, str]
    machine: dict[str, Any]
    metrics: list[str]
    systems: list[SystemSummary]
    curves: dict[str, list[tuple[int, str]]]  # family label -> [(k, metric)] with two or more cutoffs
    baseline: str | None
    primary: str
    comparison: Comparison | None = None  # compare.Comparison of each system against the baseline
    deltas: dict[str, list[float]] = field(default_factory=dict)  # system -> per-query delta on `primary`
    result: StudyResult | None = None  # the typed results the report was built from
    leaderboard: Leaderboard | None = None  # retbench.leaderboard.Leaderboard when the results span several datasets
    drill: Drill | None = None  # report.drilldown.Drill: per-query documents and metric@k curves from the runs
    resolution: RankResolution | None = None  # three or more systems on one dataset, on the primary metric
    pr_curves: dict[str, list[float]] = field(default_factory=dict)  # system -> iprec at recall 0.0 .. 1.0
    pr_rounding: str = "round"  # the recall rounding of those curves (evaluation.curves.curve_rounding)
    holes: list[Holes] = field(default_factory=list)  # systems whose top 10 is too often unjudged

    def system(self, name: str) -> SystemSummary:
        return next(s for s in self.systems if s.name == name)

    @property
    def stored(self) -> dict[str, Any]:
        """The results as metrics.json holds them (version 2), for the report's embedded data."""
        return self.result.to_dict() if self.result is not None else {}

    @property
    def modes(self) -> set[str]:
        return {s.mode for s in self.systems}


def build_report(
    result: StudyResult,
    *,
    baseline: str | None = None,
    primary: str | None = None,
    n_resamples: int | None = None,
    seed: int = 0,
    drill_k: int = 10,
) -> ReportData:
    """Compute what the report shows (comparisons included) from a study's typed results.

    The result is what a study that just ran holds (its tables, runs and dataset in memory: nothing is read
    back) or what `results.read_results` read from a folder (tables read when first asked for).
    `drill_k` is how many documents per system the drill-down shows (0: no drill-down or k curves).
    Systems that failed as a whole are listed as failures beside the others, never compared.
    The comparison tests each system against `baseline` (default: the config's `baseline:`, else the
    first system) on `primary` (default: the config's `primary:` metrics, else its first), with
    `n_resamples` sized to those tests unless given.
    """
    path = result.root or Path(".")
    if not result.systems:
        raise InputError("metrics.json holds no system", path=path / "metrics.json")
    failed = {s.name: s.error for s in result if s.error is not None}
    names = [n for n in result.systems if n not in failed]
    if not names:
        return _all_failed(result, failed)
    tested = None if primary is not None else result.manifest.primary
    metrics, primary = _metrics_and_primary(result.systems[names[0]], primary or (tested[0] if tested else None), path)
    if baseline is None and result.manifest.baseline not in failed:
        baseline = result.manifest.baseline
    from retbench.leaderboard import build_leaderboard

    board = build_leaderboard(result, primary)
    pairs = comparison_pairs(names, baseline, board is not None)
    if baseline in failed:
        raise InputError(
            f"system {baseline!r} failed as a whole ({failed[baseline]}); compare against one of: {', '.join(names)}",
            path=path,
            field="baseline",
        )
    if baseline is not None and not pairs and len(names) > 1:
        raise InputError(
            f"no system {baseline!r} in these results (have: {', '.join(names)})", path=path, field="baseline"
        )
    baseline = pairs[0][0] if pairs else names[0]
    systems, evs, runs = _summaries(result, names)
    cmp = None
    deltas: dict[str, list[float]] = {}
    if pairs:  # a suite with one system per dataset has nothing to pair
        tested_metrics = canonical_metrics([str(m) for m in tested]) if tested else [primary]
        # the tested metrics every system has; per-query deltas of the primary one, where it is among them
        shared = [m for m in tested_metrics or [primary] if all(m in ev.metrics for ev in evs.values())]
        cmp = compare(list(evs.values()), pairs, shared, queries=result.queries, n_resamples=n_resamples, seed=seed)
        if primary in shared:
            deltas = {b: align(evs[a], evs[b], [primary]).deltas(primary) for a, b in pairs}
    drill, pr, holes = None, {}, []
    if board is None:
        found = judgements(result)
        means = {s.name: s.means for s in systems}
        pr = pr_curves(evs, runs, found[0] if found else None, means)
        holes = find_holes(evs, runs, found[0] if found else None, means)
        if drill_k > 0 and found is not None:
            drill = _drill(result, found, evs, runs, primary, baseline, drill_k)
    return ReportData(
        **_about(result),
        metrics=metrics,
        systems=_in_order(list(result.systems), systems, [_failed_summary(n, e, result) for n, e in failed.items()]),
        curves=metric_curves(metrics),
        baseline=baseline if pairs else None,
        primary=primary,
        comparison=cmp,
        deltas=deltas,
        result=result,
        leaderboard=board,
        drill=drill,
        resolution=resolve(list(evs.values()), primary) if board is None else None,
        pr_curves=pr,
        pr_rounding=curve_rounding(evs),
        holes=holes,
    )


def _drill(
    result: StudyResult,
    found: tuple[Qrels, Corpus],
    evs: dict[str, Evaluation],
    runs: dict[str, Run],
    primary: str,
    baseline: str,
    k: int,
) -> Drill:
    """The drill-down (per-query documents, metric@k curves) of a one-dataset study from its (qrels, corpus)."""
    from retbench.report import drilldown

    qrels, corpus = found
    reasons = {s: judge_reasons(result.root, s) for s in evs} if result.root is not None else None
    drill = drilldown.gather(
        evs, runs, qrels, corpus, result.queries, primary=primary, baseline=baseline, k=k, reasons=reasons
    )
    given = {s: t.curves for s, t in result.tables.items() if t.curves}
    drill.curves = k_curves(evs, runs, qrels, given)
    return drill


def _metrics_and_primary(system: SystemResult, primary: str | None, path: Path) -> tuple[list[str], str]:
    """The metrics of a system's result and the primary one, the metric systems are ranked on (default:
    `metrics.primary.default_primary`, the first that measures the systems rather than the labels or a scope stage)."""
    metrics = list(system.metrics)
    if primary is not None:
        primary = (canonical_metrics([primary]) or [primary])[0]
        if primary not in metrics:
            raise InputError(
                f"metric {primary!r} is not in these results (have: {', '.join(metrics)})", path=path, field="primary"
            )
    if not metrics:
        raise InputError("no metric has a value in metrics.json", path=path, field="metrics")
    return metrics, primary or default_primary(metrics) or metrics[0]


def _in_order(names: list[str], *groups: list[SystemSummary]) -> list[SystemSummary]:
    """The summaries in the results' (the config's) system order, failed systems in their place."""
    by_name = {s.name: s for g in groups for s in g}
    return [by_name[n] for n in names if n in by_name]


def _failed_summary(name: str, error: str, result: StudyResult) -> SystemSummary:
    """A system that failed as a whole: no means, its error, the counting mode of the study."""
    return SystemSummary(name, {}, {}, {}, result.manifest.mode, error=error)


def _about(result: StudyResult) -> dict[str, Any]:
    """What a report says about the run itself, from its manifest."""
    man = result.manifest
    return {
        "title": man.title or (result.root.name if result.root is not None else "results"),
        "root": str(result.root or ""),
        "created": man.created,
        "datasets": man.datasets,
        "versions": man.versions,
        "machine": man.machine,
    }


def _all_failed(result: StudyResult, failed: Mapping[str, str]) -> ReportData:
    """The report of a study whose every system failed as a whole: the failures, and what was asked."""
    metrics = result.manifest.metrics
    return ReportData(
        **_about(result),
        metrics=metrics,
        systems=[_failed_summary(n, e, result) for n, e in failed.items()],
        curves={},
        baseline=None,
        primary=metrics[0] if metrics else "",
        result=result,
    )


def _summaries(
    result: StudyResult, names: list[str]
) -> tuple[list[SystemSummary], dict[str, Evaluation], dict[str, Run]]:
    """Each system's values, CIs, stored coverage and latencies, with its evaluation and run."""
    evs: dict[str, Evaluation] = {}
    runs: dict[str, Run] = {}
    systems = []
    for s in names:
        res = result.systems[s]
        ev = evs[s] = result.evaluation(s)
        run = runs[s] = result.run(s)
        timed = [q for q, v in run.latency.items() if v is not None and math.isfinite(v)]
        ms, lat = latency_summary([run.latency[q] for q in timed], any(q in run.latency_batch for q in timed))
        info = result.manifest.system(s)
        systems.append(
            SystemSummary(
                s,
                res.means(),
                {m: v.ci for m, v in res.metrics.items() if v.ci is not None},
                ev.coverage or coverage(ev, run),  # computed only for results older than the stored one
                ev.mode,
                ms,
                lat,
                dict(info.get("describe") or {}),
                dict(info.get("timings") or {}),
                dict(res.resources or info.get("resources") or {}),
                {m: (v.n, v.of) for m, v in res.metrics.items() if v.of is not None and v.n is not None},
                res.judged_counts(),
                breakdown=dict(res.breakdown or {}),
                stages=dict(res.latency),
                latency_query=dict(res.latency.get("query") or {}),
                usage=dict(res.usage or {}),
                estimates={m: v.estimate for m, v in res.metrics.items() if v.estimate is not None},
            )
        )
    return systems, evs, runs
