"""The streaming case: a vector store searched while a seeded stream of inserts, updates and deletes runs.

Three threads share the store: the writer (this thread) applies the plan's batches at `docs_per_s`, one
`add()` for the inserts and updates, then one `delete()`, and pauses at each checkpoint; the querier sends
live queries at `query_qps` (a seeded sequence of judged queries, each unfiltered or with one of the
filters); the prober times freshness. What each records:

- live queries: send time, latency and the batches acknowledged when the query was sent (`acked`). Each is
  scored after the run against the exact answer over the documents visible after `acked` batches
  (acknowledged writes must be searchable; a batch in flight may or may not be, see the failure classes);
- checkpoints (writes paused, so the visible set is exact and the same on every re-run): every judged
  query unfiltered and under each filter; recall@k against the exact filtered answer, the config's metrics
  against the qrels restricted to the visible documents that pass the filter (queries left with no
  relevant document are counted as skipped), latency percentiles and failures by class;
- freshness: for a seeded sample of inserted, updated and deleted documents, the time from the write's
  acknowledgement until a probe finds it (the document's own vector, top k, unfiltered: an insert is seen
  when its id is returned, an update when its id comes back with its new vector's self-score, cosine
  1 within 1e-3, a delete when its id is no longer returned). A round starts as soon as a write is
  acknowledged, then every `probe_interval_s` while changes are pending; a lag is the send time of the first
  probe round that saw the change, so it is exact to about one round (a probe call plus `probe_interval_s`).
  Past `freshness_timeout_s` the document is counted never seen (never removed). An update whose new
  vector is within 1e-3 of its old one cannot be told apart and is counted as such, not timed.

Failure classes of a response: `error` (the call raised; the message verbatim), `invalid` (an unknown or
repeated id, a non-finite score), `deleted_returned` (a document whose delete was acknowledged before
the query was sent), `out_of_filter` (a document that fails the filter in every version it could have
had), `short` (fewer than min(k, documents that match)). Latency is the store call alone: query vectors
are encoded once beforehand.
"""

from __future__ import annotations

import contextlib
import hashlib
import queue
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from retbench.config import StressModel
from retbench.config.streaming import StreamSettings
from retbench.data import Corpus, Dataset, Qrels, Run
from retbench.errors import ConfigError
from retbench.evaluation import evaluate
from retbench.metrics.settings import EvalSettings
from retbench.retrievers.base import error_text
from retbench.retrievers.filters import Filter, parse_filter
from retbench.retrievers.stores import VectorStoreRetriever
from retbench.studies.stress.figures import latency_summary
from retbench.studies.stress.stream_plan import NEVER, Plan, State, filter_of, make_plan, recall
from retbench.studies.stress.validate import check_ranking

CLASSES = ("error", "invalid", "deleted_returned", "out_of_filter", "short")
SAME_VECTOR = 1e-3  # cosine within this of 1 counts as "the same vector"


@dataclass
class _Clock:
    """What the writer has acknowledged, read by the other threads."""

    t0: float
    acked: int = 0
    acked_t: list[float] = field(default_factory=list)
    writing: bool = False
    done: threading.Event = field(default_factory=threading.Event)

    def now(self) -> float:
        return time.perf_counter() - self.t0


@dataclass
class _Case:
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

    def corpus(self, rows: Sequence[int], version: int) -> Corpus:
        texts = [self.plan.update_text[int(i)] if version else self.texts[int(i)] for i in rows]
        return Corpus(
            [str(self.ids[i]) for i in rows], texts, None, [self.plan.metadata(int(i), version) for i in rows]
        )

    def classes(self, ranking: Any, sel_i: int, lo: int, hi: int) -> tuple[list[str], str]:
        """Failure classes of one response that could have seen any state from lo to hi batches."""
        kind, why = check_ranking(ranking, self.index, self.k, len(self.ids))
        if kind not in (None, "short", "empty"):
            return ["invalid"], why
        why = ""  # shortness is judged below, against the documents that match
        rows = [self.index[d] for d, _ in ranking]
        out: list[str] = []
        dead = [self.ids[r] for r in rows if self.state.deleted_at[r] <= lo]
        if dead:
            out.append("deleted_returned")
            why = f"deleted before the query was sent: {', '.join(map(str, dead[:5]))}"
        sel = self.sels[sel_i]
        if sel is not None:
            ok = self.state.mask(lo, sel) | self.state.mask(hi, sel)
            outside = [self.ids[r] for r in rows if not ok[r]]
            if outside:
                out.append("out_of_filter")
                why = f"outside the filter {filter_of(sel)}: {', '.join(map(str, outside[:5]))}"
        need = min(self.k, int(self.state.mask(lo, sel).sum()), int(self.state.mask(hi, sel).sum()))
        if len(rows) < need:
            out.append("short")
            why = why or f"{len(rows)} documents returned, {need} match the filter"
        return out, why

    @property
    def index(self) -> dict[str, int]:
        if not hasattr(self, "_index"):
            self._index = {str(d): i for i, d in enumerate(self.ids)}
        return self._index


