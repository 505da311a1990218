"""The load drivers: worker threads with a watchdog for synchronous adapters, coroutines for async ones.

Python cannot kill a thread, so a hung call's thread is abandoned: it keeps running until the backend
returns, and its late answer is discarded; at most `max_abandoned` such threads may be alive at once.
A level starts min(level, requests still to issue, MAX_CONCURRENCY) workers: more would only wait.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
import uuid
from collections.abc import Callable, Container, Iterator, Sequence

from retbench.config.stress import MAX_CONCURRENCY, LoadSettings
from retbench.data import Queries
from retbench.errors import ConfigError
from retbench.results.journal import Journal
from retbench.retrievers.base import Retriever
from retbench.retrievers.faults import REQUEST_KEY
from retbench.studies.stress.level import TIMED_OUT, Level, Pending, flush, segments_elapsed

_ABANDON_LOCK = threading.Lock()
_abandoned_alive = 0  # hung threads still running, process-wide (they outlive levels)


def abandoned_threads() -> int:
    """How many abandoned (hung) backend calls are still running in this process."""
    return _abandoned_alive


class _Slot:
    """What one sync worker is doing now, shared with the watchdog."""

    __slots__ = ("abandoned", "busy", "lock", "p", "start")

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.busy = False
        self.abandoned = False
        self.start = 0.0
        self.p: Pending | None = None


class _SyncDriver:
    """Worker threads call the backend directly; the calling thread is the watchdog and journal flusher."""

    def __init__(self, level: Level, search: Callable[[str, int], object], journal: Journal) -> None:
        self.level, self.search, self.journal, self.s = level, search, journal, level.s
        self.slots: list[_Slot] = []
        self.alive = 0
        self.lock = threading.Lock()
        self.wake = threading.Event()

    def _call(self, slot: _Slot, p: Pending) -> tuple[object, BaseException | None, float, float] | None:
        """One attempt; None when the watchdog abandoned it meanwhile (it recorded the timeout)."""
        global _abandoned_alive
        if p.not_before:
            time.sleep(max(0.0, p.not_before - time.perf_counter()))
        slot.p = p
        slot.start = t0 = time.perf_counter()
        if not p.t_first:
            p.t_first = t0
        slot.busy = True
        exc: BaseException | None = None
        raw: object = None  # whatever the backend returned: check_ranking says what it is
        REQUEST_KEY.set(self.level.request_key(p))
        try:
            raw = self.search(p.text, self.level.k)
        except BaseException as e:  # a SystemExit raised by a backend is its failure too
            exc = e
        t1 = time.perf_counter()
        with slot.lock:
            if slot.abandoned:
                with _ABANDON_LOCK:
                    _abandoned_alive -= 1
                return None
            slot.busy = False
        if self.s.timeout_s is not None and t1 - t0 > self.s.timeout_s:
            raw, exc = TIMED_OUT, None  # late, though back before the watchdog looked: a timeout all the same
        return raw, exc, t0, t1

    def worker(self, slot: _Slot, p: Pending | None) -> None:
        try:
            while True:
                if p is None:
                    p = self.level.take()
                    if p is None:
                        return
                attempt = self._call(slot, p)
                if attempt is None:
                    return
                delay = self.level.judge(p, *attempt)
                if delay is None:
                    p = None
                else:
                    p.not_before = time.perf_counter() + delay
        finally:
            if not slot.abandoned:
                with self.lock:
                    self.alive -= 1
                self.wake.set()

    def spawn(self, p: Pending | None) -> None:
        slot = _Slot()
        self.slots.append(slot)
        with self.lock:
            self.alive += 1
        name = f"retbench-stress-{self.level.level}"
        threading.Thread(target=self.worker, args=(slot, p), daemon=True, name=name).start()

    def _abandon(self, slot: _Slot, now: float) -> None:
        """Record a late call as a timeout and replace its thread (unless the cap on hung threads is reached)."""
        global _abandoned_alive
        s = self.s
        with _ABANDON_LOCK:
            _abandoned_alive += 1
            over = _abandoned_alive >= s.max_abandoned
        self.slots.remove(slot)
        with self.lock:
            self.alive -= 1
        p = slot.p
        assert p is not None
        if over:  # no more threads may be started: the timeout is final and the level stops
            self.level.stop(f"{_abandoned_alive} hung backend calls abandoned (cap max_abandoned={s.max_abandoned})")
        delay = self.level.judge(p, TIMED_OUT, None, slot.start, now, may_retry=not over)
        if over:
            return
        if delay is not None:
            p.not_before = now + delay
        self.spawn(p if delay is not None else None)

    def watchdog(self, now: float) -> float:
        """Time out late calls; returns when to look again."""
        timeout = self.s.timeout_s
        nxt = now + self.s.flush_interval_s
        if timeout is None:
            return nxt
        for slot in list(self.slots):
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
            self._abandon(slot, now)
        return nxt

    def run(self, concurrency: int) -> None:
        self.level.t0 = time.perf_counter()
        for _ in range(concurrency):
            self.spawn(None)
        try:
            while True:
                with self.lock:
                    if self.alive <= 0:
                        break
                nxt = self.watchdog(time.perf_counter())
                flush(self.level, self.journal)
                self.wake.wait(max(0.0, nxt - time.perf_counter()))
                self.wake.clear()
        except BaseException:
            self.level.stop("interrupted")
            raise
        finally:
            flush(self.level, self.journal)


def _run_sync(level: Level, search: Callable[[str, int], object], concurrency: int, journal: Journal) -> None:
    """Worker threads call the backend directly; this thread is the watchdog and journal flusher."""
    _SyncDriver(level, search, journal).run(concurrency)


def _run_async(level: Level, retriever: Retriever, concurrency: int, journal: Journal) -> None:
    """Coroutine workers on one event loop; a late call is cancelled at its deadline."""
    s = level.s
    asearch = retriever.asearch_one  # type: ignore[attr-defined]

    async def call(text: str) -> object:
        if s.timeout_s is None:
            return await asearch(text, level.k)
        if not hasattr(asyncio, "timeout"):  # Python 3.10
            try:
                return await asyncio.wait_for(asearch(text, level.k), s.timeout_s)
            except asyncio.TimeoutError:
                return TIMED_OUT
        deadline = asyncio.timeout(s.timeout_s)  # no task per call, unlike wait_for
        try:
            async with deadline:
                return await asearch(text, level.k)
        except TimeoutError:
            if deadline.expired():
                return TIMED_OUT
            raise  # the backend's own TimeoutError is an error, not our deadline

    async def worker() -> None:
        p = level.take()
        while p is not None:
            t0 = time.perf_counter()
            if not p.t_first:
                p.t_first = t0
            exc: BaseException | None = None
            raw: object = None
            REQUEST_KEY.set(level.request_key(p))  # this task's own context: other workers keep theirs
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
            await loop.run_in_executor(None, flush, level, journal)  # serialization off the loop

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
        flush(level, journal)


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
) -> dict[str, object]:
    """Run one phase of one level, journaling each finished request; returns what happened.

    In count mode the requests are indices 0..count-1 (query `i % len(query_ids)`), those already in
    the journal skipped (warm-up ones too: a resumed level does not warm up again); in duration mode new
    indices follow the journaled ones until the deadline.
    """
    seg = seg or uuid.uuid4().hex[:8]
    # keys name the request, not the process: a resumed level skips the warm-up requests already journaled
    # (never re-run, never counted twice) as it skips measured ones
    prefix = f"{concurrency}:" if phase == "measure" else f"{concurrency}:w:"
    done = journal.done()
    deadline = None
    indices: Iterator[int] | None = None
    pending: list[int] | None = None  # count mode: the request indices still to issue
    if phase == "measure" and settings.duration_s is not None and count is None:
        prior = [r for r in journal.records(lambda r: r.get("level") == concurrency and r.get("phase") == "measure")]
        spent = segments_elapsed(prior)
        deadline = time.perf_counter() + max(0.0, settings.duration_s - spent)
        start = 1 + max((r["i"] for r in prior), default=-1)
    else:
        n = count if count is not None else (settings.requests or len(query_ids))
        pending = [i for i in range(n) if f"{prefix}{i}" not in done]
        indices = iter(pending)
        start = 0
    level = Level(
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
    workers = workers_for(concurrency, None if pending is None else len(pending))
    if uses_async(retriever, settings):
        _run_async(level, retriever, workers, journal)
    else:
        _run_sync(level, retriever.search_one, workers, journal)
    return {"issued": level.issued, "stopped": level.stopped, "seg": seg, "workers": workers}


def workers_for(concurrency: int, requests: int | None) -> int:
    """How many workers a level starts: its concurrency, but never more than it has requests (None: a
    duration, unbounded) nor more than MAX_CONCURRENCY (at least one, so an empty level still ends)."""
    return max(1, min(concurrency, MAX_CONCURRENCY, concurrency if requests is None else requests))
