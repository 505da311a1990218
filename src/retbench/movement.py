"""How much two systems' results move, before anyone labels: the whole `retbench diff` flow as one call.

Two runs (TREC run files, from retbench or any other tool, or systems of results directories) are aligned by
query id over the union of their queries; each query's top k is compared with the label-free measures of
`metrics.overlap`, each measure's mean carries a percentile bootstrap interval over queries (`stats.bootstrap_cis`,
as every other number), and the report names the queries that moved most (their two top k side by side) and the
documents that entered or left many queries' top k (a new index that drops a family of documents shows at once).

A query one side lacks or failed on is an empty ranking there, so it counts as moved (missing is not good).
Where qrels judge some of the queries, both runs are scored there with one metric and the report says whether
movement predicts the metric's change: how often an unchanged top k kept its score (always, for a rank metric cut
at or above k), how often a changed one did not, and the rank correlation between 1 − RBO_EXT and |Δ metric|.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from retbench.data import Qrels, Run
from retbench.errors import InputError
from retbench.evaluation import evaluate
from retbench.io.files import json_safe
from retbench.io.judgements import read_judgements
from retbench.io.trec import read_run
from retbench.metrics.overlap import MEASURES, MORE_IS_MOVEMENT, TopK, check_k, check_p, overlap_measures, top_k_codes
from retbench.results import load_results
from retbench.stats.paired import bootstrap_cis, check_resamples

Note = Callable[[str], None]


@dataclass
class MeasureSummary:
    """One measure over the compared queries: mean and bootstrap interval over those where it is defined."""

    name: str
    meaning: str
    mean: float
    low: float
    high: float
    n: int  # queries where the measure is defined (tau and rho need two items and some spread)
    more_is_movement: bool


@dataclass
class MovedQuery:
    qid: str
    text: str
    rbo_ext: float
    jaccard: float
    top_a: list[str]
    top_b: list[str]


@dataclass
class DocShift:
    """A document that entered (`appeared`) or left (`vanished`) the top k of many queries."""

    doc: str
    queries: int


@dataclass
class LabelledCheck:
    """Where qrels judge some compared queries: does movement predict the metric's change there?"""

    metric: str
    n: int  # compared queries the qrels judge
    n_changed: int  # of those, top k changed as a set
    metric_changed_when_changed: float  # share of changed queries whose metric moved
    metric_changed_when_unchanged: float  # share of unchanged queries whose metric moved (order changes, deeper k)
    mean_abs_delta_changed: float
    mean_abs_delta_unchanged: float
    spearman: float  # rank correlation of 1 − RBO_EXT with |Δ metric| (NaN: no spread)


@dataclass
class RunDiff:
    """What `diff` found; `values` holds every measure per query, aligned with `query_ids`."""

    name_a: str
    name_b: str
    k: int
    p: float
    query_ids: list[str]
    values: dict[str, np.ndarray]
    summary: list[MeasureSummary]
    counts: dict[str, int]
    moved: list[MovedQuery]
    appeared: list[DocShift]
    vanished: list[DocShift]
    labelled: LabelledCheck | None = None
    n_resamples: int = 10_000
    seed: int = 0
    notes: list[str] = field(default_factory=list)

    def measure(self, name: str) -> MeasureSummary:
        for m in self.summary:
            if m.name == name:
                return m
        raise KeyError(name)

    def changed_queries(self, as_order: bool = False) -> list[str]:
        """The queries whose top k changed (as a set, or as an order)."""
        flags = self.values["changed_order" if as_order else "changed_set"]
        return [q for q, f in zip(self.query_ids, flags.tolist(), strict=True) if f]

    def to_dict(self) -> dict[str, Any]:
        return json_safe(
            {
                "a": self.name_a,
                "b": self.name_b,
                "k": self.k,
                "p": self.p,
                "counts": self.counts,
                "bootstrap": {"n_resamples": self.n_resamples, "seed": self.seed, "confidence": 0.95},
                "measures": [m.__dict__ for m in self.summary],
                "moved": [m.__dict__ for m in self.moved],
                "appeared": [d.__dict__ for d in self.appeared],
                "vanished": [d.__dict__ for d in self.vanished],
                "labelled": self.labelled.__dict__ if self.labelled else None,
                "changed_queries": self.changed_queries(),
                "notes": self.notes,
            }
        )


