"""Stress mode: drive a backend under load and faults, and record every failure as a failure.

`retbench stress CONFIG` indexes a dataset into one system (in batches, recording the first write
that fails: the seed bug in `shared/seeds/003_*` surfaced on the 16th insert, not on a read), then
runs each concurrency level: warm-up, then a request count or a duration, each request with an
optional deadline and retries with backoff. What it measures per level:

- achieved QPS: completed requests over the wall time they took (measured, not 1/latency);
- latency p50/p95/p99/max, for successes and failures separately (a fast error must not flatter
  the success percentiles, nor a slow timeout hide among them);
- the rates of error (exception), timeout, empty result, invalid result (`validate_ranking`) and
  short result (fewer than k from a corpus with more);
- quality metrics on the very responses it got: coverage "scored N of M", a headline mean where
  every failed or unasked query counts 0, a success-only mean labelled as such; nothing imputed.

Every failed attempt (retries included) goes to `failures.jsonl` with the query id, kind, exception
type, the message verbatim, time and attempt number. When failures exceed the allowed rate (default
0), stress prints the first failure verbatim, writes everything measured so far and exits 3.

Timeouts. Async adapters (capability "async", method `async asearch_one(text, k)`) run on asyncio
with a deadline per call; a late call is cancelled. Synchronous adapters run on worker threads, one
per unit of concurrency, calling the backend directly (no hand-off per request, so the harness stays
cheap); a watchdog marks a call that passes its deadline as a timeout and starts a replacement
worker. Python cannot kill a thread, so the hung call's thread is abandoned: it keeps running until
the backend returns, and its late answer is discarded. At most `max_abandoned` such threads may be
alive at once; reaching the cap stops the level (reported as aborted, the unasked requests
counted as not issued) rather than piling up threads.

Resuming. Each finished request is journaled (`journal.jsonl`, see `retbench.results.journal`); a stress
run killed and started again with the same config skips finished levels and the finished requests
of the interrupted one. QPS of a resumed level sums the wall time of each process's part.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import math
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable, Container, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np

from retbench.data import Corpus, Qrels, Queries, QueryStatus, Run
from retbench.errors import EXIT_BACKEND, EXIT_OK, ConfigError
from retbench.results import write_json
from retbench.results.journal import Journal, run_from_records
from retbench.retrievers.base import Retriever

# -- failure taxonomy ------------------------------------------------------------------------------
#: outcomes of one request; only the first three are answers
OUTCOMES = ("ok", "short", "empty", "error", "timeout", "invalid")
FAILURE_OUTCOMES = ("error", "timeout", "invalid")
#: ways a response can be malformed (the `invalid` outcome's detail)
INVALID_KINDS = ("wrong_type", "non_finite_score", "unknown_id", "duplicate_id")
_STATUS = {
    "ok": QueryStatus.OK,
    "short": QueryStatus.OK,
    "empty": QueryStatus.EMPTY,
    "error": QueryStatus.ERROR,
    "timeout": QueryStatus.TIMEOUT,
    "invalid": QueryStatus.INVALID,
}


def check_ranking(
    ranking: Any, corpus_ids: Container[str], k: int, corpus_size: int | None = None
) -> tuple[str | None, str]:
    """(kind, explanation) for a raw response; kind None means a full, well-formed ranking.

    Kinds: the INVALID_KINDS (failures), "empty" and "short" (answers that are counted). Problems
    are reported in rank order, the first one found wins.
    """
    if not isinstance(ranking, (list, tuple)):
        return "wrong_type", f"expected a list of (doc_id, score) pairs, got {type(ranking).__name__}"
    if _well_formed(ranking, corpus_ids):
        return _completeness(ranking, corpus_ids, k, corpus_size)
    seen: set[str] = set()
    for rank, item in enumerate(ranking, 1):
        if not isinstance(item, (tuple, list)) or len(item) != 2:
            return "wrong_type", f"rank {rank}: expected a (doc_id, score) pair, got {item!r:.80}"
        doc, score = item
        if not isinstance(doc, str):
            return "wrong_type", f"rank {rank}: doc id {doc!r:.80} is a {type(doc).__name__}, not a string"
        if isinstance(score, bool) or not isinstance(score, (int, float, np.integer, np.floating)):
            return "wrong_type", f"rank {rank}: score {score!r:.80} is a {type(score).__name__}, not a number"
        if not math.isfinite(score):
            return "non_finite_score", f"rank {rank}: doc {doc!r} has score {score}"
        if doc not in corpus_ids:
            return "unknown_id", f"rank {rank}: doc id {doc!r} is not in the corpus"
        if doc in seen:
            return "duplicate_id", f"rank {rank}: doc id {doc!r} appears twice"
        seen.add(doc)
    return _completeness(ranking, corpus_ids, k, corpus_size)


def _completeness(
    ranking: Sequence[Any], corpus_ids: Container[str], k: int, corpus_size: int | None
) -> tuple[str | None, str]:
    if not ranking:
        return "empty", "no documents returned"
    size = corpus_size if corpus_size is not None else len(corpus_ids)  # type: ignore[arg-type]
    if len(ranking) < min(k, size):
        return "short", f"{len(ranking)} documents returned, fewer than k={k} from a corpus of {size}"
    return None, ""


def _well_formed(ranking: Sequence[Any], corpus_ids: Container[str]) -> bool:
    """The common case checked in C-level passes: (str, float) pairs, finite, known, distinct.

    False means "look closer" (the rank-by-rank loop finds and explains the problem, or accepts
    NumPy numbers), never "invalid".
    """
    if not ranking:
        return True
    if set(map(type, ranking)) != {tuple} or set(map(len, ranking)) != {2}:
        return False
    docs, scores = zip(*ranking, strict=True)
    if set(map(type, docs)) != {str} or set(map(type, scores)) != {float}:
        return False
    try:
        if not math.isfinite(math.fsum(scores)):
            return False
    except OverflowError:
        return False
    ids = set(docs)
    if len(ids) != len(docs):
        return False
    index = corpus_ids.index if isinstance(corpus_ids, Corpus) else corpus_ids
    if isinstance(index, (set, frozenset, dict)):
        return ids <= index.keys() if isinstance(index, dict) else ids <= index
    return all(map(corpus_ids.__contains__, docs))


def validate_ranking(ranking: Any, corpus_ids: Container[str], k: int) -> str | None:
    """The taxonomy label of a raw response, or None when it is a full, well-formed ranking.

    One of INVALID_KINDS (the response is a failure: status `invalid`), or "empty" / "short" (an
    answer, counted in its own rate). `corpus_ids` needs `in` and `len` (a Corpus or a set).
    """
    return check_ranking(ranking, corpus_ids, k)[0]


def is_failure(kind: str | None) -> bool:
    """Whether a `validate_ranking` label (or an outcome) makes the request a failure."""
    return kind in INVALID_KINDS or kind in FAILURE_OUTCOMES


# -- settings ---------------------------------------------------------------------------------------
@dataclass
class LoadSettings:
    """How load is applied; the `stress:` block of a stress config."""

    levels: list[int] = field(default_factory=lambda: [1, 4, 16])
    #: requests per level (default: one per query); ignored when duration_s is set
    requests: int | None = None
    duration_s: float | None = None
    warmup: int = 10
    timeout_s: float | None = 10.0
    retries: int = 0
    backoff_s: float = 0.05
    backoff_factor: float = 2.0
    backoff_max_s: float = 2.0
    retry_on: list[str] = field(default_factory=lambda: ["error", "timeout"])
    allowed_failure_rate: float = 0.0
    stop_on_failure: bool = True
    max_abandoned: int = 32
    #: "auto" uses asyncio for adapters declaring "async", threads otherwise
    mode: str = "auto"
    ingest_batch_size: int | None = None
    flush_interval_s: float = 0.2

    @classmethod
    def from_config(cls, cfg: Mapping[str, Any], where: str = "") -> LoadSettings:
        known = set(cls.__dataclass_fields__)
        for key in cfg:
            if key not in known:
                raise ConfigError(
                    f"unknown stress setting {key!r}; valid: {', '.join(sorted(known))}",
                    path=where or None,
                    field=f"stress.{key}",
                )
        s = cls(**dict(cfg))
        s.check(where)
        return s

    def check(self, where: str = "") -> None:
        def bad(name: str, msg: str) -> ConfigError:
            return ConfigError(msg, path=where or None, field=f"stress.{name}")

        if not self.levels or any(not isinstance(c, int) or c < 1 for c in self.levels):
            raise bad("levels", f"must be a list of positive integers, got {self.levels!r}")
        if self.requests is not None and self.requests < 1:
            raise bad("requests", "must be at least 1")
        if self.duration_s is not None and self.duration_s <= 0:
            raise bad("duration_s", "must be positive")
        if self.timeout_s is not None and self.timeout_s <= 0:
            raise bad("timeout_s", "must be positive (or null for no deadline)")
        if self.retries < 0 or self.warmup < 0:
            raise bad("retries" if self.retries < 0 else "warmup", "must not be negative")
        if not 0.0 <= self.allowed_failure_rate <= 1.0:
            raise bad("allowed_failure_rate", "must be between 0 and 1")
        if self.mode not in ("auto", "sync", "async"):
            raise bad("mode", "must be auto, sync or async")
        unknown = [r for r in self.retry_on if r not in FAILURE_OUTCOMES]
        if unknown:
            raise bad("retry_on", f"unknown outcome {unknown[0]!r}; valid: {', '.join(FAILURE_OUTCOMES)}")
        if self.max_abandoned < 1:
            raise bad("max_abandoned", "must be at least 1")

    def backoff(self, retry: int) -> float:
        """Seconds to wait before retry number `retry` (1-based): exponential, capped."""
        return min(self.backoff_s * self.backoff_factor ** (retry - 1), self.backoff_max_s)


# -- one request's life ---------------------------------------------------------------------------
def _now_iso() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds")


@dataclass
class _Pending:
    """A request in flight, across its attempts."""

    i: int
    qid: str
    text: str
    attempt: int = 1
    t_first: float = 0.0
    failures: list[dict[str, Any]] = field(default_factory=list)
    not_before: float = 0.0


_ABANDON_LOCK = threading.Lock()
_abandoned_alive = 0  # hung threads still running, process-wide (they outlive levels)


def abandoned_threads() -> int:
    """How many abandoned (hung) backend calls are still running in this process."""
    return _abandoned_alive


class _Level:
    """One phase (warm-up or measure) at one concurrency level: a request source and a sink."""

    def __init__(
        self,
        *,
        level: int,
        phase: str,
        indices: Iterator[int] | None,
        deadline: float | None,
        query_ids: Sequence[str],
        queries: Queries,
        k: int,
        corpus_ids: Container[str],
        corpus_size: int,
        settings: LoadSettings,
        seg: str,
        key_prefix: str,
        first_index: int = 0,
    ) -> None:
        self.level, self.phase, self.seg, self.key_prefix = level, phase, seg, key_prefix
        self.qids = list(query_ids)
        self.queries = queries
        self.k = k
        self.corpus_ids, self.corpus_size = corpus_ids, corpus_size
        self.s = settings
        self._indices = indices
        self._deadline = deadline
        self._next = first_index  # duration mode: indices continue after the journaled ones
        self._take_lock = threading.Lock()
        self.stopped: str | None = None
        self.out: deque[dict[str, Any]] = deque()
        self.t0 = 0.0
        self.issued = 0

    # the request source -----------------------------------------------------------------------
    def take(self) -> _Pending | None:
        with self._take_lock:
            if self.stopped:
                return None
            if self._indices is not None:
                i = next(self._indices, None)
                if i is None:
                    return None
            else:
                if self._deadline is None or time.perf_counter() >= self._deadline:
                    return None
                i = self._next
                self._next += 1
            self.issued += 1
        qid = self.qids[i % len(self.qids)]
        return _Pending(i, qid, self.queries[qid])

    def stop(self, reason: str) -> None:
        with self._take_lock:
            self.stopped = self.stopped or reason

    # judging one attempt ------------------------------------------------------------------------
    def judge(
        self, p: _Pending, raw: Any, exc: BaseException | None, t0: float, t1: float, *, may_retry: bool = True
    ) -> float | None:
        """Record the attempt's outcome; returns the backoff delay when the request is to be retried."""
        if exc is not None:
            kind, detail, exc_type, message = "error", None, type(exc).__name__, str(exc)
        elif raw is _TIMED_OUT:
            kind, detail, exc_type = "timeout", None, "TimeoutError"
            message = f"no answer within {self.s.timeout_s} s"
        else:
            detail, message = check_ranking(raw, self.corpus_ids, self.k, self.corpus_size)
            kind = "invalid" if detail in INVALID_KINDS else (detail or "ok")
            exc_type = None
        if kind in FAILURE_OUTCOMES:
            p.failures.append(self._failure(p, kind, detail, exc_type, message, t1 - t0))
            if may_retry and kind in self.s.retry_on and p.attempt <= self.s.retries and not self.stopped:
                p.attempt += 1
                return self.s.backoff(p.attempt - 1)
        self.finish(p, kind, detail, raw if kind in ("ok", "short") else None, t1)
        return None

    def _failure(
        self, p: _Pending, kind: str, detail: str | None, exc_type: str | None, message: str, latency: float
    ) -> dict[str, Any]:
        return {
            "qid": p.qid,
            "kind": kind,
            "detail": detail,
            "exc_type": exc_type,
            "message": message,
            "time": _now_iso(),
            "attempt": p.attempt,
            "latency": latency,
            "level": self.level,
            "phase": self.phase,
            "request": p.i,
        }

    def finish(self, p: _Pending, kind: str, detail: str | None, ranking: Any, t_end: float) -> None:
        rec: dict[str, Any] = {
            "qid": p.qid,
            "status": _STATUS[kind].value,
            "outcome": kind,
            "latency": t_end - p.t_first,
            "attempts": p.attempt,
            "level": self.level,
            "phase": self.phase,
            "i": p.i,
            "seg": self.seg,
            "t": t_end - self.t0,
        }
        if detail:
            rec["detail"] = detail
        if p.failures:
            rec["failures"] = p.failures
        if kind in FAILURE_OUTCOMES:
            last = p.failures[-1]
            rec["error"] = f"{last['exc_type']}: {last['message']}" if last["exc_type"] else last["message"]
        if ranking is not None and self.phase == "measure":
            rec["docs"] = [d for d, _ in ranking]
            rec["scores"] = [float(s) for _, s in ranking]
        self.out.append(rec)

    def key(self, rec: Mapping[str, Any]) -> str:
        return f"{self.key_prefix}{rec['i']}"