def _failure(phase: str, qid: str | None, cls: str, message: str, t: float, **extra: Any) -> dict[str, Any]:
    return {"phase": phase, "qid": qid, "kind": cls, "message": message, "t_s": round(t, 4), **extra}


def _ask(case: _Case, q: int, sel_i: int) -> tuple[Any, float, str | None]:
    """One store call: (ranking or None, seconds, the error text)."""
    t = time.perf_counter()
    try:
        r = case.store.search_vectors(case.qvec[q : q + 1], case.k, [case.filters[sel_i]])[0]
        return r, time.perf_counter() - t, None
    except Exception as exc:  # every store failure is recorded verbatim, never raised
        return None, time.perf_counter() - t, error_text(exc)


# -- the querier ---------------------------------------------------------------------------------------
def _querier(case: _Case, clock: _Clock, out: list[dict[str, Any]]) -> None:
    """Live queries at query_qps until the writer is done: a seeded (query, filter) sequence."""
    rng = np.random.default_rng([case.settings.seed, 1])
    gap = 1.0 / case.settings.query_qps
    i = 0
    while not clock.done.is_set():
        due = i * gap
        wait = due - clock.now()
        if wait > 0 and clock.done.wait(wait):
            break
        q, sel_i = int(rng.integers(len(case.qids))), int(rng.integers(len(case.sels)))
        lo, t = clock.acked, clock.now()
        ranking, secs, err = _ask(case, q, sel_i)
        hi = min(clock.acked + (1 if clock.writing else 0), len(case.plan.batches))
        out.append({"i": i, "t": t, "q": q, "sel": sel_i, "lo": lo, "hi": hi, "s": secs, "r": ranking, "err": err})
        i += 1


# -- the prober ----------------------------------------------------------------------------------------
@dataclass
class _Probe:
    row: int
    kind: str  # insert | update | delete
    acked_t: float
    seen_t: float | None = None
    rounds: int = 0  # probes that included it


def _seen(case: _Case, p: _Probe, ranking: Sequence[tuple[str, float]]) -> bool:
    doc = str(case.ids[p.row])
    hit = [s for d, s in ranking if d == doc]
    if p.kind == "delete":
        return not hit
    if p.kind == "update":
        return bool(hit) and hit[0] >= 1.0 - SAME_VECTOR
    return bool(hit)


def _prober(case: _Case, clock: _Clock, inbox: queue.Queue[_Probe], done: list[_Probe]) -> None:
    """Probe every pending document each round until each is seen or times out, and the writer is done."""
    pending: list[_Probe] = []
    s = case.settings
    while True:
        with contextlib.suppress(queue.Empty):  # a new change starts a round at once, else every probe_interval_s
            pending.append(inbox.get(timeout=s.probe_interval_s))
        while not inbox.empty():
            pending.append(inbox.get_nowait())
        if not pending and clock.done.is_set() and inbox.empty():
            return
        t = clock.now()
        for p in [p for p in pending if t - p.acked_t > s.freshness_timeout_s]:
            done.append(p)
            pending.remove(p)
        if pending:
            vecs = np.stack([case.updvec[p.row] if p.kind == "update" else case.docvec[p.row] for p in pending])
            try:
                rankings = case.store.search_vectors(vecs, case.k)
            except Exception as exc:
                case.failures.append(_failure("probe", None, "error", error_text(exc), t))
                rankings = None
            if rankings is not None:
                for p, r in zip(list(pending), rankings, strict=True):
                    p.rounds += 1
                    if _seen(case, p, r):
                        p.seen_t = t
                        done.append(p)
                        pending.remove(p)


