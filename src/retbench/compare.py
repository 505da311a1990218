"""Paired A/B comparison of retrieval systems: deltas, confidence intervals and significance.

Two systems are compared query by query on the same queries: the unit of evidence is the
per-query delta `d = B - A` of one metric. Everything here is a function of such delta vectors:

- **randomization test** (the primary test, as in Smucker et al. 2007): sign-flip permutation of
  the deltas, two-sided on |mean|, p = (count + 1) / (resamples + 1), seeded so it is reproducible;
- **paired bootstrap** percentile 95% CI of the mean delta;
- **paired t-test** and **Wilcoxon signed-rank** (zero_method "wilcox": zero deltas are dropped,
  they are ties; exact null distribution up to 50 non-zero deltas, conditional on tied ranks,
  else the normal approximation with tie correction and no continuity correction);
- **Holm** step-down correction across every (metric, pair) compared, separately for each test;
- effect size d_z = mean delta / sd of deltas, and win/tie/loss counts.

Alignment never drops a query silently: systems are aligned on the union of their query ids, a
query a system failed on (or never answered) scores 0 there, and the counts are reported per side.
So comparisons always count like trec_eval, even between evaluations made in pytrec_eval mode
(whose failed queries are absent from their table). The counts shown are each side's coverage as
its run stored it in metrics.json (answered / judged / failed / missing), not recounted here.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from itertools import combinations
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from retbench.data import Qrels
from retbench.errors import InputError
from retbench.evaluation import coverage, evaluate, read_judgements, read_system
from retbench.io.beir import read_queries
from retbench.metrics.registry import DEFAULT_METRICS, parse_metrics
from retbench.results import history, load_results
from retbench.results.layout import paired_with, split_key
from retbench.stats import (
    bootstrap_ci,
    effect_size,
    holm,
    paired_ttest,
    randomization_test,
    wilcoxon_signed_rank,
)

# Queries a system did not answer: these score 0 and are counted, never dropped.
FAILED_STATUSES = frozenset({"error", "timeout", "invalid"})
MISSING_STATUS = "missing"
TIE_TOLERANCE = 1e-12
TESTS = ("randomization", "ttest", "wilcoxon")


class PerQueryScores(Protocol):
    """What comparison needs from an `evaluation.Evaluation`: a per-query table with statuses."""

    system: str
    metrics: list[str]
    query_ids: list[str]
    values: np.ndarray
    status: list[str]


# -- aligning two systems -----------------------------------------------------------------------
@dataclass
class Aligned:
    """Two systems' per-query values on the union of their query ids (0 where not answered)."""

    query_ids: list[str]
    metrics: list[str]
    a: np.ndarray  # [n_queries, n_metrics]
    b: np.ndarray
    status_a: list[str]
    status_b: list[str]

    def counts(self, side: str) -> dict[str, int]:
        """A side's queries, answered, failed and missing, counted from its aligned statuses."""
        status = self.status_a if side == "a" else self.status_b
        failed = sum(s in FAILED_STATUSES for s in status)
        missing = sum(s == MISSING_STATUS for s in status)
        return {
            "queries": len(status),
            "answered": len(status) - failed - missing,
            "failed": failed,
            "missing": missing,
        }


_COVERAGE_KEYS = ("judged", "answered", "failed", "missing")


def side_counts(ev: PerQueryScores, al: Aligned, side: str) -> dict[str, int]:
    """A side's coverage in a comparison or a gate: the counts stored in metrics.json when the evaluation
    carries them (read from a results directory or the history, or scored from a run file), so every
    command shows the figures the run recorded; else (a table built in Python) counted from `al`."""
    stored = getattr(ev, "coverage", None) or {}
    if not all(isinstance(stored.get(k), int) for k in _COVERAGE_KEYS):
        return al.counts(side)
    return {
        "queries": stored["judged"],
        "answered": stored["answered"],
        "failed": stored["failed"],
        "missing": stored["missing"],
    }