class _TimedOut:
    """Marker for an attempt that passed its deadline."""


_TIMED_OUT = _TimedOut()


def _drain(level: _Level, journal: Journal) -> None:
    while level.out:
        rec = level.out.popleft()
        journal.append(level.key(rec), **rec)


def _flush(level: _Level, journal: Journal) -> None:
    _drain(level, journal)
    journal.flush()


class _Slot:
    """What one sync worker is doing now, shared with the watchdog."""

    __slots__ = ("abandoned", "busy", "lock", "p", "start")

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.busy = False
        self.abandoned = False
        self.start = 0.0
        self.p: _Pending | None = None


def _run_sync(level: _Level, search: Callable[[str, int], Any], concurrency: int, journal: Journal) -> None:
    """Worker threads call the backend directly; this thread is the watchdog and journal flusher."""
    s = level.s
    slots: list[_Slot] = []
    alive = [0]
    lock = threading.Lock()
    wake = threading.Event()

    def worker(slot: _Slot, p: _Pending | None) -> None:
        global _abandoned_alive
        try:
            while True:
                if p is None:
                    p = level.take()
                    if p is None:
                        return
                if p.not_before:
                    time.sleep(max(0.0, p.not_before - time.perf_counter()))
                slot.p = p
                slot.start = t0 = time.perf_counter()
                if not p.t_first:
                    p.t_first = t0
                slot.busy = True
                exc: BaseException | None = None
                raw: Any = None
                try:
                    raw = search(p.text, level.k)
                except BaseException as e:  # a SystemExit raised by a backend is its failure too
                    exc = e
                t1 = time.perf_counter()
                with slot.lock:
                    if slot.abandoned:
                        with _ABANDON_LOCK:
                            _abandoned_alive -= 1
                        return  # the watchdog already recorded this call as a timeout
                    slot.busy = False
                if s.timeout_s is not None and t1 - t0 > s.timeout_s:
                    raw, exc = _TIMED_OUT, None  # late, though back before the watchdog looked: a timeout all the same
                delay = level.judge(p, raw, exc, t0, t1)
                if delay is None:
                    p = None
                else:
                    p.not_before = time.perf_counter() + delay
        finally:
            if not slot.abandoned:
                with lock:
                    alive[0] -= 1
                wake.set()

    def spawn(p: _Pending | None) -> None:
        slot = _Slot()
        slots.append(slot)
        with lock:
            alive[0] += 1
        threading.Thread(target=worker, args=(slot, p), daemon=True, name=f"retbench-stress-{level.level}").start()

    def watchdog(now: float) -> float:
        """Time out late calls; returns when to look again."""
        global _abandoned_alive
        timeout = s.timeout_s
        nxt = now + s.flush_interval_s
        if timeout is None:
            return nxt
        for slot in list(slots):
            if slot.abandoned or not slot.busy:
                continue
            due = slot.start + timeout
            if now < due:
                nxt = min(nxt, due)
                continue
            with slot.lock:
                if not slot.busy or slot.abandoned:
                    continue
                slot.abandoned = True
            with _ABANDON_LOCK:
                _abandoned_alive += 1
                over = _abandoned_alive >= s.max_abandoned
            slots.remove(slot)
            with lock:
                alive[0] -= 1
            p = slot.p
            assert p is not None
            if over:  # no more threads may be started: the timeout is final and the level stops
                level.stop(f"{_abandoned_alive} hung backend calls abandoned (cap max_abandoned={s.max_abandoned})")
            delay = level.judge(p, _TIMED_OUT, None, slot.start, now, may_retry=not over)
            if over:
                continue
            if delay is not None:
                p.not_before = now + delay
            spawn(p if delay is not None else None)
        return nxt

    level.t0 = time.perf_counter()
    for _ in range(concurrency):
        spawn(None)
    try:
        while True:
            with lock:
                if alive[0] <= 0:
                    break
            now = time.perf_counter()
            nxt = watchdog(now)
            _flush(level, journal)
            wake.wait(max(0.0, nxt - time.perf_counter()))
            wake.clear()
    except BaseException:
        level.stop("interrupted")
        raise
    finally:
        _flush(level, journal)


