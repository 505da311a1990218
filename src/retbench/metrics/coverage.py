"""Coverage: how much of a ranking the labels cover (`judged@k`, `holes@k`), and what happened to the
judged queries (`coverage`: answered, failed, missing, skipped, shorter than the depth asked for).

judged@k = |top-min(k, returned) documents with any label (any grade, 0 included)| / min(k, returned);
holes@k = 1 - judged@k over the same documents. A query that returned nothing scores 0 on both
(there is nothing to be judged or unjudged). Pooled qrels leave holes that read as "not relevant"
and bias comparisons against systems that were not in the pool (Buckley and Voorhees 2004, bpref);
these two metrics show how large that bias can be, per system, under whichever labels are in use
(human, LLM, or human-then-LLM).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

import numpy as np

from retbench.data import Run


class CountedTable(Protocol):
    """What `coverage` reads of a per-query table (`evaluation.Evaluation` has it; the evaluation package is
    built on this one, so the function names only these members)."""

    @property
    def query_ids(self) -> Sequence[str]: ...
    @property
    def excluded(self) -> Sequence[str]: ...
    @property
    def skipped(self) -> Sequence[str]: ...
    @property
    def mode(self) -> str: ...
    @property
    def ignore_identical_ids(self) -> bool: ...
    @property
    def n_identical(self) -> int: ...
    @property
    def n_identical_relevant(self) -> int: ...


def _labelled_share(ctx, k: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    n = len(ctx.gm)
    judged = np.zeros(n, dtype=np.float64)
    seen = np.zeros(n, dtype=np.float64)
    qrels = ctx.qrels or {}
    for i, qid in enumerate(ctx.gm.query_ids):
        ranked = ctx.ranked(i, int(k[i]) if k is not None else None)
        if not ranked:
            continue
        labels = qrels.get(qid, {}) if qid in qrels else {}
        seen[i] = len(ranked)
        judged[i] = sum(1 for d in ranked if d in labels)
    return judged, seen


def judged_at_k(ctx, k: np.ndarray | None) -> np.ndarray:
    judged, seen = _labelled_share(ctx, k)
    return np.divide(judged, seen, out=np.zeros_like(judged), where=seen > 0)


def holes_at_k(ctx, k: np.ndarray | None) -> np.ndarray:
    judged, seen = _labelled_share(ctx, k)
    return np.divide(seen - judged, seen, out=np.zeros_like(judged), where=seen > 0)


def mode_with_identical(mode: str, coverage: Mapping[str, Any]) -> str:
    """A coverage table's mode cell: the mode, and BEIR's identical-id rule with its count where it applied."""
    dropped = coverage.get("identical_ids_dropped")
    if dropped is None:
        return mode
    relevant = int(coverage.get("identical_ids_relevant") or 0)
    judged = f", {relevant} of them judged relevant" if relevant else ""
    return f"{mode}; identical query/doc ids ignored ({int(dropped)} dropped{judged})"


def coverage(ev: CountedTable, run: Run, depth: int | None = None) -> dict[str, Any]:
    """What happened to the judged queries: computed once by the cell runner and stored in metrics.json.

    judged = counted + excluded (pytrec_eval mode leaves unanswered queries out of the table and
    lists them in `excluded`); answered = judged - failed - missing; scored (also `counted`) is the
    denominator of every mean; skipped_no_relevant are judged queries without a relevant document.
    With the `depth` the run was asked for, `short` counts the answered, counted queries that returned
    fewer documents than that (a chunked retriever collapsing chunks to fewer documents, a store that
    returns fewer): their metrics at cutoffs past what they returned score the missing ranks as not
    relevant, so a reader should know how many there were (`short_min`..`short_max`: the lengths they
    had, when there were any). With identical ids ignored (BEIR's rule, the
    pytrec_eval mode's default), `identical_ids_dropped` counts the retrieved documents dropped for it and
    `identical_ids_relevant` those of them the qrels judge relevant (the rule then drops a relevant document).
    """
    judged = list(ev.query_ids) + list(ev.excluded or [])
    failed = sum(1 for q in judged if q in run and run.status[q].failed)
    missing = sum(1 for q in judged if q not in run)
    out: dict[str, Any] = {
        "answered": len(judged) - failed - missing,
        "judged": len(judged),
        "failed": failed,
        "missing": missing,
        "scored": len(ev.query_ids),
        "counted": len(ev.query_ids),
        "skipped_no_relevant": len(ev.skipped or []),
        "mode": ev.mode,
    }
    if ev.ignore_identical_ids:
        out["identical_ids_dropped"] = int(ev.n_identical)
        out["identical_ids_relevant"] = int(ev.n_identical_relevant)
    if depth is not None:
        counted = [q for q in ev.query_ids if q in run and not run.status[q].failed]
        lengths = np.diff(run.offsets)[run.rows(counted)] if counted else np.zeros(0, np.int64)
        short = lengths[lengths < depth]
        out["depth"] = int(depth)
        out["short"] = int(short.size)
        if short.size:  # the range the short rankings' lengths span, for the note beside the numbers
            out["short_min"], out["short_max"] = int(short.min()), int(short.max())
    return out
