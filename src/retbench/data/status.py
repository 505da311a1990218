"""The one vocabulary of what happened to a query, and the names coverage counts use.

A system reports one `QueryStatus` per query it was asked. A query the relevance judgements hold but
the run does not is `MISSING`: no system said anything about it, so it is not a `QueryStatus`, but it
is scored and counted beside them (0, as trec_eval `-c` does). Every module that writes or reads a
status or a coverage count takes the names from here.
"""

from __future__ import annotations

from enum import Enum


class QueryStatus(str, Enum):
    """What happened to one query: only `ok` and `empty` are answers; the rest are failures."""

    OK = "ok"
    EMPTY = "empty"
    ERROR = "error"
    TIMEOUT = "timeout"
    INVALID = "invalid"

    @property
    def failed(self) -> bool:
        return self in (QueryStatus.ERROR, QueryStatus.TIMEOUT, QueryStatus.INVALID)


MISSING = "missing"
"""A judged query the run does not contain (scores 0 and is counted, never dropped)."""

RUN_STATUSES: frozenset[str] = frozenset(s.value for s in QueryStatus)
"""The values a run's status file may hold."""

STATUSES: tuple[str, ...] = (*(s.value for s in QueryStatus), MISSING)
"""Every value a per-query table's status column may hold, in report order."""

FAILED: frozenset[str] = frozenset(s.value for s in QueryStatus if s.failed)
"""Statuses of a query the system was asked and did not answer."""

UNANSWERED: frozenset[str] = FAILED | {MISSING}
"""Statuses that score 0: failed or missing."""

FAILED_COUNT = "failed"
"""The coverage count of failed queries (beside `MISSING`, the count of missing ones)."""

NOT_ANSWERED_COUNTS = (FAILED_COUNT, MISSING)
"""The coverage counts a report lists next to the answered queries, in that order."""

COVERAGE_COUNTS = ("judged", "answered", FAILED_COUNT, MISSING)
"""The counts metrics.json's coverage block always holds."""