def _run_async(level: _Level, retriever: Retriever, concurrency: int, journal: Journal) -> None:
    """Coroutine workers on one event loop; a late call is cancelled at its deadline."""
    s = level.s
    asearch = retriever.asearch_one  # type: ignore[attr-defined]

    async def call(text: str) -> Any:
        if s.timeout_s is None:
            return await asearch(text, level.k)
        if not hasattr(asyncio, "timeout"):  # Python 3.10
            try:
                return await asyncio.wait_for(asearch(text, level.k), s.timeout_s)
            except asyncio.TimeoutError:
                return _TIMED_OUT
        deadline = asyncio.timeout(s.timeout_s)  # no task per call, unlike wait_for
        try:
            async with deadline:
                return await asearch(text, level.k)
        except TimeoutError:
            if deadline.expired():
                return _TIMED_OUT
            raise  # the backend's own TimeoutError is an error, not our deadline

    async def worker() -> None:
        p = level.take()
        while p is not None:
            t0 = time.perf_counter()
            if not p.t_first:
                p.t_first = t0
            exc: BaseException | None = None
            raw: Any = None
            try:
                raw = await call(p.text)
            except Exception as e:
                exc = e
            delay = level.judge(p, raw, exc, t0, time.perf_counter())
            if delay is None:
                p = level.take()
            else:
                await asyncio.sleep(delay)

    async def flusher(done: asyncio.Event) -> None:
        loop = asyncio.get_running_loop()
        while not done.is_set():
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(done.wait(), s.flush_interval_s)
            await loop.run_in_executor(None, _flush, level, journal)  # serialization off the loop

    async def main() -> None:
        done = asyncio.Event()
        fl = asyncio.ensure_future(flusher(done))
        level.t0 = time.perf_counter()
        try:
            await asyncio.gather(*(worker() for _ in range(concurrency)))
        finally:
            done.set()
            await fl

    try:
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            asyncio.run(main())
        else:  # called from inside an event loop (a notebook): run ours on a thread of its own
            t = threading.Thread(target=asyncio.run, args=(main(),), name="retbench-stress-loop")
            t.start()
            t.join()
    finally:
        _flush(level, journal)


