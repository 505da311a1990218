"""The streaming case: a vector store searched while a seeded stream of inserts, updates and deletes runs.

Three threads share the store: the writer (this thread) applies the plan's batches at `docs_per_s`, one
`add()` for the inserts and updates, then one `delete()`, and pauses at each checkpoint; the querier sends
live queries at `query_qps` (a seeded sequence of judged queries, each unfiltered or with one of the
filters); the prober times freshness. What each records:

- live queries: send time, latency and the writes acknowledged when the query was sent (three per batch:
  its inserts, updates and deletes). Each is scored after the run against the exact answer over the
  documents visible after those writes
  (acknowledged writes must be searchable; a query that overlapped a write is scored against the state
  before or after it, whichever suits it best, and the failure classes allow either);
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

Scoring (exact answers, failure classes, checkpoints) lives in `stream_score`.
"""

from __future__ import annotations

import contextlib
import hashlib
import queue
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from retbench.config import StressModel
from retbench.data import Dataset
from retbench.errors import ConfigError
from retbench.results.stress_figures import LatencySummary
from retbench.results.stress_stream import FRESHNESS_KINDS, Checkpoint, Freshness, LiveQuery, StreamingFigures, Write
from retbench.retrievers.base import error_text
from retbench.retrievers.filters import parse_filter
from retbench.retrievers.stores import VectorStoreRetriever
from retbench.studies.stress.stream_plan import STEPS, Batch, State, filter_of, make_plan
from retbench.studies.stress.stream_score import (
    CLASSES,
    SAME_VECTOR,
    Case,
    Sent,
    ask,
    checkpoint,
    failure,
    live_summary,
    score_live,
)


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


# -- the querier ---------------------------------------------------------------------------------------
def _querier(case: Case, clock: _Clock, out: list[Sent]) -> None:
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
        ranking, secs, err = ask(case, q, sel_i)
        hi = min(clock.acked + (1 if clock.writing else 0), STEPS * len(case.plan.batches))
        out.append(Sent(i, t, q, sel_i, lo, hi, secs, ranking, err))
        i += 1


# -- the prober ----------------------------------------------------------------------------------------
@dataclass
class _Probe:
    row: int
    kind: str  # insert | update | delete
    acked_t: float
    seen_t: float | None = None
    rounds: int = 0  # probes that included it


def _seen(case: Case, p: _Probe, ranking: Sequence[tuple[str, float]]) -> bool:
    doc = str(case.ids[p.row])
    hit = [s for d, s in ranking if d == doc]
    if p.kind == "delete":
        return not hit
    if p.kind == "update":
        return bool(hit) and hit[0] >= 1.0 - SAME_VECTOR
    return bool(hit)


def _prober(case: Case, clock: _Clock, inbox: queue.Queue[_Probe], done: list[_Probe]) -> None:
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
                case.failures.append(failure("probe", None, "error", error_text(exc), t))
                rankings = None
            if rankings is not None:
                for p, r in zip(list(pending), rankings, strict=True):
                    p.rounds += 1
                    if _seen(case, p, r):
                        p.seen_t = t
                        done.append(p)
                        pending.remove(p)


def _freshness(probes: Sequence[_Probe], indistinct: int) -> dict[str, Freshness]:
    out: dict[str, Freshness] = {}
    for kind in FRESHNESS_KINDS:
        ps = [p for p in probes if p.kind == kind]
        lags = [p.seen_t - p.acked_t for p in ps if p.seen_t is not None]
        out[kind] = Freshness(
            sampled=len(ps),
            seen=len(lags),
            never=len(ps) - len(lags),
            lag=LatencySummary.of_seconds(lags),
            first_probe=sum(p.seen_t is not None and p.rounds == 1 for p in ps),
            lags_ms=tuple(sorted(round(x * 1000.0, 3) for x in lags)),
            removal=kind == "delete",
            indistinguishable=indistinct if kind == "update" else None,
        )
    return out


