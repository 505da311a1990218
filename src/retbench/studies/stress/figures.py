"""Per-level figures from journaled request records: latency percentiles, rates, QPS, and ingestion timing."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

from retbench.data import Corpus, Run
from retbench.results.journal import run_from_records
from retbench.results.stress import IngestFigures, LevelFigures
from retbench.results.stress_figures import Failure, LatencySummary
from retbench.retrievers.base import Retriever
from retbench.studies.stress.level import now_iso, segments_elapsed
from retbench.studies.stress.validate import FAILURE_OUTCOMES, OUTCOMES


# -- figures ---------------------------------------------------------------------------------------
def summarize_level(records: Sequence[Mapping[str, Any]], concurrency: int, planned: int | None = None) -> LevelFigures:
    """Per-level figures from the journaled request records of its measured phase."""
    n = len(records)
    counts = {o: 0 for o in OUTCOMES}
    ok_lat: list[float] = []
    fail_lat: list[float] = []
    invalid: dict[str | None, int] = {}
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
    elapsed = segments_elapsed(records)
    answered = counts["ok"] + counts["short"] + counts["empty"]
    failed = n - answered
    return LevelFigures(
        concurrency=concurrency,
        planned=planned,
        completed=n,
        answered=answered,
        failed=failed,
        elapsed_s=elapsed,
        qps=n / elapsed if elapsed > 0 else None,
        latency_success=LatencySummary.of_seconds(ok_lat),
        latency_failure=LatencySummary.of_seconds(fail_lat),
        counts=counts,
        rates={o: (counts[o] / n if n else 0.0) for o in ("error", "timeout", "empty", "invalid", "short")},
        failure_rate=failed / n if n else 0.0,
        invalid_kinds=invalid,
        error_types=errors,
        retries=retries,
        recovered_by_retry=recovered,
        segments=len({r["seg"] for r in records}),
    )


def level_run(records: Sequence[Mapping[str, Any]], name: str = "") -> Run:
    """The level's responses as a Run: each query's first request (lowest index) answers for it."""
    return run_from_records(sorted(records, key=lambda r: r["i"]), name=name)


# -- ingestion ------------------------------------------------------------------------------------
def ingest(retriever: Retriever, corpus: Corpus, batch_size: int | None) -> IngestFigures:
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
            first_failure = Failure(
                {
                    "qid": None,
                    "kind": "error",
                    "detail": "ingest",
                    "exc_type": type(exc).__name__,
                    "message": str(exc),
                    "time": now_iso(),
                    "attempt": 1,
                    "latency": time.perf_counter() - t0,
                    "phase": "ingest",
                    "batch": b,
                    "docs": [start, start + len(part)],
                }
            )
            break
        batches.append({"batch": b, "docs": len(part), "seconds": time.perf_counter() - t0})
    total = time.perf_counter() - t_start
    written = sum(x["docs"] for x in batches)
    return IngestFigures(
        documents=n,
        written=written,
        batch_size=size,
        incremental=can_add and size < n,
        batches=len(batches),
        seconds=total,
        docs_per_s=written / total if total > 0 and written else None,
        batch_seconds=LatencySummary.of_seconds([x["seconds"] for x in batches]),
        first_failure=first_failure,
        note="" if can_add or not batch_size else f"adapter {retriever.adapter!r} cannot add; indexed in one call",
    )