def uses_async(retriever: Retriever, settings: LoadSettings) -> bool:
    """Whether stress drives this retriever on asyncio (it declares "async" and has `asearch_one`)."""
    if settings.mode == "sync":
        return False
    has = "async" in retriever.capabilities and hasattr(retriever, "asearch_one")
    if settings.mode == "async" and not has:
        raise ConfigError(
            f"adapter {retriever.adapter!r} has no async protocol (capability 'async' with asearch_one)",
            field="stress.mode",
        )
    return has


def drive(
    retriever: Retriever,
    queries: Queries,
    query_ids: Sequence[str],
    k: int,
    corpus_ids: Container[str],
    corpus_size: int,
    settings: LoadSettings,
    concurrency: int,
    journal: Journal,
    *,
    phase: str = "measure",
    count: int | None = None,
    seg: str | None = None,
) -> dict[str, Any]:
    """Run one phase of one level, journaling each finished request; returns what happened.

    In count mode the requests are indices 0..count-1 (query `i % len(query_ids)`), those already in
    the journal skipped; in duration mode new indices follow the journaled ones until the deadline.
    """
    seg = seg or uuid.uuid4().hex[:8]
    prefix = f"{concurrency}:" if phase == "measure" else f"{concurrency}:w{seg}:"
    done = journal.done()
    deadline = None
    indices: Iterator[int] | None = None
    if phase == "measure" and settings.duration_s is not None and count is None:
        prior = [r for r in journal.records(lambda r: r.get("level") == concurrency and r.get("phase") == "measure")]
        spent = _segments_elapsed(prior)
        deadline = time.perf_counter() + max(0.0, settings.duration_s - spent)
        start = 1 + max((r["i"] for r in prior), default=-1)
    else:
        n = count if count is not None else (settings.requests or len(query_ids))
        indices = iter([i for i in range(n) if f"{prefix}{i}" not in done])
        start = 0
    level = _Level(
        level=concurrency,
        phase=phase,
        indices=indices,
        deadline=deadline,
        query_ids=query_ids,
        queries=queries,
        k=k,
        corpus_ids=corpus_ids,
        corpus_size=corpus_size,
        settings=settings,
        seg=seg,
        key_prefix=prefix,
        first_index=start,
    )
    if uses_async(retriever, settings):
        _run_async(level, retriever, concurrency, journal)
    else:
        _run_sync(level, retriever.search_one, concurrency, journal)
    return {"issued": level.issued, "stopped": level.stopped, "seg": seg}


def _segments_elapsed(records: Sequence[Mapping[str, Any]]) -> float:
    """Wall time a level ran, summed over the processes (segments) that worked on it."""
    per: dict[str, float] = {}
    for r in records:
        per[r["seg"]] = max(per.get(r["seg"], 0.0), float(r["t"]))
    return sum(per.values())


# -- figures ---------------------------------------------------------------------------------------
def latency_summary(values_s: Sequence[float]) -> dict[str, float | int | None]:
    """p50/p95/p99/max/mean in milliseconds (NumPy's linear-interpolation percentiles); n counted."""
    if not values_s:
        return {"n": 0, "p50": None, "p95": None, "p99": None, "max": None, "mean": None}
    a = np.asarray(values_s, dtype=np.float64) * 1000.0
    p50, p95, p99 = np.percentile(a, [50, 95, 99])
    return {
        "n": len(a),
        "p50": float(p50),
        "p95": float(p95),
        "p99": float(p99),
        "max": float(a.max()),
        "mean": float(a.mean()),
    }


def summarize_level(
    records: Sequence[Mapping[str, Any]], concurrency: int, planned: int | None = None
) -> dict[str, Any]:
    """Per-level figures from the journaled request records of its measured phase."""
    n = len(records)
    counts = {o: 0 for o in OUTCOMES}
    ok_lat: list[float] = []
    fail_lat: list[float] = []
    invalid: dict[str, int] = {}
    errors: dict[str, int] = {}
    retries = recovered = 0
    for r in records:
        o = r["outcome"]
        counts[o] += 1
        (fail_lat if o in FAILURE_OUTCOMES else ok_lat).append(float(r["latency"]))
        if o == "invalid":
            invalid[r.get("detail")] = invalid.get(r.get("detail"), 0) + 1
        retries += int(r["attempts"]) - 1
        recovered += int(o not in FAILURE_OUTCOMES and r["attempts"] > 1)
        for f in r.get("failures", ()):
            if f["kind"] == "error":
                errors[f["exc_type"]] = errors.get(f["exc_type"], 0) + 1
    elapsed = _segments_elapsed(records)
    answered = counts["ok"] + counts["short"] + counts["empty"]
    failed = n - answered
    return {
        "concurrency": concurrency,
        "planned": planned,
        "completed": n,
        "answered": answered,
        "failed": failed,
        "elapsed_s": elapsed,
        "qps": n / elapsed if elapsed > 0 else None,
        "latency_ms": {"success": latency_summary(ok_lat), "failure": latency_summary(fail_lat)},
        "counts": counts,
        "rates": {o: (counts[o] / n if n else 0.0) for o in ("error", "timeout", "empty", "invalid", "short")},
        "failure_rate": failed / n if n else 0.0,
        "invalid_kinds": invalid,
        "error_types": errors,
        "retries": retries,
        "recovered_by_retry": recovered,
        "segments": len({r["seg"] for r in records}),
    }


def level_run(records: Sequence[Mapping[str, Any]], name: str = "") -> Run:
    """The level's responses as a Run: each query's first request (lowest index) answers for it."""
    return run_from_records(sorted(records, key=lambda r: r["i"]), name=name)