def _column_index(ev: PerQueryScores, metric: str) -> int:
    try:
        return ev.metrics.index(metric)
    except ValueError:
        have = ", ".join(ev.metrics) or "none"
        raise InputError(
            f"metric {metric!r} is absent from system {ev.system!r} (has: {have})", field="metric"
        ) from None


def align(a: PerQueryScores, b: PerQueryScores, metrics: Sequence[str] | None = None) -> Aligned:
    """Put two evaluations on the same query rows; a query one side lacks is 0 and 'missing' there."""
    if metrics is None:
        metrics = [m for m in a.metrics if m in b.metrics]
        if not metrics:
            raise InputError(f"systems {a.system!r} and {b.system!r} share no metric", field="metric")
    cols_a = [_column_index(a, m) for m in metrics]
    cols_b = [_column_index(b, m) for m in metrics]
    qids = list(dict.fromkeys([*a.query_ids, *b.query_ids]))
    if not set(a.query_ids) & set(b.query_ids):
        raise InputError(f"systems {a.system!r} and {b.system!r} have no query in common", field="query_id")

    def side(ev: PerQueryScores, cols: list[int]) -> tuple[np.ndarray, list[str]]:
        pos = {q: i for i, q in enumerate(ev.query_ids)}
        rows = np.array([pos.get(q, -1) for q in qids], dtype=np.int64)
        present = rows >= 0
        vals = np.zeros((len(qids), len(cols)), dtype=np.float64)
        vals[present] = np.asarray(ev.values, dtype=np.float64)[rows[present]][:, cols]
        status = [ev.status[r] if r >= 0 else MISSING_STATUS for r in rows.tolist()]
        # failed or unanswered queries count 0 even if a table carried something else
        zero = np.array([s in FAILED_STATUSES or s == MISSING_STATUS for s in status], dtype=bool)
        vals[zero] = np.where(np.isnan(vals[zero]), np.nan, 0.0)
        return vals, status

    va, sa = side(a, cols_a)
    vb, sb = side(b, cols_b)
    # NaN: the metric does not apply to that query (an answer metric on an unanswerable question);
    # such a query is left out of that metric's pairs on both sides
    na = np.isnan(va) | np.isnan(vb)
    va[na] = vb[na] = np.nan
    return Aligned(qids, list(metrics), va, vb, sa, sb)


# -- results ------------------------------------------------------------------------------------
@dataclass
class QueryChange:
    query_id: str
    text: str
    a: float
    b: float
    delta: float
    status_a: str
    status_b: str


@dataclass
class MetricComparison:
    """One metric of one pair: means, delta with CI, tests (raw and Holm-adjusted), W/T/L."""

    metric: str
    n: int
    mean_a: float
    mean_b: float
    delta: float
    ci_low: float
    ci_high: float
    effect_size: float
    wins: int  # B better than A
    ties: int
    losses: int
    pvalues: dict[str, float]
    adjusted: dict[str, float] = field(default_factory=dict)
    statistics: dict[str, float] = field(default_factory=dict)
    top_changes: list[QueryChange] = field(default_factory=list)

    @property
    def p(self) -> float:
        """The primary p-value: randomization test, Holm-adjusted when adjusted."""
        return self.adjusted.get("randomization", self.pvalues["randomization"])


@dataclass
class PairComparison:
    system_a: str
    system_b: str
    counts_a: dict[str, int]
    counts_b: dict[str, int]
    metrics: list[MetricComparison]

    def metric(self, name: str) -> MetricComparison:
        for m in self.metrics:
            if m.metric == name:
                return m
        raise KeyError(name)


