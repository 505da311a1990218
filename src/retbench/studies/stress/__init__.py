"""Stress mode: drive a backend under load and faults, and record every failure as a failure.

`retbench stress CONFIG` indexes a dataset into one system (in batches, recording the first write
that fails: a store whose write-ahead log corrupts may fail on the 16th insert, not on a read), then
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
of the interrupted one, warm-up requests included: a warm-up is run and counted once per level, whatever
the number of processes (the resumed process's first measured requests may therefore meet a colder
backend than the first process's did). QPS of a resumed level sums the wall time of each process's part.

Modules: `validate` (the failure taxonomy), `level` (one request's life), `drivers` (threads with a watchdog,
asyncio), `figures` (per-level figures, ingestion), `config`, `study` (run_stress). How load is applied (the
`stress:` block, `LoadSettings`) is declared in `retbench.config.stress`. The run's figures are a typed
`StressSummary` (`retbench.results.stress`, summary.json); the report (Markdown, HTML) is rendered from it alone
by `retbench.report.stress`.
"""

from __future__ import annotations

from retbench.studies.stress.config import check_stress, load_config, parse_config
from retbench.studies.stress.drivers import abandoned_threads, drive, uses_async
from retbench.studies.stress.figures import ingest, level_run, summarize_level
from retbench.studies.stress.study import OUTPUT_FILES, StressResult, build_retriever, quality, run_stress
from retbench.studies.stress.validate import (
    FAILURE_OUTCOMES,
    INVALID_KINDS,
    OUTCOMES,
    check_ranking,
    is_failure,
    validate_ranking,
)

__all__ = [
    "FAILURE_OUTCOMES",
    "INVALID_KINDS",
    "OUTCOMES",
    "OUTPUT_FILES",
    "StressResult",
    "abandoned_threads",
    "build_retriever",
    "check_ranking",
    "check_stress",
    "drive",
    "ingest",
    "is_failure",
    "level_run",
    "load_config",
    "parse_config",
    "quality",
    "run_stress",
    "summarize_level",
    "uses_async",
    "validate_ranking",
]