# -- ingestion ------------------------------------------------------------------------------------
def ingest(retriever: Retriever, corpus: Corpus, batch_size: int | None) -> dict[str, Any]:
    """Index `corpus` in batches (first via `index`, the rest via `add` when the adapter can).

    Returns per-batch timing and, if a write failed, that first failure (message verbatim); writing
    stops there, since every later figure would describe a broken index.
    """
    n = len(corpus)
    can_add = "add" in retriever.capabilities
    size = batch_size if (batch_size and can_add) else n
    batches: list[dict[str, Any]] = []
    first_failure = None
    t_start = time.perf_counter()
    for b, start in enumerate(range(0, n, size)):
        part = corpus if size >= n else corpus.subset(corpus.ids[start : start + size])
        t0 = time.perf_counter()
        try:
            (retriever.index if b == 0 else retriever.add)(part)
        except Exception as exc:
            first_failure = {
                "qid": None,
                "kind": "error",
                "detail": "ingest",
                "exc_type": type(exc).__name__,
                "message": str(exc),
                "time": _now_iso(),
                "attempt": 1,
                "latency": time.perf_counter() - t0,
                "phase": "ingest",
                "batch": b,
                "docs": [start, start + len(part)],
            }
            break
        batches.append({"batch": b, "docs": len(part), "seconds": time.perf_counter() - t0})
    total = time.perf_counter() - t_start
    written = sum(x["docs"] for x in batches)
    return {
        "documents": n,
        "written": written,
        "batch_size": size,
        "incremental": can_add and size < n,
        "batches": len(batches),
        "seconds": total,
        "docs_per_s": written / total if total > 0 and written else None,
        "batch_seconds": latency_summary([x["seconds"] for x in batches]),
        "first_failure": first_failure,
        "note": "" if can_add or not batch_size else f"adapter {retriever.adapter!r} cannot add; indexed in one call",
    }


# -- config ----------------------------------------------------------------------------------------
STRESS_KEYS = ("stress",)


@dataclass
class StressConfig:
    """One system on one dataset, written as a `retbench run` experiment plus a `stress:` block.

    The system may carry `faults:` (see `retrievers.faults.FaultSpec`). `depth` is the k of every
    request (and of the short-result rule).
    """

    experiment: Any  # retbench.studies.benchmark.ExperimentConfig
    load: LoadSettings
    faults: dict[str, Any]
    raw: dict[str, Any]

    @property
    def dataset(self) -> Any:
        return self.experiment.datasets[0]

    @property
    def system(self) -> Any:
        return self.experiment.systems[0]

    @property
    def k(self) -> int:
        return int(self.experiment.depth)

    @property
    def metrics(self) -> list[str]:
        return list(self.experiment.metrics)

    @property
    def output(self) -> Path:
        return Path(self.experiment.output)

    @property
    def source(self) -> str:
        return str(self.experiment.source)

    def fingerprint(self) -> str:
        """What must match for a journal to be resumed (the output folder may move)."""
        body = {k: v for k, v in self.raw.items() if k != "output"}
        return hashlib.sha256(json.dumps(body, sort_keys=True, default=str).encode()).hexdigest()[:16]


def parse_config(raw: Any, source: str = "<config>", output: str | Path | None = None) -> StressConfig:
    """Validate a stress config: the experiment part by `experiment.parse_config`, then the rest."""
    from retbench.studies.benchmark import parse_config as parse_experiment

    if not isinstance(raw, Mapping):
        raise ConfigError("a stress config must be a mapping", path=source, field="<top>")
    rest = {k: v for k, v in raw.items() if k not in STRESS_KEYS}
    faults: dict[str, Any] = {}
    systems = rest.get("systems")
    if isinstance(systems, list):
        rest["systems"] = []
        for i, sys_raw in enumerate(systems):
            if isinstance(sys_raw, Mapping) and "faults" in sys_raw:
                if not isinstance(sys_raw["faults"], Mapping):
                    raise ConfigError("faults must be a mapping", path=source, field=f"systems[{i}].faults")
                faults = dict(sys_raw["faults"])
                sys_raw = {k: v for k, v in sys_raw.items() if k != "faults"}
            rest["systems"].append(sys_raw)
    exp = parse_experiment(rest, source, output)
    for what in ("datasets", "systems"):
        n = len(getattr(exp, what))
        if n != 1:
            raise ConfigError(f"stress takes exactly one {what[:-1]}, got {n}", path=source, field=what)
    if faults:
        from retbench.retrievers.faults import FaultSpec

        FaultSpec.from_config(faults, source)
    block = raw.get("stress") or {}
    if not isinstance(block, Mapping):
        raise ConfigError("must be a mapping", path=source, field="stress")
    return StressConfig(exp, LoadSettings.from_config(block, source), faults, dict(raw))


def load_config(path: str | Path, output: str | Path | None = None) -> StressConfig:
    """Read and validate a stress YAML file."""
    from retbench.io.files import read_yaml

    return parse_config(read_yaml(path), str(path), output)


# -- quality on the stressed responses -------------------------------------------------------------
def quality(
    run: Run,
    qrels: Qrels,
    query_ids: Sequence[str],
    metrics: Sequence[str],
    evaluation: Mapping[str, Any] | None = None,
) -> tuple[dict[str, Any], Any]:
    """Metric means over the stressed query set: failed or unasked queries count 0, nothing imputed.

    "scored N of M": N queries answered (ok or empty) of the M judged ones. The success-only mean
    is over those N and is only ever shown labelled as such. Returns (figures, the Evaluation).
    """
    from retbench.evaluation import evaluate

    ev_cfg = evaluation or {}
    judged = [q for q in query_ids if q in qrels]
    ev = evaluate(
        run,
        qrels.subset(judged),
        list(metrics),
        relevance_level=int(ev_cfg.get("relevance_level", 1)),
        no_relevant=str(ev_cfg.get("no_relevant", "skip")),
        default_k=int(ev_cfg.get("default_k", 5)),
        system=run.name,
    )
    ok = np.array([s in ("ok", "empty") for s in ev.status], dtype=bool)
    out: dict[str, Any] = {
        "scored": int(ok.sum()),
        "of": len(ev.query_ids),
        "skipped_no_relevant": len(ev.skipped),
        "statuses": ev.status_counts(),
        "metrics": {},
    }
    for m in metrics:
        col = ev.column(m)
        out["metrics"][m] = {
            "mean": float(col.mean()) if len(col) else None,
            "mean_success_only": float(col[ok].mean()) if ok.any() else None,
        }
    return out, ev


# -- the whole thing -------------------------------------------------------------------------------
OUTPUT_FILES = (
    "journal.jsonl",
    "summary.json",
    "failures.jsonl",
    "run.trec",
    "status.jsonl",
    "per_query.tsv",
    "report.md",
    "report.html",
)


