"""The cell contract: what a cell is given (`Cell`, `CellData`), its typed stages (`CellStages`: an optional
`RerankStage`, a `Scorer`, a `Describe`) and what they return (`Reranked`, `Scored`), apart from the runner
(`studies.cell.run_cell`) so a stage module (rerank, judging) can name them without importing the runner.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from retbench.data import Corpus, Queries, Run
from retbench.data.answers import SystemAnswer
from retbench.evaluation import Evaluation
from retbench.results import SystemDir
from retbench.results.blocks import JudgeBlock, RerankSummary
from retbench.results.model import MetricValue
from retbench.retrievers.base import Retriever
from retbench.studies.executors import OnBatch

Progress = Callable[[str, int, int], None]
Log = Callable[[str], None]


def fingerprint(obj: object) -> str:
    """A short stable hash of JSON-able settings."""
    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()[:16]


# -- the contract: what a cell is given, its stages, and what it gives back ------------------------------
class Executor(Protocol):
    """Where encoding and searching run (`studies/executors.py`: in this process, or a Ray cluster)."""

    def encode_corpus(self, retriever: Retriever, corpus: Corpus | Sequence[str]) -> dict[str, Any]: ...

    def search(
        self,
        retriever: Retriever,
        queries: Queries,
        todo: Sequence[str],
        k: int,
        batch_size: int,
        on_batch: OnBatch,
        *,
        adapter: str = "",
        params: dict[str, Any] | None = None,
        index_dir: Path | None = None,
    ) -> dict[str, Any]: ...

    def close(self) -> None: ...


@dataclass
class Cell:
    """One unit of work and where its results go.

    `manifest` holds study-specific manifest fields (stored in done.json); `search_extra` what a
    remote executor needs to build the system again in its workers (adapter and params).
    """

    key: str
    sysdir: SystemDir
    search_fingerprint: str
    cell_hash: str
    depth: int
    batch_size: int = 64
    manifest: Mapping[str, object] = field(default_factory=dict)
    search_extra: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class CellData:
    """What a cell searches and scores on; `groups` (name -> query ids: tags, categories, answerable)
    give the summary's `breakdown`."""

    corpus: Corpus
    queries: Queries
    groups: Mapping[str, Sequence[str]] | None = None


@dataclass
class Scored:
    """The scoring stage's result: the per-query table, plus the judging stage's `judge` block (calls,
    tokens and verdict counts) and manifest block when it judged."""

    evaluation: Evaluation
    judge: JudgeBlock | None = None
    manifest: dict[str, object] = field(default_factory=dict)
    curves: dict[str, list[float]] | None = None  # metric family -> mean at k = 1 .. depth, for the report


class Scorer(Protocol):
    """Scores a cell's final run; `answers` is the answer side a RAG system gave (empty otherwise), `scopes`
    (query id -> "is this doc inside the scope chosen?") is given for a scoped system (retrievers/scope.py)."""

    def __call__(
        self, run: Run, answers: Mapping[str, SystemAnswer], /, scopes: Mapping[str, Callable[[str], bool]] | None
    ) -> Scored: ...


@dataclass
class Reranked:
    """The rerank stage's result: the final run (each query's first-stage top `depth`, re-ordered),
    the first stage's values, the `rerank` block (ceiling, reranked vs first stage) and the manifest block."""

    run: Run
    depth: int
    first_stage: dict[str, MetricValue]
    rerank: RerankSummary
    manifest: dict[str, object]


class RerankStage(Protocol):
    """Turns the first-stage run into the final one (studies/rerank.py)."""

    def __call__(self, run: Run, /) -> Reranked: ...


class Describe(Protocol):
    """Study-specific figures (the result's `extra` block) from the retriever and the cell's timings
    (e.g. chunk statistics)."""

    def __call__(self, retriever: Retriever, timings: dict[str, float], /) -> dict[str, object]: ...


@dataclass
class CellStages:
    """What runs after the search: an optional rerank, the scoring, study-specific summary fields,
    and the bootstrap settings of the aggregates (`Evaluation.aggregate` keywords)."""

    score: Scorer
    rerank: RerankStage | None = None
    describe: Describe | None = None
    aggregate: Mapping[str, Any] = field(default_factory=dict)
