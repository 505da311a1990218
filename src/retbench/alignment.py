"""Aligning two systems' per-query scores on the same query rows, the first step of every paired comparison.

Alignment never drops a query silently: systems are aligned on the union of their query ids, a
query a system failed on (or never answered) scores 0 there, and the counts are reported per side.
So comparisons always count like trec_eval, even between evaluations made in pytrec_eval mode
(whose failed queries are absent from their table). The counts shown are each side's coverage as
its run stored it in metrics.json (answered / judged / failed / missing), not recounted here.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from retbench.data.status import COVERAGE_COUNTS, FAILED, FAILED_COUNT, MISSING, UNANSWERED
from retbench.errors import InputError
from retbench.metrics.registry import unanswered_value_of

# Queries a system did not answer score 0 and are counted, never dropped (`data.status`).
FAILED_STATUSES = FAILED


class PerQueryScores(Protocol):
    """What comparison needs from an `evaluation.Evaluation`: a per-query table with statuses."""

    system: str
    metrics: list[str]
    query_ids: list[str]
    values: np.ndarray
    status: list[str]


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
        missing = sum(s == MISSING for s in status)
        return {
            "queries": len(status),
            "answered": len(status) - failed - missing,
            FAILED_COUNT: failed,
            MISSING: missing,
        }

    def deltas(self, metric: str) -> list[float]:
        """B - A per query on `metric`, queries where it does not apply (NaN on either side) left out."""
        col = self.metrics.index(metric)
        d = self.b[:, col] - self.a[:, col]
        return d[~np.isnan(d)].tolist()


def side_counts(ev: PerQueryScores, al: Aligned, side: str) -> dict[str, int]:
    """A side's coverage in a comparison or a gate: the counts stored in metrics.json when the evaluation
    carries them (read from a results directory or the history, or scored from a run file), so every
    command shows the figures the run recorded; else (a table built in Python) counted from `al`."""
    stored = getattr(ev, "coverage", None) or {}
    if not all(isinstance(stored.get(k), int) for k in COVERAGE_COUNTS):
        return al.counts(side)
    return {
        "queries": stored["judged"],
        "answered": stored["answered"],
        FAILED_COUNT: stored[FAILED_COUNT],
        MISSING: stored[MISSING],
    }


def column_index(ev: PerQueryScores, metric: str) -> int:
    try:
        return ev.metrics.index(metric)
    except ValueError:
        have = ", ".join(ev.metrics) or "none"
        raise InputError(
            f"metric {metric!r} is absent from system {ev.system!r} (has: {have})", field="metric"
        ) from None


def align(a: PerQueryScores, b: PerQueryScores, metrics: Sequence[str] | None = None) -> Aligned:
    """Put two evaluations on the same query rows; a query one side lacks is missing there (its worst value)."""
    if metrics is None:
        metrics = [m for m in a.metrics if m in b.metrics]
        if not metrics:
            raise InputError(f"systems {a.system!r} and {b.system!r} share no metric", field="metric")
    cols_a = [column_index(a, m) for m in metrics]
    cols_b = [column_index(b, m) for m in metrics]
    qids = list(dict.fromkeys([*a.query_ids, *b.query_ids]))
    if not set(a.query_ids) & set(b.query_ids):
        raise InputError(f"systems {a.system!r} and {b.system!r} have no query in common", field="query_id")

    def side(ev: PerQueryScores, cols: list[int]) -> tuple[np.ndarray, list[str]]:
        pos = {q: i for i, q in enumerate(ev.query_ids)}
        rows = np.array([pos.get(q, -1) for q in qids], dtype=np.int64)
        present = rows >= 0
        vals = np.zeros((len(qids), len(cols)), dtype=np.float64)
        vals[present] = np.asarray(ev.values, dtype=np.float64)[rows[present]][:, cols]
        status = [ev.status[r] if r >= 0 else MISSING for r in rows.tolist()]
        # failed or unanswered queries score each metric's worst value even if a table carried something else
        zero = np.array([s in UNANSWERED for s in status], dtype=bool)
        for j, name in enumerate(metrics):
            worst = unanswered_value_of(name)
            if worst is not None:
                vals[zero, j] = np.where(np.isnan(vals[zero, j]), np.nan, worst)
        return vals, status

    va, sa = side(a, cols_a)
    vb, sb = side(b, cols_b)
    # NaN: the metric does not apply to that query (an answer metric on an unanswerable question);
    # such a query is left out of that metric's pairs on both sides
    na = np.isnan(va) | np.isnan(vb)
    va[na] = vb[na] = np.nan
    return Aligned(qids, list(metrics), va, vb, sa, sb)