def _freshness(probes: Sequence[_Probe], indistinct: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for kind in ("insert", "update", "delete"):
        ps = [p for p in probes if p.kind == kind]
        lags = [p.seen_t - p.acked_t for p in ps if p.seen_t is not None]
        lat = latency_summary(lags)
        out[kind] = {
            "sampled": len(ps),
            ("removed" if kind == "delete" else "seen"): len(lags),
            ("never_removed" if kind == "delete" else "never_seen"): len(ps) - len(lags),
            "lag_ms": lat,
            "first_probe": sum(p.seen_t is not None and p.rounds == 1 for p in ps),
            "lags_ms": sorted(round(x * 1000.0, 3) for x in lags),
        }
    out["update"]["indistinguishable"] = indistinct
    return out


# -- checkpoints ---------------------------------------------------------------------------------------
def _checkpoint(case: _Case, b: int, clock: _Clock) -> dict[str, Any]:
    """Every judged query under every filter, writes paused after b batches: recall, metrics, latency, failures."""
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
            ranking, secs, err = _ask(case, q, sel_i)
            lat.append(secs)
            if err is not None:
                counts["error"] += 1
                case.failures.append(_failure("checkpoint", qid, "error", err, clock.now(), batches=b, filter=sel))
                rankings[qid] = []
                if exact:
                    recalls.append(0.0)
                continue
            cls, why = case.classes(ranking, sel_i, b, b)
            now = clock.now()
            for c in cls:
                counts[c] += 1
                case.failures.append(_failure("checkpoint", qid, c, why, now, batches=b, filter=sel))
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
                "quality": _quality(case, b, sel, rankings),
            }
        )
    digest = hashlib.sha256("\n".join(" ".join(e) for e in exact_ids).encode()).hexdigest()[:16]
    return {
        "batches": b,
        "t_s": clock.now(),
        "visible": int(case.state.alive(b).sum()),
        "exact_sha256": digest,
        "filters": rows,
    }