# -- the case ----------------------------------------------------------------------------------------------
def prepare(config: StressModel, store: object, dataset: Dataset, qids: list[str]) -> Case:
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
    return Case(
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


def _sample(case: Case) -> tuple[dict[int, str], int]:
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


def _apply(case: Case, batch: Batch, kind: str) -> None:
    """One write of a batch: its inserts or its updates (one `add()`), or its deletes (one `delete()`)."""
    if kind == "delete":
        if len(batch.deletes):
            case.store.delete([str(case.ids[i]) for i in batch.deletes])
        return
    rows = batch.inserts if kind == "insert" else batch.updates
    if len(rows):
        case.store.add(case.corpus(rows, 0 if kind == "insert" else 1))


def _write_batch(
    case: Case, batch: Batch, b: int, clock: _Clock, sample: dict[int, str], inbox: queue.Queue[_Probe]
) -> str | None:
    """Batch `b`'s three writes in order (inserts, updates, deletes), each sampled change handed to the prober
    timed from its own write's acknowledgement; the error text of the write that failed, if one did."""
    for j, kind in enumerate(("insert", "update", "delete"), start=1):
        clock.writing = True
        err = None
        try:
            _apply(case, batch, kind)
        except Exception as exc:
            err = error_text(exc)
        acked = clock.now()
        clock.acked, clock.writing = STEPS * (b - 1) + j, False
        if err is not None:
            return err
        for r in getattr(batch, f"{kind}s"):
            if sample.get(int(r)) == kind:
                inbox.put(_Probe(int(r), kind, acked))
    return None


def run_case(case: Case, echo: Callable[[str], None]) -> tuple[StreamingFigures, list[LiveQuery]]:
    """Index the initial documents, stream the batches with live queries and probes; the figures and the
    scored live queries."""
    s, plan = case.settings, case.plan
    t = time.perf_counter()
    case.store.index(case.corpus(plan.initial, 0))
    index_s = time.perf_counter() - t
    echo(f"indexed {len(plan.initial)} initial documents in {index_s:.1f} s; streaming {len(plan.batches)} batches")
    sample, indistinct = _sample(case)
    clock = _Clock(time.perf_counter())
    live: list[Sent] = []
    probes: list[_Probe] = []
    inbox: queue.Queue[_Probe] = queue.Queue()
    # checkpoint 0 runs before the stream (and its clock) started
    checkpoints = [replace(checkpoint(case, 0, clock.now), t_s=0.0)] if 0 in plan.checkpoints else []
    paused = 0.0
    threads = [
        threading.Thread(target=_querier, args=(case, clock, live), daemon=True),
        threading.Thread(target=_prober, args=(case, clock, inbox, probes), daemon=True),
    ]
    clock.t0 = time.perf_counter()
    for th in threads:
        th.start()
    writes: list[Write] = []
    sent, paused_by_last_ack = 0, 0.0
    try:
        for b, batch in enumerate(plan.batches, start=1):
            if s.docs_per_s:
                wait = paused + sent / s.docs_per_s - clock.now()
                if wait > 0:
                    time.sleep(wait)
            t_start = clock.now()
            err = _write_batch(case, batch, b, clock, sample, inbox)
            t_ack = clock.now()
            paused_by_last_ack = paused
            clock.acked_t.append(t_ack)
            sent += len(batch.inserts)
            writes.append(Write(b, round(t_start, 4), round(t_ack, 4), batch.size()))
            if err is not None:
                case.failures.append(failure("write", None, "error", err, t_ack, batch=b))
                echo(f"write batch {b} failed: {err}; the stream stops here")
                break
            if b in plan.checkpoints:
                t_pause = clock.now()
                checkpoints.append(checkpoint(case, b, clock.now))
                paused += clock.now() - t_pause
                echo(_cp_line(checkpoints[-1]))
    finally:
        clock.done.set()
        for th in threads:
            th.join(timeout=s.freshness_timeout_s + 60.0)
    stream_s = writes[-1].ack_s if writes else 0.0
    live_rows = score_live(case, live)
    settings: dict[str, object] = s.model_dump()
    figures = StreamingFigures(
        settings=settings,
        plan=plan.counts(),
        checkpoints_after_batch=tuple(plan.checkpoints),
        corpus=len(case.ids),
        queries=len(case.qids),
        k=case.k,
        index_initial_s=index_s,
        stream_s=stream_s,
        write_pause_s=paused,
        # inserts over the writing time: up to the last acknowledgement, checkpoint pauses before it left out
        docs_per_s=(sent / (stream_s - paused_by_last_ack)) if stream_s > paused_by_last_ack else None,
        writes=tuple(writes),
        checkpoints=tuple(checkpoints),
        exact_sha256=hashlib.sha256("".join(c.exact_sha256 for c in checkpoints).encode()).hexdigest()[:16],
        live=live_summary(live_rows, case.sels),
        freshness_by_kind=_freshness(probes, indistinct),
        failure_counts={c: sum(f["kind"] == c for f in case.failures) for c in CLASSES},
    )
    return figures, live_rows


def _cp_line(cp: Checkpoint) -> str:
    parts = [
        f"{'all' if r.filter is None else format(r.filter, '.1%')}: recall {r.recall:.3f}"
        if r.recall is not None
        else f"{r.filter}: -"
        for r in cp.filters
    ]
    return f"checkpoint after {cp.batches} batches ({cp.visible} visible): " + ", ".join(parts)


__all__ = ["CLASSES", "prepare", "run_case"]