def load_run(path: str | Path, system: str | None = None) -> Run:
    """A run from a TREC run file, or one system of a results directory (`system`; needed when it holds more)."""
    p = Path(path)
    if p.is_file():
        return read_run(p)
    if not p.is_dir():
        raise InputError("not found: expected a TREC run file or a results directory", path=p)
    res = load_results(p)
    names = list(res.systems)
    if system is None:
        if len(names) != 1:
            raise InputError(f"holds several systems ({', '.join(names)}): name one", path=p, field="system")
        system = names[0]
    if system not in names:
        raise InputError(f"no system {system!r} here (have: {', '.join(names)})", path=p, field="system")
    run = res.run(system)
    run.name = run.name or system
    return run


def side_names(name_a: str, name_b: str, source_a: object, source_b: object) -> tuple[str, str]:
    """Names the report can tell apart. Other tools write one fixed tag in every run (pyserini: `Anserini`), so
    when both runs carry the same name (or none) each side is named by its file (`current.trec` -> `current`),
    else by the name with `(A)` / `(B)` after it."""
    a, b = name_a or "A", name_b or "B"
    if a != b:
        return a, b
    if isinstance(source_a, str | Path) and isinstance(source_b, str | Path):
        stems = Path(source_a).stem, Path(source_b).stem
        if stems[0] != stems[1]:
            return stems
    return f"{a} (A)", f"{b} (B)"


def diff(
    run_a: Run | str | Path,
    run_b: Run | str | Path,
    *,
    k: int = 10,
    p: float = 0.9,
    system_a: str | None = None,
    system_b: str | None = None,
    qrels: Qrels | str | Path | None = None,
    metric: str = "ndcg@10",
    queries: Mapping[str, str] | None = None,
    top: int = 10,
    n_resamples: int = 10_000,
    seed: int = 0,
) -> RunDiff:
    """Compare run B with run A (label-free); see the module docstring. `queries` (id -> text) label the moved
    queries; `qrels` add the check of movement against metric change on the queries they judge."""
    k, p, n_resamples = check_k(k), check_p(p), check_resamples(n_resamples)
    a = run_a if isinstance(run_a, Run) else load_run(run_a, system_a)
    b = run_b if isinstance(run_b, Run) else load_run(run_b, system_b)
    in_a, in_b = set(a.query_ids), set(b.query_ids)
    qids = list(dict.fromkeys([*a.query_ids, *b.query_ids]))
    if not qids:
        raise InputError("both runs are empty: no query to compare")
    top_k = top_k_codes(a, b, qids, k)
    values = overlap_measures(top_k.a, top_k.b, p)
    summary = _summaries(values, n_resamples, seed)
    counts = {
        "queries": len(qids),
        "only_a": len(in_a - in_b),
        "only_b": len(in_b - in_a),
        "failed_a": len(a.failed()),
        "failed_b": len(b.failed()),
        "changed_set": int(values["changed_set"].sum()),
        "changed_order": int(values["changed_order"].sum()),
    }
    appeared, vanished = _doc_shifts(top_k, top)
    name_a, name_b = side_names(a.name, b.name, run_a, run_b)
    out = RunDiff(
        name_a,
        name_b,
        k,
        p,
        qids,
        values,
        summary,
        counts,
        _most_moved(top_k, values, queries or {}, top),
        appeared,
        vanished,
        n_resamples=n_resamples,
        seed=seed,
    )
    if counts["only_a"] or counts["only_b"]:
        out.notes.append(
            f"{counts['only_a']} queries only in {out.name_a}, {counts['only_b']} only in {out.name_b}: "
            "each counts as an empty ranking on the side that lacks it (moved)"
        )
    if qrels is not None:
        judged = qrels if isinstance(qrels, Qrels) else read_judgements(qrels)[0]
        out.labelled = labelled_check(a, b, judged, metric, qids, values)
    return out


def _summaries(values: Mapping[str, np.ndarray], n_resamples: int, seed: int) -> list[MeasureSummary]:
    """Each measure's mean and 95% percentile bootstrap interval over the queries where it is defined."""
    defined = {n: v[~np.isnan(v)] for n, v in values.items()}
    names = [n for n in MEASURES if defined[n].size]
    cis = dict(zip(names, bootstrap_cis([defined[n] for n in names], n_resamples, seed), strict=True))
    out = []
    for name, meaning in MEASURES.items():
        v = defined[name]
        low, high = cis.get(name, (float("nan"), float("nan")))
        mean = float(v.mean()) if v.size else float("nan")
        out.append(MeasureSummary(name, meaning, mean, low, high, int(v.size), name in MORE_IS_MOVEMENT))
    return out