def _quality(case: _Case, b: int, sel: float | None, rankings: dict[str, list[tuple[str, float]]]) -> dict[str, Any]:
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
def _score_live(case: _Case, recs: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each live query against the exact answer after the batches acknowledged when it was sent."""
    out = []
    for rec in recs:
        q, sel_i, lo, hi = rec["q"], rec["sel"], rec["lo"], rec["hi"]
        qid, sel = case.qids[q], case.sels[sel_i]
        row: dict[str, Any] = {"t_s": round(rec["t"], 4), "qid": qid, "filter": sel, "acked": lo}
        row["latency_ms"] = round(rec["s"] * 1000.0, 3)
        if rec["err"] is not None:
            row["classes"] = ["error"]
            case.failures.append(_failure("live", qid, "error", rec["err"], rec["t"], batches=lo, filter=sel))
            row["recall"] = 0.0
        else:
            cls, why = case.classes(rec["r"], sel_i, lo, hi)
            for c in cls:
                case.failures.append(_failure("live", qid, c, why, rec["t"], batches=lo, filter=sel))
            row["classes"] = cls
            scores = case.state.scores(lo, case.qvec[q], case.docvec, case.updvec)
            exact = [str(case.ids[i]) for i in case.state.exact(lo, scores, sel, case.k, case.ids)]
            docs = [str(d) for d, _ in rec["r"]] if "invalid" not in cls else []
            row["recall"] = recall(docs, exact, case.k)
        out.append(row)
    return out


def _live_summary(rows: Sequence[dict[str, Any]], sels: Sequence[float | None]) -> dict[str, Any]:
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


# -- the case ----------------------------------------------------------------------------------------------
def prepare(config: StressModel, store: object, dataset: Dataset, qids: list[str]) -> _Case:
    """The plan, the vectors (encoded once, through the store's encoder cache) and the filters."""
    s = config.stress.streaming
    assert s is not None
    if not isinstance(store, VectorStoreRetriever) or "filters" not in store.capabilities:
        raise ConfigError(
            "the streaming case needs a vector store that can add, delete and filter "
            "(pgvector, qdrant, milvus, lancedb, chroma, typesense)",
            path=config.source,
            field="systems[0].adapter",
        )
    corpus = dataset.corpus
    texts = corpus.joined_texts()
    plan = make_plan(texts, s)
    enc = store.encoder
    docvec = np.asarray(enc.encode_documents(texts), dtype=np.float32)
    updvec = np.zeros_like(docvec)
    rows = sorted(plan.update_text)
    if rows:
        updvec[rows] = enc.encode_documents([plan.update_text[i] for i in rows])
    qvec = np.asarray(enc.encode_queries([dataset.queries[q] for q in qids]), dtype=np.float32)
    sels: list[float | None] = [None, *s.selectivities]
    filters = [None if sel is None else parse_filter(filter_of(sel)) for sel in sels]
    return _Case(
        store,
        s,
        config.k,
        np.array([str(d) for d in corpus.ids], dtype=object),
        texts,
        plan,
        State(plan, len(corpus)),
        docvec,
        updvec,
        qids,
        qvec,
        sels,
        filters,
        dataset.split(config.dataset.split),
        list(config.metric_names),
    )


def _sample(case: _Case) -> tuple[dict[int, str], int]:
    """The seeded freshness sample: row -> kind; and how many sampled updates cannot be told apart."""
    rng = np.random.default_rng([case.settings.seed, 2])
    n = case.settings.freshness_docs
    kinds: dict[int, str] = {}
    inserts = np.concatenate([b.inserts for b in case.plan.batches])
    updates = np.concatenate([b.updates for b in case.plan.batches])
    deletes = np.concatenate([b.deletes for b in case.plan.batches])
    indistinct = 0
    for kind, rows in (("insert", inserts), ("update", updates), ("delete", deletes)):
        for r in rng.permutation(rows)[:n]:
            if kind == "update" and float(case.docvec[r] @ case.updvec[r]) >= 1.0 - SAME_VECTOR:
                indistinct += 1
                continue
            kinds[int(r)] = kind
    return kinds, indistinct


def run_case(case: _Case, echo: Callable[[str], None]) -> dict[str, Any]:
    """Index the initial documents, stream the batches with live queries and probes, and return the figures."""
    s, plan = case.settings, case.plan
    t = time.perf_counter()
    case.store.index(case.corpus(plan.initial, 0))
    index_s = time.perf_counter() - t
    echo(f"indexed {len(plan.initial)} initial documents in {index_s:.1f} s; streaming {len(plan.batches)} batches")
    sample, indistinct = _sample(case)
    clock = _Clock(time.perf_counter())
    live: list[dict[str, Any]] = []
    probes: list[_Probe] = []
    inbox: queue.Queue[_Probe] = queue.Queue()
    checkpoints = [_checkpoint(case, 0, clock)] if 0 in plan.checkpoints else []
    paused = 0.0
    threads = [
        threading.Thread(target=_querier, args=(case, clock, live), daemon=True),
        threading.Thread(target=_prober, args=(case, clock, inbox, probes), daemon=True),
    ]
    clock.t0 = time.perf_counter()
    for th in threads:
        th.start()
    writes: list[dict[str, Any]] = []
    sent = 0
    try:
        for b, batch in enumerate(plan.batches, start=1):
            if s.docs_per_s:
                wait = paused + sent / s.docs_per_s - clock.now()
                if wait > 0:
                    time.sleep(wait)
            t_start = clock.now()
            clock.writing = True
            err = None
            try:
                if len(batch.inserts):
                    case.store.add(case.corpus(batch.inserts, 0))
                if len(batch.updates):
                    case.store.add(case.corpus(batch.updates, 1))
                if len(batch.deletes):
                    case.store.delete([str(case.ids[i]) for i in batch.deletes])
            except Exception as exc:
                err = error_text(exc)
            t_ack = clock.now()
            clock.acked, clock.writing = b, False
            clock.acked_t.append(t_ack)
            sent += len(batch.inserts)
            writes.append({"batch": b, "t_s": round(t_start, 4), "ack_s": round(t_ack, 4), "docs": batch.size()})
            if err is not None:
                case.failures.append(_failure("write", None, "error", err, t_ack, batch=b))
                echo(f"write batch {b} failed: {err}; the stream stops here")
                break
            for r in (*batch.inserts, *batch.updates, *batch.deletes):
                if int(r) in sample:
                    inbox.put(_Probe(int(r), sample[int(r)], t_ack))
            if b in plan.checkpoints:
                t_pause = clock.now()
                checkpoints.append(_checkpoint(case, b, clock))
                paused += clock.now() - t_pause
                echo(_cp_line(checkpoints[-1]))
    finally:
        clock.done.set()
        for th in threads:
            th.join(timeout=s.freshness_timeout_s + 60.0)
    stream_s = writes[-1]["ack_s"] if writes else 0.0
    live_rows = _score_live(case, live)
    return {
        "settings": s.model_dump(),
        "plan": plan.counts(),
        "corpus": len(case.ids),
        "queries": len(case.qids),
        "k": case.k,
        "index_initial_s": index_s,
        "stream_s": stream_s,
        "write_pause_s": paused,
        "docs_per_s": (sent / (stream_s - paused)) if stream_s > paused else None,
        "writes": writes,
        "checkpoints": checkpoints,
        "exact_sha256": hashlib.sha256("".join(c["exact_sha256"] for c in checkpoints).encode()).hexdigest()[:16],
        "live": _live_summary(live_rows, case.sels),
        "live_rows": live_rows,
        "freshness": _freshness(probes, indistinct),
        "failure_counts": {c: sum(f["kind"] == c for f in case.failures) for c in CLASSES},
    }


def _cp_line(cp: dict[str, Any]) -> str:
    parts = [
        f"{'all' if r['filter'] is None else format(r['filter'], '.1%')}: recall {r['recall']:.3f}"
        if r["recall"] is not None
        else f"{r['filter']}: -"
        for r in cp["filters"]
    ]
    return f"checkpoint after {cp['batches']} batches ({cp['visible']} visible): " + ", ".join(parts)


__all__ = ["CLASSES", "NEVER", "prepare", "run_case"]