@dataclass
class Comparison:
    """All pairs compared, with Holm applied across every (metric, pair) for each test."""

    pairs: list[PairComparison]
    n_resamples: int
    seed: int
    confidence: float = 0.95
    correction: str = "holm"
    wilcoxon_zero_method: str = "wilcox"

    def to_dict(self) -> dict[str, Any]:
        return _finite(asdict(self))

    def rows(self) -> list[dict[str, Any]]:
        """One flat row per (pair, metric): means, delta, CI, W/T/L and raw and adjusted p-values."""
        out = []
        for p in self.pairs:
            for m in p.metrics:
                row: dict[str, Any] = {"system_a": p.system_a, "system_b": p.system_b, "metric": m.metric, "n": m.n}
                row.update(mean_a=m.mean_a, mean_b=m.mean_b, delta=m.delta, ci_low=m.ci_low, ci_high=m.ci_high)
                row.update(effect_size=m.effect_size, wins=m.wins, ties=m.ties, losses=m.losses)
                row.update({f"p_{t}": v for t, v in m.pvalues.items()})
                row.update({f"p_{t}_{self.correction}": v for t, v in m.adjusted.items()})
                out.append(row)
        return out

    def to_pandas(self) -> Any:
        """`rows()` as a DataFrame (needs pandas: `pip install 'retbench[pandas]'`)."""
        from retbench.io.frames import pandas

        return pandas().DataFrame(self.rows())

    def pair(self, a: str, b: str) -> PairComparison:
        for p in self.pairs:
            if (p.system_a, p.system_b) == (a, b):
                return p
        raise KeyError((a, b))


