"""Fault injection: a wrapper around any retriever that misbehaves on purpose, reproducibly.

Stress mode exists to show a broken backend as broken; this module lets tests (and users rehearsing
their alerting) produce every kind of breakage on demand: added latency from a distribution,
exceptions, hangs, empty and garbage results, a crash after N calls (every later call fails, as a
dead server does), and a write that fails on the Nth inserted document (a store whose write-ahead
log corrupts can fail on its 16th insert, long before any read shows it).

Every decision is drawn from a generator seeded by (seed, request, query text). A load driver that
can replay requests (stress) names the request in `REQUEST_KEY` (its phase, index, query id and
attempt), so a stress run killed and resumed injects exactly the faults of an uninterrupted one, and
a warm-up never shifts the pattern. Called without a request name, the request is "the n-th time this
text was asked in this process", so the same query stream still gets the same faults whatever the
thread interleaving. Only `crash_after`, which counts calls in this process (a restarted process is a
restarted backend), depends on call order. What was injected is kept in `log` so a test can check
that each fault was recorded with the right label.
"""

from __future__ import annotations

import asyncio
import builtins
import math
import random
import threading
import time
from collections.abc import Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from retbench.config.stress import FaultSpec
from retbench.data import Corpus
from retbench.jsontypes import JSONObject
from retbench.retrievers.base import AsyncSearch, Ranking, Retriever

#: what one call can be made to do, besides answering normally ("ok")
FAULT_KINDS = ("error", "hang", "empty", "garbage", "crash")
#: the request being served, named by a driver that can replay it (see the module docstring); each thread
#: and each asyncio task sees its own value
REQUEST_KEY: ContextVar[str | None] = ContextVar("retbench_fault_request", default=None)


class InjectedCrash(RuntimeError):
    """The backend 'died': raised on every call after `crash_after` calls."""


class InjectedWriteFault(RuntimeError):
    """A write (index/add) failed part-way, as a store with a corrupt write-ahead log does."""


@dataclass
class _Plan:
    """What one call will do."""

    kind: str  # "ok" or one of FAULT_KINDS
    delay_s: float = 0.0
    garbage: str = ""


@dataclass
class FaultLog:
    """What was injected, in call order: (text, occurrence of that text, kind, garbage kind)."""

    entries: list[tuple[str, int, str, str]] = field(default_factory=list)

    def kinds_by_text(self) -> dict[str, list[str]]:
        out: dict[str, list[str]] = {}
        for text, _, kind, garbage in self.entries:
            out.setdefault(text, []).append(f"{kind}:{garbage}" if garbage else kind)
        return out


