"""One request's life within one phase of one concurrency level: its source, its judging, its journal record."""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Container, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, cast

from retbench.config.stress import LoadSettings
from retbench.data import Queries
from retbench.results.journal import Journal
from retbench.studies.stress.validate import FAILURE_OUTCOMES, INVALID_KINDS, STATUS_OF, check_ranking


# -- one request's life ---------------------------------------------------------------------------
def now_iso() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds")


@dataclass
class Pending:
    """A request in flight, across its attempts."""

    i: int
    qid: str
    text: str
    attempt: int = 1
    t_first: float = 0.0
    failures: list[dict[str, object]] = field(default_factory=list)
    not_before: float = 0.0


class Level:
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
        self.out: deque[dict[str, object]] = deque()
        self.t0 = 0.0
        self.issued = 0

    # the request source -----------------------------------------------------------------------
    def take(self) -> Pending | None:
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
        return Pending(i, qid, self.queries[qid])

    def stop(self, reason: str) -> None:
        with self._take_lock:
            self.stopped = self.stopped or reason

    # judging one attempt ------------------------------------------------------------------------
    def judge(
        self, p: Pending, raw: object, exc: BaseException | None, t0: float, t1: float, *, may_retry: bool = True
    ) -> float | None:
        """Record the attempt's outcome; returns the backoff delay when the request is to be retried."""
        if exc is not None:
            kind, detail, exc_type, message = "error", None, type(exc).__name__, str(exc)
        elif raw is TIMED_OUT:
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
        ranking = cast(Sequence[tuple[str, float]], raw) if kind in ("ok", "short") else None  # check_ranking's word
        self.finish(p, kind, detail, ranking, t1)
        return None

    def _failure(
        self, p: Pending, kind: str, detail: str | None, exc_type: str | None, message: str, latency: float
    ) -> dict[str, object]:
        return {
            "qid": p.qid,
            "kind": kind,
            "detail": detail,
            "exc_type": exc_type,
            "message": message,
            "time": now_iso(),
            "attempt": p.attempt,
            "latency": latency,
            "level": self.level,
            "phase": self.phase,
            "request": p.i,
        }

    def finish(
        self, p: Pending, kind: str, detail: str | None, ranking: Sequence[tuple[str, float]] | None, t_end: float
    ) -> None:
        rec: dict[str, object] = {
            "qid": p.qid,
            "status": STATUS_OF[kind].value,
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

    def request_key(self, p: Pending) -> str:
        """Who this attempt is, the same in every process: fault injection draws its decision from it.

        The level is left out on purpose: every level sees the same fault pattern, so what changes between
        levels is the load alone."""
        return f"{self.phase}\x1f{p.i}\x1f{p.qid}\x1f{p.attempt}"

    def key(self, rec: Mapping[str, object]) -> str:
        return f"{self.key_prefix}{rec['i']}"


class _TimedOut:
    """Marker for an attempt that passed its deadline."""


TIMED_OUT = _TimedOut()


def drain(level: Level, journal: Journal) -> None:
    while level.out:
        rec = level.out.popleft()
        journal.append(level.key(rec), **rec)


def flush(level: Level, journal: Journal) -> None:
    drain(level, journal)
    journal.flush()


def segments_elapsed(records: Sequence[Mapping[str, Any]]) -> float:
    """Wall time a level ran, summed over the processes (segments) that worked on it."""
    per: dict[str, float] = {}
    for r in records:
        per[r["seg"]] = max(per.get(r["seg"], 0.0), float(r["t"]))
    return sum(per.values())