@dataclass
class StressResult:
    exit_code: int
    summary: dict[str, Any]
    out_dir: Path
    first_failure: dict[str, Any] | None = None


def _write_failures(path: Path, failures: Sequence[Mapping[str, Any]]) -> None:
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w", encoding="utf-8") as fh:
        fh.writelines(json.dumps(f, default=str) + "\n" for f in failures)
    tmp.replace(path)


def build_retriever(config: StressConfig) -> Retriever:
    """The configured system, wrapped in a FaultyRetriever when the config asks for faults."""
    from retbench.retrievers.base import create
    from retbench.retrievers.faults import with_faults

    sys_spec = config.system
    r = create(sys_spec.adapter, sys_spec.params, name=sys_spec.name, where=config.source)
    return with_faults(r, config.faults, config.source)


class _Stress:
    """State of one `run_stress` call: the journal, the summary being built, and the files written."""

    def __init__(self, config: StressConfig, out: Path, retriever: Retriever, dataset: Any, qids: list[str]) -> None:
        self.config, self.out, self.retriever, self.ds, self.qids = config, out, retriever, dataset, qids
        self.s = config.load
        self.qrels = dataset.split(config.dataset.split)
        self.journal = Journal(
            out / "journal.jsonl",
            config.fingerprint(),
            batch_size=1 << 30,
            meta={"system": retriever.name, "dataset": dataset.name},
        )
        self.ingest_failures: list[dict[str, Any]] = []
        self.summary: dict[str, Any] = {
            "system": retriever.name,
            "adapter": config.system.adapter,
            "faults": config.faults or None,
            "dataset": dataset.name,
            "split": config.dataset.split,
            "queries": len(qids),
            "corpus": len(dataset.corpus),
            "k": config.k,
            "metrics": config.metrics,
            "settings": asdict(self.s),
            "mode": "async" if uses_async(retriever, self.s) else "threads",
            "resumed": len(self.journal) > 0,
            "levels": [],
            "complete": False,
        }

    def save(self, stop_reason: str | None) -> None:
        """Write summary.json, failures.jsonl and report.md from everything journaled so far."""
        recs = self.journal.records()
        fails = self.ingest_failures + [f for r in recs for f in r.get("failures", ())]
        _write_failures(self.out / "failures.jsonl", fails)
        requests = [r for r in recs if "outcome" in r]
        failed = sum(r["outcome"] in FAILURE_OUTCOMES for r in requests) + len(self.ingest_failures)
        sm = self.summary
        sm["requests"] = len(requests)
        sm["attempts"] = sum(int(r["attempts"]) for r in requests)
        sm["failed"] = failed
        sm["failure_rate"] = failed / len(requests) if requests else (1.0 if failed else 0.0)
        sm["failures_recorded"] = len(fails)
        sm["first_failure"] = fails[0] if fails else None
        sm["stopped"] = stop_reason
        sm["journal"] = {
            "records": len(self.journal),
            "torn_lines_dropped": self.journal.torn,
            "duplicates": self.journal.duplicates,
        }
        over = failed / max(len(requests), 1) > self.s.allowed_failure_rate or bool(self.ingest_failures)
        sm["exit_code"] = EXIT_BACKEND if over else EXIT_OK
        write_json(self.out / "summary.json", sm)
        (self.out / "report.md").write_text(render_markdown(sm), encoding="utf-8")
        (self.out / "report.html").write_text(render_html(sm), encoding="utf-8")

    def _measure(self, c: int) -> list[dict[str, Any]]:
        return self.journal.records(lambda r: r.get("level") == c and r.get("phase") == "measure")

    def level(self, c: int) -> tuple[dict[str, Any], Run, Any]:
        """Run (or, when journaled as done, replay) one concurrency level; returns its figures."""
        s, j = self.s, self.journal
        ids, n = self.ds.corpus, len(self.ds.corpus)
        if f"{c}:done" not in j:
            seg = uuid.uuid4().hex[:8]
            info: dict[str, Any] = {"stopped": None}
            if s.warmup:
                info = drive(
                    self.retriever,
                    self.ds.queries,
                    self.qids,
                    self.config.k,
                    ids,
                    n,
                    s,
                    c,
                    j,
                    phase="warmup",
                    count=s.warmup,
                    seg=seg,
                )
            if not info["stopped"]:
                info = drive(self.retriever, self.ds.queries, self.qids, self.config.k, ids, n, s, c, j, seg=seg)
            j.append(f"{c}:done", type="level_done", level=c, stopped=info["stopped"])
            j.flush()
        done = j.records(lambda r: r.get("key") == f"{c}:done")[0]
        recs = self._measure(c)
        fig = summarize_level(recs, c, None if s.duration_s is not None else (s.requests or len(self.qids)))
        warm = j.records(lambda r: r.get("level") == c and r.get("phase") == "warmup")
        fig["warmup"] = {"requests": len(warm), "failed": sum(r["outcome"] in FAILURE_OUTCOMES for r in warm)}
        fig["stopped"] = done.get("stopped")
        run = level_run(recs, name=self.retriever.name)
        fig["quality"], ev = quality(run, self.qrels, self.qids, self.config.metrics, self.config.experiment.evaluation)
        return fig, run, ev