def _most_moved(top_k: TopK, values: Mapping[str, np.ndarray], texts: Mapping[str, str], top: int) -> list[MovedQuery]:
    """The `top` queries of lowest RBO_EXT among those that changed (ties: lower Jaccard, then query id order)."""
    changed = np.flatnonzero(values["changed_order"] > 0)
    order = changed[np.lexsort((values["jaccard"][changed], values["rbo_ext"][changed]))][: max(top, 0)]
    return [
        MovedQuery(
            top_k.query_ids[i],
            texts.get(top_k.query_ids[i], ""),
            float(values["rbo_ext"][i]),
            float(values["jaccard"][i]),
            top_k.docs("a", i),
            top_k.docs("b", i),
        )
        for i in order.tolist()
    ]


def _doc_shifts(top_k: TopK, top: int) -> tuple[list[DocShift], list[DocShift]]:
    """Documents in B's top k but not A's (appeared) and the reverse (vanished), by how many queries."""

    def only_in(x: np.ndarray, y: np.ndarray) -> np.ndarray:
        rows = np.arange(x.shape[0], dtype=np.int64)[:, None]
        width = len(top_k.vocab) + 1
        ky = np.where(y >= 0, rows * width + y, -1).ravel()
        kx = np.where(x >= 0, rows * width + x, -1).ravel()
        lone = (kx >= 0) & ~np.isin(kx, ky)
        return np.bincount(x.ravel()[lone], minlength=len(top_k.vocab))

    def ranked(counts: np.ndarray) -> list[DocShift]:
        idx = np.flatnonzero(counts)
        idx = idx[np.lexsort((idx, -counts[idx]))][: max(top, 0)]
        return [DocShift(str(top_k.vocab[i]), int(counts[i])) for i in idx.tolist()]

    return ranked(only_in(top_k.b, top_k.a)), ranked(only_in(top_k.a, top_k.b))


def _rank_corr(x: np.ndarray, y: np.ndarray) -> float:
    """Spearman's rho (Pearson's correlation of mid-ranks); NaN without spread."""

    def midranks(v: np.ndarray) -> np.ndarray:
        order = np.argsort(v, kind="stable")
        sv = v[order]
        first = np.r_[True, sv[1:] != sv[:-1]]
        group = np.cumsum(first) - 1
        starts = np.flatnonzero(first)
        ends = np.r_[starts[1:], len(v)]
        mean_rank = (starts + ends - 1) / 2.0 + 1.0
        out = np.empty(len(v))
        out[order] = mean_rank[group]
        return out

    if len(x) < 2:
        return float("nan")
    rx, ry = midranks(x), midranks(y)
    rx, ry = rx - rx.mean(), ry - ry.mean()
    den = float(np.sqrt((rx * rx).sum() * (ry * ry).sum()))
    return float((rx * ry).sum() / den) if den > 0 else float("nan")


def labelled_check(
    a: Run, b: Run, qrels: Qrels, metric: str, qids: Sequence[str], values: Mapping[str, np.ndarray]
) -> LabelledCheck | None:
    """Both runs scored with `metric` on the compared queries the qrels judge; None when they judge none."""
    ea, eb = evaluate(a, qrels, [metric]), evaluate(b, qrels, [metric])
    va = dict(zip(ea.query_ids, ea.values[:, 0].tolist(), strict=True))
    vb = dict(zip(eb.query_ids, eb.values[:, 0].tolist(), strict=True))
    rows = [i for i, q in enumerate(qids) if q in va and q in vb]
    if not rows:
        return None
    idx = np.asarray(rows, dtype=np.int64)
    delta = np.abs(np.array([vb[qids[i]] - va[qids[i]] for i in rows]))
    moved = delta > 1e-12
    changed = values["changed_set"][idx] > 0

    def share(mask: np.ndarray) -> float:
        return float(moved[mask].mean()) if mask.any() else float("nan")

    def mean(mask: np.ndarray) -> float:
        return float(delta[mask].mean()) if mask.any() else float("nan")

    return LabelledCheck(
        ea.metrics[0],
        len(rows),
        int(changed.sum()),
        share(changed),
        share(~changed),
        mean(changed),
        mean(~changed),
        _rank_corr(1.0 - values["rbo_ext"][idx], delta),
    )
