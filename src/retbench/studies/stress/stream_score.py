"""Scoring the streaming case's responses: exact answers, failure classes, checkpoints, live-query figures.

Failure classes of a response: `error` (the call raised; the message verbatim), `invalid` (an unknown or
repeated id, a non-finite score), `deleted_returned` (a document whose delete was acknowledged before
the query was sent), `out_of_filter` (a document that fails the filter in every version it could have
had), `short` (fewer than min(k, documents that match)). Latency is the store call alone: query vectors
are encoded once beforehand.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from retbench.config.streaming import StreamSettings
from retbench.data import Corpus, Qrels, Run
from retbench.evaluation import evaluate
from retbench.metrics.settings import EvalSettings
from retbench.retrievers.base import error_text
from retbench.retrievers.filters import Filter
from retbench.retrievers.stores import VectorStoreRetriever
from retbench.studies.stress.figures import latency_summary
from retbench.studies.stress.stream_plan import STEPS, Plan, State, bucket_limit, filter_of, recall
from retbench.studies.stress.validate import check_ranking

CLASSES = ("error", "invalid", "deleted_returned", "out_of_filter", "short")
SAME_VECTOR = 1e-3  # cosine within this of 1 counts as "the same vector"


@dataclass
class Case:
    """Everything one streaming run needs: the store, the plan, the vectors, the filters."""

    store: VectorStoreRetriever
    settings: StreamSettings
    k: int
    ids: np.ndarray
    texts: list[str]
    plan: Plan
    state: State
    docvec: np.ndarray
    updvec: np.ndarray
    qids: list[str]
    qvec: np.ndarray
    sels: list[float | None]
    filters: list[Filter | None]
    qrels: Qrels
    metrics: list[str]
    failures: list[dict[str, Any]] = field(default_factory=list)
    _index: dict[str, int] | None = field(default=None, init=False, repr=False)

    def corpus(self, rows: Sequence[int] | np.ndarray, version: int) -> Corpus:
        texts = [self.plan.update_text[int(i)] if version else self.texts[int(i)] for i in rows]
        return Corpus(
            [str(self.ids[i]) for i in rows], texts, None, [self.plan.metadata(int(i), version) for i in rows]
        )

    def classes(self, ranking: Any, sel_i: int, lo: int, hi: int) -> list[tuple[str, str]]:
        """(class, explanation) for each failure of one response that could have seen any state from lo to hi writes."""
        kind, why = check_ranking(ranking, self.index, self.k, len(self.ids))
        if kind not in (None, "short", "empty"):
            return [("invalid", why)]
        rows = np.array([self.index[d] for d, _ in ranking], dtype=np.int64)
        out: list[tuple[str, str]] = []
        dead = [str(self.ids[r]) for r in rows if self.state.deleted_at[r] <= lo]
        if dead:
            out.append(("deleted_returned", f"deleted before the query was sent: {', '.join(dead[:5])}"))
        sel = self.sels[sel_i]
        if sel is not None and len(rows):
            limit = bucket_limit(sel)  # the filter on the document's version before or after the writes in flight
            passes = (self.plan.bucket[rows, self.state.version(lo)[rows]] < limit) | (
                self.plan.bucket[rows, self.state.version(hi)[rows]] < limit
            )
            outside = [str(self.ids[r]) for r in rows[~passes]]
            if outside:
                out.append(("out_of_filter", f"outside the filter {filter_of(sel)}: {', '.join(outside[:5])}"))
        need = min(self.k, int(self.state.mask(lo, sel).sum()), int(self.state.mask(hi, sel).sum()))
        if len(rows) < need:
            out.append(("short", f"{len(rows)} documents returned, {need} match the filter"))
        return out

    @property
    def index(self) -> dict[str, int]:
        """Document id -> row (built on first use)."""
        if self._index is None:
            self._index = {str(d): i for i, d in enumerate(self.ids)}
        return self._index


def failure(phase: str, qid: str | None, cls: str, message: str, t: float, **extra: Any) -> dict[str, Any]:
    return {"phase": phase, "qid": qid, "kind": cls, "message": message, "t_s": round(t, 4), **extra}


def ask(case: Case, q: int, sel_i: int) -> tuple[Any, float, str | None]:
    """One store call: (ranking or None, seconds, the error text)."""
    t = time.perf_counter()
    try:
        r = case.store.search_vectors(case.qvec[q : q + 1], case.k, [case.filters[sel_i]])[0]
        return r, time.perf_counter() - t, None
    except Exception as exc:  # every store failure is recorded verbatim, never raised
        return None, time.perf_counter() - t, error_text(exc)


# -- checkpoints ---------------------------------------------------------------------------------------
def checkpoint(case: Case, batches: int, now: Callable[[], float]) -> dict[str, Any]:
    """Every judged query under every filter, writes paused after `batches`: recall, metrics, latency, failures."""
    b = STEPS * batches  # the state: every write of those batches acknowledged
    t_start = now()
    rows: list[dict[str, Any]] = []
    exact_ids: list[list[str]] = []
    for sel_i, sel in enumerate(case.sels):
        lat: list[float] = []
        recalls: list[float] = []
        counts = dict.fromkeys(CLASSES, 0)
        rankings: dict[str, list[tuple[str, float]]] = {}
        for q, qid in enumerate(case.qids):
            scores = case.state.scores(b, case.qvec[q], case.docvec, case.updvec)
            exact = [str(case.ids[i]) for i in case.state.exact(b, scores, sel, case.k, case.ids)]
            exact_ids.append(exact)
            ranking, secs, err = ask(case, q, sel_i)
            lat.append(secs)
            if err is not None:
                counts["error"] += 1
                case.failures.append(failure("checkpoint", qid, "error", err, now(), batches=batches, filter=sel))
                rankings[qid] = []
                if exact:
                    recalls.append(0.0)
                continue
            found = case.classes(ranking, sel_i, b, b)
            cls = [c for c, _ in found]
            t_fail = now()
            for c, why in found:
                counts[c] += 1
                case.failures.append(failure("checkpoint", qid, c, why, t_fail, batches=batches, filter=sel))
            docs = [str(d) for d, _ in ranking] if "invalid" not in cls else []
            rankings[qid] = [(d, float(s)) for d, s in ranking] if docs else []
            r = recall(docs, exact, case.k)
            if r is not None:
                recalls.append(r)
        rows.append(
            {
                "filter": sel,
                "matching": int(case.state.mask(b, sel).sum()),
                "recall": float(np.mean(recalls)) if recalls else None,
                "recall_n": len(recalls),
                "failures": counts,
                "latency_ms": latency_summary(lat),
                "quality": quality(case, b, sel, rankings),
            }
        )
    digest = hashlib.sha256("\n".join(" ".join(e) for e in exact_ids).encode()).hexdigest()[:16]
    return {
        "batches": batches,
        "t_s": t_start,
        "visible": int(case.state.alive(b).sum()),
        "exact_sha256": digest,
        "filters": rows,
    }


def quality(case: Case, b: int, sel: float | None, rankings: dict[str, list[tuple[str, float]]]) -> dict[str, Any]:
    """The config's metrics against the qrels restricted to visible documents that pass the filter."""
    ok = case.state.mask(b, sel)
    judged: dict[str, dict[str, int]] = {}
    for qid in case.qids:
        rel = {d: g for d, g in case.qrels.get(qid, {}).items() if d in case.index and ok[case.index[d]] and g > 0}
        if rel:
            judged[qid] = rel
    out: dict[str, Any] = {"judged": len(judged), "skipped_no_relevant": len(case.qids) - len(judged), "metrics": {}}
    if not judged:
        return out
    run = Run.from_dict({q: rankings.get(q, []) for q in judged}, name=case.store.name)
    ev = evaluate(run, Qrels(judged), case.metrics, EvalSettings(mode="trec_eval"), system=case.store.name)
    out["metrics"] = {m: float(ev.column(m).mean()) for m in case.metrics}
    return out


