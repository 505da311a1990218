"""RunBuilder: collect rankings one query at a time (retrievers, journals, readers) and build one Run."""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from retbench.data.ids import answer_problem
from retbench.data.run import Run
from retbench.data.status import QueryStatus


class RunBuilder:
    """Collects per-query results as a retriever produces them, then freezes them into a Run."""

    def __init__(self, name: str = "") -> None:
        self.name = name
        self._qids: list[str] = []
        self._docs: list[str] = []
        self._scores: list[float] = []
        self._offsets = [0]
        self._status: dict[str, QueryStatus] = {}
        self._latency: dict[str, float] = {}
        self._batch: dict[str, int] = {}
        self._errors: dict[str, str] = {}

    def add(
        self,
        qid: str,
        ranking: Iterable[tuple[str, float]] = (),
        *,
        status: QueryStatus | None = None,
        latency: float | None = None,
        error: str | None = None,
        batch: int | None = None,
    ) -> None:
        """`batch`: queries timed together with this one, when `latency` is an even share of their wall time."""
        ranking = list(ranking)
        problem = answer_problem(ranking) if ranking else None
        if problem is not None:  # a bad id or score would corrupt run.trec: recorded as an invalid answer
            ranking, status = [], QueryStatus.INVALID
            error = f"invalid answer: {problem}" + (f"; {error}" if error else "")
        for d, s in ranking:
            self._docs.append(str(d))
            self._scores.append(float(s))
        self._qids.append(qid)
        self._offsets.append(len(self._docs))
        if status is not None:
            self._status[qid] = status
        if latency is not None:
            self._latency[qid] = latency
            if batch is not None and batch > 1:
                self._batch[qid] = batch
        if error is not None:
            self._errors[qid] = error

    def build(self) -> Run:
        return Run(
            self._qids,
            np.asarray(self._offsets, dtype=np.int64),
            np.asarray(self._docs, dtype=object),
            np.asarray(self._scores, dtype=np.float64),
            status=self._status,
            latency=self._latency,
            latency_batch=self._batch,
            errors=self._errors,
            name=self.name,
            _owned=True,
        )
