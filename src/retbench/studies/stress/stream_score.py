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

import numpy as np

from retbench.config.streaming import StreamSettings
from retbench.data import Corpus, Qrels, Run
from retbench.evaluation import evaluate
from retbench.metrics.settings import EvalSettings
from retbench.results.stress_figures import LatencySummary
from retbench.results.stress_stream import Checkpoint, FilterFigures, LiveFigures, LiveQuery, Quality
from retbench.retrievers.base import error_text
from retbench.retrievers.filters import Filter
from retbench.retrievers.stores import VectorStoreRetriever
from retbench.studies.stress.stream_plan import STEPS, Plan, State, bucket_limit, filter_of, recall
from retbench.studies.stress.validate import check_ranking

CLASSES = ("error", "invalid", "deleted_returned", "out_of_filter", "short")
SAME_VECTOR = 1e-3  # cosine within this of 1 counts as "the same vector"
Ranking = list[tuple[str, float]]


@dataclass(frozen=True)
class Sent:
    """A live query as the querier recorded it, before scoring: its number `i`, send time `t` (seconds into
    the stream), query row `q`, filter index `sel`, the writes acknowledged when it was sent (`lo`) and by the
    time it could have returned (`hi`), the store call's seconds `s`, its ranking `r` or error text `err`."""

    i: int
    t: float
    q: int
    sel: int
    lo: int
    hi: int
    s: float
    r: Ranking | None
    err: str | None


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
    failures: list[dict[str, object]] = field(default_factory=list)
    _index: dict[str, int] | None = field(default=None, init=False, repr=False)

    def corpus(self, rows: Sequence[int] | np.ndarray, version: int) -> Corpus:
        texts = [self.plan.update_text[int(i)] if version else self.texts[int(i)] for i in rows]
        return Corpus(
            [str(self.ids[i]) for i in rows], texts, None, [self.plan.metadata(int(i), version) for i in rows]
        )

    def classes(self, ranking: Ranking, sel_i: int, lo: int, hi: int) -> list[tuple[str, str]]:
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


def failure(phase: str, qid: str | None, cls: str, message: str, t: float, **extra: object) -> dict[str, object]:
    """One record of failures.jsonl (its keys in this order; `extra` says where: batch, batches, filter)."""
    return {"phase": phase, "qid": qid, "kind": cls, "message": message, "t_s": round(t, 4), **extra}


def ask(case: Case, q: int, sel_i: int) -> tuple[Ranking | None, float, str | None]:
    """One store call: (ranking or None, seconds, the error text)."""
    t = time.perf_counter()
    try:
        r = case.store.search_vectors(case.qvec[q : q + 1], case.k, [case.filters[sel_i]])[0]
        return r, time.perf_counter() - t, None
    except Exception as exc:  # every store failure is recorded verbatim, never raised
        return None, time.perf_counter() - t, error_text(exc)


# -- checkpoints ---------------------------------------------------------------------------------------
def checkpoint(case: Case, batches: int, now: Callable[[], float]) -> Checkpoint:
    """Every judged query under every filter, writes paused after `batches`: recall, metrics, latency, failures."""
    b = STEPS * batches  # the state: every write of those batches acknowledged
    t_start = now()
    rows: list[FilterFigures] = []
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
            if err is not None or ranking is None:
                counts["error"] += 1
                case.failures.append(failure("checkpoint", qid, "error", str(err), now(), batches=batches, filter=sel))
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
            FilterFigures(
                sel,
                float(np.mean(recalls)) if recalls else None,
                LatencySummary.of_seconds(lat),
                counts,
                matching=int(case.state.mask(b, sel).sum()),
                recall_n=len(recalls),
                quality=quality(case, b, sel, rankings),
            )
        )
    digest = hashlib.sha256("\n".join(" ".join(e) for e in exact_ids).encode()).hexdigest()[:16]
    return Checkpoint(batches, t_start, int(case.state.alive(b).sum()), digest, tuple(rows))


def quality(case: Case, b: int, sel: float | None, rankings: dict[str, Ranking]) -> Quality:
    """The config's metrics against the qrels restricted to visible documents that pass the filter."""
    ok = case.state.mask(b, sel)
    judged: dict[str, dict[str, int]] = {}
    for qid in case.qids:
        rel = {d: g for d, g in case.qrels.get(qid, {}).items() if d in case.index and ok[case.index[d]] and g > 0}
        if rel:
            judged[qid] = rel
    skipped = len(case.qids) - len(judged)
    if not judged:
        return Quality(0, skipped)
    run = Run.from_dict({q: rankings.get(q, []) for q in judged}, name=case.store.name)
    ev = evaluate(run, Qrels(judged), case.metrics, EvalSettings(mode="trec_eval"), system=case.store.name)
    return Quality(len(judged), skipped, {m: float(ev.column(m).mean()) for m in case.metrics})


# -- live query scoring ----------------------------------------------------------------------------------
def score_live(case: Case, recs: Sequence[Sent]) -> list[LiveQuery]:
    """Each live query against the exact answer after the batches acknowledged when it was sent.

    A query that overlapped a write (a batch in flight when it was sent, or acknowledged before it returned)
    is scored against whichever of those states gives it the highest recall; `states` says how many there were.
    """
    out = []
    for rec in recs:
        q, sel_i, lo, hi = rec.q, rec.sel, rec.lo, rec.hi
        qid, sel = case.qids[q], case.sels[sel_i]
        where = {"batches": lo // STEPS, "filter": sel}
        best: float | None
        states: int | None
        if rec.err is not None or rec.r is None:
            case.failures.append(failure("live", qid, "error", str(rec.err), rec.t, **where))
            cls, best, states = ["error"], 0.0, None
        else:
            found = case.classes(rec.r, sel_i, lo, hi)
            cls = [c for c, _ in found]
            for c, why in found:
                case.failures.append(failure("live", qid, c, why, rec.t, **where))
            docs = [str(d) for d, _ in rec.r] if "invalid" not in cls else []
            # a query that overlapped a write may show the state before or after it: the one that suits it best
            recalls: list[float | None] = []
            for b in range(lo, hi + 1):
                scores = case.state.scores(b, case.qvec[q], case.docvec, case.updvec)
                recalls.append(
                    recall(docs, [str(case.ids[i]) for i in case.state.exact(b, scores, sel, case.k, case.ids)], case.k)
                )
            best, states = max((r for r in recalls if r is not None), default=None), hi - lo + 1
        latency = round(rec.s * 1000.0, 3)
        out.append(LiveQuery(round(rec.t, 4), qid, sel, latency, best, tuple(cls), lo // STEPS, lo, states))
    return out


def _failure_counts(rows: Sequence[LiveQuery]) -> dict[str, int]:
    return {c: sum(c in r.classes for r in rows) for c in CLASSES}


def live_summary(rows: Sequence[LiveQuery], sels: Sequence[float | None]) -> LiveFigures:
    """The live queries' figures, over all of them and per filter."""
    per: list[FilterFigures] = []
    for sel in sels:
        rs = [r for r in rows if r.filter == sel]
        rec = [r.recall for r in rs if r.recall is not None]
        lat = LatencySummary.of_seconds([r.latency_ms / 1000.0 for r in rs])
        per.append(FilterFigures(sel, float(np.mean(rec)) if rec else None, lat, _failure_counts(rs), queries=len(rs)))
    lat = LatencySummary.of_seconds([r.latency_ms / 1000.0 for r in rows])
    return LiveFigures(len(rows), _failure_counts(rows), lat, tuple(per))