class FaultyRetriever(Retriever):
    """Wraps a retriever and injects the faults of a FaultSpec into its searches and writes."""

    inner: Retriever  # always a wrapper

    adapter = "faults"

    def __init__(self, inner: Retriever, spec: FaultSpec | None = None, *, name: str | None = None) -> None:
        super().__init__(name or inner.name)
        self.inner = inner
        self.spec = spec or FaultSpec()
        # the wrapper can do what the wrapped retriever can (async included), nothing more
        self.capabilities = frozenset(inner.capabilities)
        self.log = FaultLog()
        self._lock = threading.Lock()
        self._seen: dict[str, int] = {}
        self._calls = 0
        self._written = 0
        self._release = threading.Event()
        self._error_cls: type[Exception] = getattr(builtins, self.spec.error_type)

    def describe(self) -> JSONObject:
        return {**self.inner.describe(), "faults": self.spec.model_dump()}

    def release(self) -> None:
        """End every hang now and make later hangs return at once (tests call this when done)."""
        self._release.set()

    # -- planning -------------------------------------------------------------------------------
    def _plan(self, text: str) -> _Plan:
        spec = self.spec
        with self._lock:
            n = self._seen.get(text, 0)
            self._seen[text] = n + 1
            self._calls += 1
            crashed = spec.crash_after is not None and self._calls > spec.crash_after
        request = REQUEST_KEY.get()
        rng = random.Random(f"{spec.seed}\x1f{n if request is None else request}\x1f{text}")
        u = rng.random()
        delay = self._delay(rng)
        if crashed:
            plan = _Plan("crash", delay)
        else:
            kind = "ok"
            edge = 0.0
            for name, rate in (
                ("error", spec.error_rate),
                ("hang", spec.hang_rate),
                ("empty", spec.empty_rate),
                ("garbage", spec.garbage_rate),
            ):
                edge += rate
                if u < edge:
                    kind = name
                    break
            plan = _Plan(kind, delay, rng.choice(list(spec.garbage_kinds)) if kind == "garbage" else "")
        if plan.kind != "ok":
            with self._lock:
                self.log.entries.append((text, n, plan.kind, plan.garbage))
        return plan

    def _delay(self, rng: random.Random) -> float:
        lat = self.spec.latency
        if not lat:
            return 0.0
        dist = lat.get("dist", "constant")
        if dist == "constant":
            ms = float(lat.get("ms", 0.0))
        elif dist == "uniform":
            ms = rng.uniform(float(lat.get("low_ms", 0.0)), float(lat.get("high_ms", lat.get("ms", 0.0))))
        elif dist == "exponential":
            ms = rng.expovariate(1.0 / max(float(lat.get("ms", 1.0)), 1e-9))
        else:  # lognormal around a median
            ms = float(lat.get("ms", 1.0)) * math.exp(rng.gauss(0.0, float(lat.get("sigma", 0.5))))
        return max(ms, 0.0) / 1000.0

    # -- applying -------------------------------------------------------------------------------
    def _raise_for(self, plan: _Plan) -> None:
        if plan.kind == "crash":
            raise InjectedCrash(self.spec.crash_message)
        if plan.kind == "error":
            raise self._error_cls(self.spec.error_message)

    def _shape(self, plan: _Plan, ranking: Ranking) -> Any:
        """The inner ranking, or the empty/garbage answer the plan asks for."""
        if plan.kind == "empty":
            return []
        if plan.kind != "garbage":
            return ranking
        g = plan.garbage
        if g == "duplicate_id" and not ranking:
            g = "wrong_type"
        bad = list(ranking)
        if g == "unknown_id":
            bad[len(bad) // 2 : len(bad) // 2] = [("__retbench_no_such_doc__", bad[0][1] if bad else 1.0)]
        elif g == "duplicate_id":
            bad.append(bad[0])
        elif g == "non_finite_score":
            bad = [(d, float("nan") if i == 0 else s) for i, (d, s) in enumerate(bad)] if bad else [("x", float("nan"))]
        else:  # wrong_type: the shape a confused client might hand back
            return {"hits": [d for d, _ in bad]}
        return bad

    def search_one(self, text: str, k: int) -> Ranking:
        plan = self._plan(text)
        if plan.kind == "hang":
            self._release.wait(self.spec.hang_s)
        elif plan.delay_s:
            time.sleep(plan.delay_s)
        self._raise_for(plan)
        if plan.kind == "empty":
            return []
        return self._shape(plan, self.inner.search_one(text, k))

    async def asearch_one(self, text: str, k: int) -> Ranking:
        """The async protocol (used when the wrapped retriever declares "async")."""
        plan = self._plan(text)
        if plan.kind == "hang":
            await asyncio.sleep(0 if self._release.is_set() else self.spec.hang_s)
        elif plan.delay_s:
            await asyncio.sleep(plan.delay_s)
        self._raise_for(plan)
        if plan.kind == "empty":
            return []
        inner = self.inner
        ranking = await inner.asearch_one(text, k) if isinstance(inner, AsyncSearch) else inner.search_one(text, k)
        return self._shape(plan, ranking)

    # -- writes ---------------------------------------------------------------------------------
    def _check_write(self, corpus: Corpus) -> None:
        at = self.spec.write_fail_at
        with self._lock:
            start = self._written
            if at is not None and start < at <= start + len(corpus):
                doc_id = corpus.ids[at - start - 1]
                raise InjectedWriteFault(f"{self.spec.write_fail_message} (document {at}, id {doc_id!r})")
            self._written += len(corpus)

    def index(self, corpus: Corpus) -> None:
        with self._lock:
            self._written = 0
        self._check_write(corpus)
        self.inner.index(corpus)

    def add(self, corpus: Corpus) -> None:
        self._check_write(corpus)
        self.inner.add(corpus)

    def delete(self, ids: Sequence[str]) -> None:
        self.inner.delete(ids)

    def save(self, path: str | Path) -> None:
        self.inner.save(path)

    def load(self, path: str | Path) -> None:
        self.inner.load(path)

    def close(self) -> None:
        self.release()
        self.inner.close()


def with_faults(retriever: Retriever, faults: FaultSpec | None) -> Retriever:
    """The retriever itself when no faults are asked for, else wrapped in a FaultyRetriever."""
    return retriever if faults is None else FaultyRetriever(retriever, faults)