def run_stress(
    config: StressConfig,
    *,
    out_dir: str | Path | None = None,
    fresh: bool = False,
    retriever: Retriever | None = None,
    dataset: Any = None,
    echo: Callable[[str], None] = print,
) -> StressResult:
    """Ingest, drive every level, and write summary.json, failures.jsonl, the last level's run, report.md.

    `retriever` and `dataset` may be given directly (tests, notebooks: every judged query of the
    dataset is used); otherwise both come from the config. Resumes from `journal.jsonl` in the
    output folder unless `fresh`. Never raises for a backend failure: the exit code says it.
    """
    from retbench.results import SystemDir, save_run

    out = Path(out_dir or config.output)
    if fresh:
        for name in OUTPUT_FILES:
            (out / name).unlink(missing_ok=True)
    out.mkdir(parents=True, exist_ok=True)
    if dataset is None:
        from retbench.studies.benchmark import prepare_dataset

        dataset, queries = prepare_dataset(config.dataset)
        qids = list(queries)
    else:
        qrels = dataset.split(config.dataset.split)
        qids = [q for q in dataset.queries if q in qrels]
    if not qids:
        raise ConfigError(
            f"no judged queries in split {config.dataset.split!r}", path=config.source, field="datasets[0].split"
        )
    own = retriever is None
    retriever = retriever or build_retriever(config)
    st = _Stress(config, out, retriever, dataset, qids)
    s = config.load
    inner_retries = retriever.describe().get("retries")
    st.summary["warnings"] = []
    if isinstance(inner_retries, int) and inner_retries > 0:
        st.summary["warnings"].append(
            f"adapter {retriever.adapter!r} retries internally ({inner_retries}x): those retries are invisible to stress; "
            "set its retries to 0 and use stress.retries so every attempt is recorded"
        )
    for w in st.summary["warnings"]:
        echo(f"warning: {w}")
    try:
        echo(f"ingesting {len(dataset.corpus)} documents into {retriever.name}")
        st.summary["ingest"] = ing = ingest(retriever, dataset.corpus, s.ingest_batch_size)
        if ing["first_failure"]:
            st.ingest_failures.append(ing["first_failure"])
            st.save("ingestion failed: no query was sent to a backend whose writes fail")
            return _finish(st.summary, out, echo)
        stop: str | None = None
        last: tuple[Run, Any] | None = None
        for c in s.levels:
            echo(
                f"concurrency {c}: warm-up {s.warmup}, then "
                + (f"{s.duration_s} s" if s.duration_s else f"{s.requests or len(qids)} requests")
            )
            fig, run, ev = st.level(c)
            st.summary["levels"].append(fig)
            last = (run, ev)
            echo(_level_line(fig))
            stop = fig["stopped"]
            st.save(stop)
            rate = st.summary["failure_rate"]
            if not stop and s.stop_on_failure and rate > s.allowed_failure_rate and c != s.levels[-1]:
                stop = f"failure rate {rate:.2%} exceeds the allowed {s.allowed_failure_rate:.2%}; later levels not run"
            if stop:
                break
        if last is not None:
            save_run(last[0], SystemDir(out))
            last[1].to_tsv(out / "per_query.tsv")
        st.summary["complete"] = stop is None
        st.save(stop)
        return _finish(st.summary, out, echo)
    finally:
        st.journal.close()
        if own:
            retriever.close()


def _finish(summary: dict[str, Any], out: Path, echo: Callable[[str], None]) -> StressResult:
    echo(f"results in {out}")
    first = summary.get("first_failure")
    return StressResult(int(summary["exit_code"]), summary, out, dict(first) if first else None)


def _level_line(fig: Mapping[str, Any]) -> str:
    lat = fig["latency_ms"]["success"]
    qps = f"{fig['qps']:.1f}" if fig["qps"] else "-"
    p50 = f"{lat['p50']:.2f}" if lat["p50"] is not None else "-"
    p99 = f"{lat['p99']:.2f}" if lat["p99"] is not None else "-"
    q = fig.get("quality") or {}
    first = next(iter(q.get("metrics", {}).items()), None)
    score = (
        f", {first[0]} {_num(first[1]['mean'])} (scored {q['scored']} of {q['of']}; failed count 0)" if first else ""
    )
    return f"concurrency {fig['concurrency']}: {fig['completed']} requests, {qps} QPS, p50 {p50} ms, p99 {p99} ms, {fig['failed']} failed{score}"


def headline(summary: Mapping[str, Any]) -> str:
    """One line for the end of a stress run: how many requests failed, or where ingestion stopped."""
    ing = summary.get("ingest") or {}
    if ing.get("first_failure"):
        return f"ingestion failed after {ing.get('written')} of {ing.get('documents')} documents; no query was sent"
    rate = summary.get("failure_rate", 0.0)
    allowed = summary.get("settings", {}).get("allowed_failure_rate", 0.0)
    return f"{summary.get('failed', 0)} of {summary.get('requests', 0)} requests failed ({rate:.2%}; allowed {allowed:.2%})"


def describe_failure(f: Mapping[str, Any]) -> str:
    """Where a failure happened, then its label and the backend's message exactly as it came."""
    if f.get("phase") == "ingest":
        where = f"ingest batch {f.get('batch')}, documents {f['docs'][0]}-{f['docs'][1]}"
    else:
        warm = ", warm-up" if f.get("phase") == "warmup" else ""
        where = f"query {f.get('qid')}, concurrency {f.get('level')}, attempt {f.get('attempt')}{warm}"
    label = f.get("exc_type") or f.get("kind")
    if f.get("kind") == "invalid":
        label = f"invalid result ({f.get('detail')})"
    elif f.get("kind") == "timeout":
        label = "timeout"
    return f"({where}) {label}: {f.get('message')}"


# -- report ----------------------------------------------------------------------------------------
def _ms(v: float | None) -> str:
    return "–" if v is None else f"{v:.2f}"


def _pct(v: float) -> str:
    return f"{100 * v:.1f}%"


def render_markdown(summary: Mapping[str, Any]) -> str:
    """The stress section of a report: latency and QPS by level, failure breakdown, quality with coverage."""
    lines = [f"## Stress: {summary.get('system')} on {summary.get('dataset')} ({summary.get('split')})", ""]
    ing = summary.get("ingest") or {}
    if ing:
        rate = f"{ing['docs_per_s']:.0f} docs/s" if ing.get("docs_per_s") else "–"
        lines.append(
            f"Ingestion: {ing.get('written')} of {ing.get('documents')} documents written in {ing.get('batches')} batch(es), {rate}."
        )
        if ing.get("first_failure"):
            f = ing["first_failure"]
            lines += [
                "",
                f"**Ingestion failed** at batch {f['batch']} (documents {f['docs'][0]}–{f['docs'][1]}): `{f['exc_type']}: {f['message']}`",
            ]
        lines.append("")
    levels = summary.get("levels") or []
    if levels:
        lines += [
            "| concurrency | requests | QPS | success p50 / p95 / p99 / max (ms) | failure p50 / p95 / max (ms) | error | timeout | invalid | empty | short |",
            "|---:|---:|---:|---|---|---:|---:|---:|---:|---:|",
        ]
        for f in levels:
            ok, bad, r = f["latency_ms"]["success"], f["latency_ms"]["failure"], f["rates"]
            qps = f"{f['qps']:.1f}" if f.get("qps") else "–"
            lines.append(
                f"| {f['concurrency']} | {f['completed']} | {qps} | {_ms(ok['p50'])} / {_ms(ok['p95'])} / {_ms(ok['p99'])} / {_ms(ok['max'])} "
                f"| {_ms(bad['p50'])} / {_ms(bad['p95'])} / {_ms(bad['max'])} | {_pct(r['error'])} | {_pct(r['timeout'])} "
                f"| {_pct(r['invalid'])} | {_pct(r['empty'])} | {_pct(r['short'])} |"
            )
        lines.append("")
        lines.append("Quality on the stressed responses (failed and unasked queries count 0; nothing imputed):")
        lines.append("")
        metrics = list(summary.get("metrics") or [])
        lines += [
            "| concurrency | scored | "
            + " | ".join(metrics)
            + " | "
            + " | ".join(f"{m} (success-only)" for m in metrics)
            + " |"
        ]
        lines += ["|---:|---|" + "---:|" * (2 * len(metrics))]
        for f in levels:
            q = f.get("quality") or {}
            ms = q.get("metrics", {})
            heads = " | ".join(_num(ms.get(m, {}).get("mean")) for m in metrics)
            only = " | ".join(_num(ms.get(m, {}).get("mean_success_only")) for m in metrics)
            lines.append(f"| {f['concurrency']} | scored {q.get('scored')} of {q.get('of')} | {heads} | {only} |")
        lines.append("")
        kinds: dict[str, int] = {}
        for f in levels:
            for o in FAILURE_OUTCOMES:
                kinds[o] = kinds.get(o, 0) + f["counts"][o]
            for d, n in f["invalid_kinds"].items():
                kinds[f"invalid: {d}"] = kinds.get(f"invalid: {d}", 0) + n
            for t, n in f["error_types"].items():
                kinds[f"error attempts: {t}"] = kinds.get(f"error attempts: {t}", 0) + n
        retries = sum(f["retries"] for f in levels)
        recovered = sum(f["recovered_by_retry"] for f in levels)
        lines.append(
            f"Failures: {summary.get('failed', 0)} of {summary.get('requests', 0)} requests ({_pct(summary.get('failure_rate', 0.0))}); "
            f"{retries} retries, {recovered} requests recovered by a retry (every attempt is in failures.jsonl)."
        )
        if any(kinds.values()):
            lines += ["", "| failure | count |", "|---|---:|"]
            lines += [f"| {k} | {n} |" for k, n in kinds.items() if n]
    lines += [f"\nWarning: {w}" for w in summary.get("warnings") or ()]
    first = summary.get("first_failure")
    if first:
        lines += ["", f"First failure {describe_failure(first)}"]
    if summary.get("stopped"):
        lines += ["", f"Stopped: {summary['stopped']}."]
    return "\n".join(lines) + "\n"