def _finite(obj: Any) -> Any:
    """JSON has no NaN/Infinity: write them as null / strings."""
    if isinstance(obj, float):
        if math.isnan(obj):
            return None
        if math.isinf(obj):
            return "inf" if obj > 0 else "-inf"
        return obj
    if isinstance(obj, dict):
        return {k: _finite(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_finite(v) for v in obj]
    return obj


def compare_pair(
    a: PerQueryScores,
    b: PerQueryScores,
    metrics: Sequence[str] | None = None,
    *,
    queries: Mapping[str, str] | None = None,
    n_resamples: int = 10_000,
    seed: int = 0,
    confidence: float = 0.95,
    top: int = 5,
) -> PairComparison:
    """Compare system B against system A on each metric (unadjusted p-values).

    `top_changes` lists the `top` queries B improved most and the `top` it hurt most, with their text.
    """
    al = align(a, b, metrics)
    out: list[MetricComparison] = []
    for j, metric in enumerate(al.metrics):
        rows = np.flatnonzero(~np.isnan(al.a[:, j]))  # the queries this metric applies to
        va, vb = al.a[rows, j], al.b[rows, j]
        qids = [al.query_ids[i] for i in rows.tolist()]
        d = vb - va
        low, high = bootstrap_ci(d, n_resamples, seed, confidence)
        tt = paired_ttest(va, vb)
        wx = wilcoxon_signed_rank(va, vb)
        # the `top` biggest gains and the `top` biggest losses, best first
        desc = np.argsort(-d, kind="stable")
        gains = [i for i in desc[:top].tolist() if d[i] > TIE_TOLERANCE]
        losses = [i for i in desc[::-1][:top].tolist() if d[i] < -TIE_TOLERANCE][::-1]
        changes = [
            QueryChange(
                qids[i],
                (queries or {}).get(qids[i], ""),
                float(va[i]),
                float(vb[i]),
                float(d[i]),
                al.status_a[rows[i]],
                al.status_b[rows[i]],
            )
            for i in gains + losses
        ]
        out.append(
            MetricComparison(
                metric=metric,
                n=int(d.size),
                mean_a=float(va.mean()),
                mean_b=float(vb.mean()),
                delta=float(d.mean()),
                ci_low=low,
                ci_high=high,
                effect_size=effect_size(d),
                wins=int(np.count_nonzero(d > TIE_TOLERANCE)),
                ties=int(np.count_nonzero(np.abs(d) <= TIE_TOLERANCE)),
                losses=int(np.count_nonzero(d < -TIE_TOLERANCE)),
                pvalues={
                    "randomization": randomization_test(d, n_resamples, seed),
                    "ttest": tt.pvalue,
                    "wilcoxon": wx.pvalue,
                },
                statistics={"ttest": tt.statistic, "wilcoxon": wx.statistic},
                top_changes=changes,
            )
        )
    return PairComparison(a.system, b.system, side_counts(a, al, "a"), side_counts(b, al, "b"), out)


def adjust(pairs: Sequence[PairComparison]) -> None:
    """Holm-adjust each test's p-values across every (metric, pair), in place."""
    cells = [m for p in pairs for m in p.metrics]
    for test in TESTS:
        adjusted = holm([m.pvalues[test] for m in cells])
        for m, v in zip(cells, adjusted.tolist(), strict=True):
            m.adjusted[test] = v


def all_pairs(systems: Sequence[str], baseline: str | None = None) -> list[tuple[str, str]]:
    """Every pair in order, or each system against `baseline`.

    Systems of a multi-dataset results directory (`<dataset>/<system>`) are paired only within
    their dataset (different datasets share no query), unless that leaves no pair at all.
    """
    if baseline is not None:
        if baseline not in systems:
            raise InputError(f"baseline system {baseline!r} not found (have: {', '.join(systems)})", field="baseline")
        return paired_with(systems, baseline)
    pairs = list(combinations(systems, 2))
    return [(a, b) for a, b in pairs if split_key(a)[0] == split_key(b)[0]] or pairs


def compare(
    evaluations: Sequence[PerQueryScores],
    pairs: Sequence[tuple[str, str]] | None = None,
    metrics: Sequence[str] | None = None,
    *,
    queries: Mapping[str, str] | None = None,
    n_resamples: int = 10_000,
    seed: int = 0,
    confidence: float = 0.95,
    top: int = 5,
) -> Comparison:
    """Compare the given pairs of systems (default: all pairs) and Holm-correct across them all."""
    by_name: dict[str, PerQueryScores] = {}
    for ev in evaluations:
        if ev.system in by_name:
            raise InputError(f"two systems are named {ev.system!r}; give them distinct names", field="system")
        by_name[ev.system] = ev
    if pairs is None:
        pairs = all_pairs(list(by_name))
    if not pairs:
        raise InputError("nothing to compare: need at least two systems", field="system")
    for x, y in pairs:
        for s in (x, y):
            if s not in by_name:
                raise InputError(f"unknown system {s!r} (have: {', '.join(by_name)})", field="system")
    if metrics is None:
        names = {s for p in pairs for s in p}
        metrics = [m for m in by_name[pairs[0][0]].metrics if all(m in by_name[s].metrics for s in names)]
    result = [
        compare_pair(
            by_name[x],
            by_name[y],
            metrics,
            queries=queries,
            n_resamples=n_resamples,
            seed=seed,
            confidence=confidence,
            top=top,
        )
        for x, y in pairs
    ]
    adjust(result)
    return Comparison(result, n_resamples, seed, confidence)


# -- reading inputs: results directories or run files (the one place the CLI's inputs are read) ------
@dataclass
class Loaded:
    """Systems read from the command line's inputs, with what the reports need beside the numbers."""

    evaluations: list[Any]  # evaluation.Evaluation, in input order
    sources: dict[str, str]  # system -> where it came from
    queries: dict[str, str] = field(default_factory=dict)  # query id -> text
    groups: dict[str, list[str]] = field(default_factory=dict)  # tag -> query ids
    failures: dict[str, dict[str, str]] = field(default_factory=dict)  # system -> failed qid -> status
    input_systems: list[list[str]] = field(default_factory=list)  # systems of each input, in order
    data: dict[str, list[dict[str, Any]]] = field(default_factory=dict)  # results dir -> datasets it was run on

    def get(self, system: str) -> Any:
        for ev in self.evaluations:
            if ev.system == system:
                return ev
        raise InputError(
            f"unknown system {system!r} (have: {', '.join(e.system for e in self.evaluations)})", field="system"
        )

    def one(self, system: str | None, role: str) -> Any:
        """The single system of an input, or the named one; several without a name is an error."""
        if system is not None:
            return self.get(system)
        if len(self.evaluations) != 1:
            have = ", ".join(e.system for e in self.evaluations)
            raise InputError(
                f"the {role} holds several systems ({have}); name one with --{role}-system", field=f"{role}-system"
            )
        return self.evaluations[0]

    def default_pairs(self, baseline: str | None = None) -> list[tuple[str, str]]:
        """Against `baseline` if given; two inputs holding the same systems pair by name; else all pairs."""
        names = [e.system for e in self.evaluations]
        if baseline is not None:
            return all_pairs(names, baseline)
        if len(self.input_systems) == 2:
            first, second = self.input_systems
            bare = [[s.rsplit("/", 1)[-1] for s in side] for side in (first, second)]
            if len(first) > 1 and sorted(bare[0]) == sorted(bare[1]):
                return [(first[bare[0].index(s)], second[bare[1].index(s)]) for s in bare[0]]
        return all_pairs(names)


def groups_from_queries(queries: Any) -> dict[str, list[str]]:
    """Tag -> query ids from query metadata (`tags` list or string, and `category` as `category:<c>`)."""
    groups: dict[str, list[str]] = {}
    for qid, meta in (getattr(queries, "metadata", None) or {}).items():
        if not isinstance(meta, Mapping):
            continue
        tags = meta.get("tags") or []
        for tag in [tags] if isinstance(tags, str) else tags:
            groups.setdefault(str(tag), []).append(qid)
        if meta.get("category"):
            groups.setdefault(f"category:{meta['category']}", []).append(qid)
    return groups


def canonical_metrics(names: Sequence[str] | None) -> list[str] | None:
    """Metric names as the registry spells them (None stays None: 'every metric the inputs share')."""
    if not names:
        return None

    return [s.name for s in parse_metrics(list(names))]


def load_systems(
    paths: Sequence[str | Any],
    *,
    qrels: str | Any | None = None,
    metrics: Sequence[str] | None = None,
    queries: str | Any | None = None,
    systems: Sequence[str] | None = None,
    check_metrics: bool = True,
) -> Loaded:
    """Read results directories (every system, or those named in `systems`) and/or TREC run files.

    Run files are scored against `qrels` with `metrics` (default: the runner's default metrics);
    with `check_metrics`, a metric some results directory lacks is an error. A system name that
    occurs in two inputs is prefixed by its input's folder or file name.
    """

    wanted = canonical_metrics(metrics)
    raw: list[tuple[str, Any, dict[str, str]]] = []  # (input label, evaluation, failed qid -> status)
    out = Loaded([], {})
    judged: Any = None  # the --qrels every run file is scored against, read once
    short = [Path(g).name if Path(g).is_dir() else Path(g).stem for g in paths]
    for given, name in zip(paths, short, strict=True):
        p = Path(given)
        label = name if short.count(name) == 1 else str(p)
        if p.is_dir():
            res = load_results(p)
            names = [s for s in res.systems if systems is None or s in systems]
            if not names:
                have = ", ".join(res.systems)
                raise InputError(
                    f"none of the systems {', '.join(systems or [])} is in these results (have: {have})",
                    path=p,
                    field="system",
                )
            for s in names:
                ev = res.evaluation(s)
                ev.system = s
                raw.append((label, ev, {q: st.value for q, st in res.run(s).status.items() if st.failed}))
            out.queries.update({q: res.queries[q] for q in res.queries})
            _merge_groups(out.groups, groups_from_queries(res.queries))
            out.data[str(p)] = data_identity(res.manifest)
        elif p.is_file():
            if judged is None:
                judged = _judgements(p, qrels)
            raw.append((label, _evaluate_file(p, judged, wanted), {}))
            out.data[str(p)] = [dict.fromkeys(_DATA_KEYS) | {"qrels_fingerprint": judged.fingerprint()}]
        else:
            raise InputError("not found: expected a results directory or a TREC run file", path=p)
    if queries is not None:
        q = read_queries(queries)
        out.queries.update(dict(q.items()))
        _merge_groups(out.groups, groups_from_queries(q))
    counts: dict[str, int] = {}
    for _, ev, _ in raw:
        counts[ev.system] = counts.get(ev.system, 0) + 1
    per_input: dict[str, list[str]] = {}
    for label, ev, failed in raw:
        if counts[ev.system] > 1:
            ev.system = f"{label}/{ev.system}"
        out.evaluations.append(ev)
        out.sources[ev.system] = label
        out.failures[ev.system] = failed
        per_input.setdefault(label, []).append(ev.system)
    out.input_systems = list(per_input.values())
    if wanted is not None and check_metrics:
        for ev in out.evaluations:
            for m in wanted:
                if m not in ev.metrics:
                    raise InputError(
                        f"metric {m!r} is absent from system {ev.system!r} (has: {', '.join(ev.metrics)})",
                        path=out.sources[ev.system],
                        field="metric",
                    )
    return out


_DATA_KEYS = ("name", "split", "corpus_fingerprint", "qrels_fingerprint")


def data_identity(manifest: Mapping[str, Any]) -> list[dict[str, Any]]:
    """What a results directory was computed on: per dataset its name, split and corpus/qrels fingerprints."""
    datasets = manifest.get("datasets") if isinstance(manifest, Mapping) else None
    return [{k: d.get(k) for k in _DATA_KEYS} for d in datasets or [] if isinstance(d, Mapping)]


def _agree(a: list[dict[str, Any]], b: list[dict[str, Any]]) -> bool:
    """Same datasets in the same order, on every field both sides know (None: not recorded)."""
    return len(a) == len(b) and all(
        x.get(k) is None or y.get(k) is None or x.get(k) == y.get(k)
        for x, y in zip(a, b, strict=True)
        for k in _DATA_KEYS
    )


def _show_data(v: list[dict[str, Any]]) -> str:
    def one(d: dict[str, Any]) -> str:
        if d.get("name") is None:  # a run file: only the --qrels it was scored against is known
            return f"scored on --qrels {d.get('qrels_fingerprint')}"
        return f"{d['name']}/{d['split']} (corpus {d['corpus_fingerprint']}, qrels {d['qrels_fingerprint']})"

    return ", ".join(one(d) for d in v) or "no dataset recorded"


def different_data(*loaded: Loaded) -> str | None:
    """None when every input was computed on the same corpus and qrels, else what differs.

    Numbers from different corpora or judgements are not comparable: a drop from 0.72 to 0.16 may
    be the data, not the system. Results directories and history entries carry the dataset, split
    and corpus/qrels fingerprints; a run file carries the fingerprint of the --qrels it was scored
    against, so it is checked against a directory's qrels (its corpus is not known).
    """
    data: dict[str, list[dict[str, Any]]] = {}
    for one in loaded:
        data.update(one.data)
    items = list(data.values())
    if all(_agree(a, b) for i, a in enumerate(items) for b in items[i + 1 :]):
        return None
    return "; ".join(f"{where}: {_show_data(v)}" for where, v in data.items())


def load_history(spec: str, path: str | Path | None = None) -> tuple[Loaded, Any]:
    """A `history:<which>` baseline as Loaded (its stored per-query tables and data identity) and its entry."""
    entry = history.resolve(spec, path)
    evs = history.evaluations(entry, path)
    where = f"history run {entry.id} ({entry.results_dir})"
    data = {where: [{k: d.get(k) for k in _DATA_KEYS} for d in entry.datasets]}
    return Loaded(evs, {e.system: where for e in evs}, data=data), entry


def _merge_groups(into: dict[str, list[str]], more: Mapping[str, Sequence[str]]) -> None:
    for tag, qids in more.items():
        have = into.setdefault(tag, [])
        have.extend(q for q in qids if q not in have)


def _judgements(path: Path, qrels: Any) -> Qrels:
    """The --qrels run files are scored against (any form `read_judgements` reads, or Qrels already)."""
    if qrels is None:
        raise InputError("a run file needs --qrels to be scored", path=path, field="qrels")
    return qrels if isinstance(qrels, Qrels) else read_judgements(qrels)[0]


def _evaluate_file(path: Any, judged: Qrels, metrics: Sequence[str] | None) -> Any:
    """Score one run file (TREC run or system outputs, with their answer side) against the judgements."""
    run, texts, answers = read_system(path)
    ev = evaluate(
        run,
        judged,
        list(metrics or DEFAULT_METRICS),
        system=run.name,
        texts=texts or None,
        answers=answers or None,
    )
    ev.coverage = coverage(ev, run)  # a bare run file has no metrics.json: computed here, once
    return ev
