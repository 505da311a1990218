"""The shapes of a system result's typed blocks (`SystemResult.judge`, `.breakdown`, `.rerank`).

They are TypedDicts, not classes: metrics.json stores each block as the plain JSON object its producer builds,
so a result written and read back is the same bytes, and a block from an older file that lacks a key still
reads (the judge block is partial: a file written before a counter existed has no entry for it).
"""

from __future__ import annotations

from typing import TypedDict


class JudgedCount(TypedDict):
    """One judged metric's "judged N of M" (`metrics.judged.counts`): verdicts that scored, queries it applies
    to, and the statuses of the rest (unparseable, judge_timeout, ...)."""

    judged: int
    of: int
    statuses: dict[str, int]


class JudgeStats(TypedDict, total=False):
    """What a judging stage spent (`studies.judging.Judging.manifest`'s `stats`): calls made, cache hits, tokens,
    retries, cost at the configured prices, whether tokens were estimated, and each verdict status's count;
    `flagged`: verdicts whose judged text carries instructions to the judge (llm/injection.py); `keyed_on`: what
    identified each judge's model in its cache key (llm/store.py: a model file sha256, or server URL + model id)."""

    calls: int
    cached: int
    input_tokens: int
    output_tokens: int
    retries: int
    cost: float
    tokens_estimated: bool
    statuses: dict[str, int]
    flagged: int
    keyed_on: list[str]


class JudgeBlock(JudgeStats, total=False):
    """A system's `judge` block (`studies.judging.judged_summary`): the stage's stats and each judged metric's
    counts."""

    metrics: dict[str, JudgedCount]


class BreakdownGroup(TypedDict, total=False):
    """One group of a system's `breakdown` (`studies.cell.breakdown`): counted queries, each metric's mean over
    those it applies to, and the share of the group's queries with each failure status."""

    n: int
    means: dict[str, float]
    rates: dict[str, float]


#: group (a tag, a category, answerable/unanswerable) -> its figures
Breakdown = dict[str, BreakdownGroup]


class Ceiling(TypedDict):
    """The first stage's value of the ceiling metric (recall at the rerank depth): what no reranker can pass."""

    metric: str
    value: float


class PairedDelta(TypedDict):
    """A reranked system against its own first stage on one metric: the paired difference, its interval, the
    randomization test's p-value and the per-query wins, ties and losses."""

    delta: float
    ci: list[float | None]  # None: no interval (too few queries)
    p: float
    wins: int
    ties: int
    losses: int
    n: int


class RerankSummary(TypedDict, total=False):
    """A reranked system's `rerank` block (`studies.rerank`); partial, as a block read back from a file may be."""

    depth: int
    ceiling: Ceiling
    vs_first_stage: dict[str, PairedDelta]