# -- live query scoring ----------------------------------------------------------------------------------
def score_live(case: Case, recs: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each live query against the exact answer after the batches acknowledged when it was sent.

    A query that overlapped a write (a batch in flight when it was sent, or acknowledged before it returned)
    is scored against whichever of those states gives it the highest recall; `states` says how many there were.
    """
    out = []
    for rec in recs:
        q, sel_i, lo, hi = rec["q"], rec["sel"], rec["lo"], rec["hi"]
        qid, sel = case.qids[q], case.sels[sel_i]
        row: dict[str, Any] = {"t_s": round(rec["t"], 4), "qid": qid, "filter": sel, "acked": lo // STEPS, "writes": lo}
        row["latency_ms"] = round(rec["s"] * 1000.0, 3)
        if rec["err"] is not None:
            row["classes"] = ["error"]
            case.failures.append(failure("live", qid, "error", rec["err"], rec["t"], batches=lo // STEPS, filter=sel))
            row["recall"] = 0.0
        else:
            found = case.classes(rec["r"], sel_i, lo, hi)
            cls = [c for c, _ in found]
            for c, why in found:
                case.failures.append(failure("live", qid, c, why, rec["t"], batches=lo // STEPS, filter=sel))
            row["classes"] = cls
            docs = [str(d) for d, _ in rec["r"]] if "invalid" not in cls else []
            # a query that overlapped a write may show the state before or after it: the one that suits it best
            recalls: list[float | None] = []
            for b in range(lo, hi + 1):
                scores = case.state.scores(b, case.qvec[q], case.docvec, case.updvec)
                recalls.append(
                    recall(docs, [str(case.ids[i]) for i in case.state.exact(b, scores, sel, case.k, case.ids)], case.k)
                )
            row["recall"] = max((r for r in recalls if r is not None), default=None)
            row["states"] = hi - lo + 1
        out.append(row)
    return out


def live_summary(rows: Sequence[dict[str, Any]], sels: Sequence[float | None]) -> dict[str, Any]:
    per: list[dict[str, Any]] = []
    for sel in sels:
        rs = [r for r in rows if r["filter"] == sel]
        rec = [r["recall"] for r in rs if r["recall"] is not None]
        per.append(
            {
                "filter": sel,
                "queries": len(rs),
                "recall": float(np.mean(rec)) if rec else None,
                "latency_ms": latency_summary([r["latency_ms"] / 1000.0 for r in rs]),
                "failures": {c: sum(c in r["classes"] for r in rs) for c in CLASSES},
            }
        )
    return {
        "queries": len(rows),
        "failures": {c: sum(c in r["classes"] for r in rows) for c in CLASSES},
        "latency_ms": latency_summary([r["latency_ms"] / 1000.0 for r in rows]),
        "by_filter": per,
    }