def _num(v: float | None) -> str:
    return "–" if v is None else f"{v:.4f}"


def _svg_lines(
    xs: Sequence[str], series: Mapping[str, Sequence[float | None]], title: str, w: int = 420, h: int = 220
) -> str:
    """A small dependency-free line chart: one polyline per series over evenly spaced levels."""
    import html

    pad_l, pad_r, pad_t, pad_b = 56, 12, 24, 36
    vals = [v for s in series.values() for v in s if v is not None]
    top = max(vals) * 1.1 if vals and max(vals) > 0 else 1.0
    n = max(len(xs), 1)

    def x(i: int) -> float:
        return pad_l + (w - pad_l - pad_r) * (i / (n - 1) if n > 1 else 0.5)

    def y(v: float) -> float:
        return pad_t + (h - pad_t - pad_b) * (1 - v / top)

    colors = ("#1f77b4", "#ff7f0e", "#d62728", "#2ca02c")
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" role="img" aria-label="{html.escape(title)}">',
        f'<text x="{w / 2}" y="15" text-anchor="middle" font-size="12">{html.escape(title)}</text>',
        f'<line x1="{pad_l}" y1="{h - pad_b}" x2="{w - pad_r}" y2="{h - pad_b}" stroke="#999"/>',
        f'<line x1="{pad_l}" y1="{pad_t}" x2="{pad_l}" y2="{h - pad_b}" stroke="#999"/>',
    ]
    for frac in (0.0, 0.5, 1.0):
        v = top * frac
        out.append(f'<text x="{pad_l - 4}" y="{y(v) + 4:.1f}" text-anchor="end" font-size="10">{v:.3g}</text>')
    for i, label in enumerate(xs):
        out.append(
            f'<text x="{x(i):.1f}" y="{h - pad_b + 14}" text-anchor="middle" font-size="10">{html.escape(label)}</text>'
        )
    out.append(f'<text x="{w / 2}" y="{h - 4}" text-anchor="middle" font-size="10">concurrency</text>')
    for j, (name, s) in enumerate(series.items()):
        pts = [(x(i), y(v)) for i, v in enumerate(s) if v is not None]
        color = colors[j % len(colors)]
        if pts:
            out.append(
                f'<polyline fill="none" stroke="{color}" stroke-width="2" points="{" ".join(f"{a:.1f},{b:.1f}" for a, b in pts)}"/>'
            )
            out += [f'<circle cx="{a:.1f}" cy="{b:.1f}" r="3" fill="{color}"/>' for a, b in pts]
        out.append(
            f'<text x="{pad_l + 8 + 70 * j}" y="{pad_t + 10}" font-size="10" fill="{color}">{html.escape(name)}</text>'
        )
    out.append("</svg>")
    return "".join(out)


def render_html(summary: Mapping[str, Any]) -> str:
    """The stress section as standalone HTML: QPS and latency charts by level, then the same tables as Markdown."""
    import html

    levels = summary.get("levels") or []
    xs = [str(f["concurrency"]) for f in levels]
    charts = ""
    if levels:
        qps = _svg_lines(xs, {"QPS": [f.get("qps") for f in levels]}, "achieved QPS (requests per second)")
        pcts = {p: [f["latency_ms"]["success"][p] for f in levels] for p in ("p50", "p95", "p99")}
        charts = f'<div style="display:flex;gap:16px;flex-wrap:wrap">{qps}{_svg_lines(xs, pcts, "success latency (ms)")}</div>'
    blocks: list[str] = []
    table: list[str] = []

    def close() -> None:
        if table:
            blocks.append("<table>" + "".join(table) + "</table>")
            table.clear()

    for line in render_markdown(summary).splitlines():
        if line.startswith("|---"):
            continue
        if line.startswith("|"):
            tag = "td" if table else "th"
            table.append(
                "<tr>"
                + "".join(f"<{tag}>{html.escape(c.strip())}</{tag}>" for c in line.strip().strip("|").split("|"))
                + "</tr>"
            )
            continue
        close()
        if line.startswith("## "):
            blocks += [f"<h2>{html.escape(line[3:])}</h2>", charts]
        elif line.strip():
            blocks.append(f"<p>{html.escape(line)}</p>")
    close()
    style = "body{font-family:sans-serif;max-width:1100px;margin:2em auto}td,th{border:1px solid #ddd;padding:2px 6px}td{text-align:right}"
    title = html.escape(f"stress: {summary.get('system')} on {summary.get('dataset')}")
    return f"<!doctype html><html><head><meta charset='utf-8'><title>{title}</title><style>{style}</style></head><body>{''.join(blocks)}</body></html>\n"
