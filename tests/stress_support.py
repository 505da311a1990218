"""Shared pieces of the stress, fault and journal tests: a SciFact slice, an async adapter, a call log.

Not a test module (no `test_` prefix); the test files import it from the tests folder, and the
subprocess tests reach `logged_bm25` as the adapter `stress_support:logged_bm25` (PYTHONPATH=tests).
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from retbench.data import Corpus, Dataset
from retbench.retrievers.base import Ranking, Retriever, create

TESTS = Path(__file__).resolve().parent


def scifact_slice(scifact: Dataset, n_queries: int = 40, n_other_docs: int = 400) -> Dataset:
    """The first `n_queries` judged test queries over their judged documents plus some others (real texts)."""
    qrels = scifact.split("test")
    qids = [q for q in qrels if q in scifact.queries][:n_queries]
    judged = {d for q in qids for d in qrels[q] if d in scifact.corpus}
    others = [d for d in scifact.corpus.ids if d not in judged][:n_other_docs]
    keep = [d for d in scifact.corpus.ids if d in judged or d in set(others)]
    return Dataset("scifact-slice", scifact.corpus.subset(keep), scifact.queries.subset(qids), {"test": qrels.subset(qids)})


def stress_raw(dataset_path: str | Path, output: str | Path, *, system: Mapping[str, Any] | None = None, **stress: Any) -> dict[str, Any]:
    """A stress config mapping over a BEIR folder; `stress` items go into the `stress:` block."""
    return {
        "name": "stress-test",
        "output": str(output),
        "depth": 10,
        "metrics": ["ndcg@10", "recall@10"],
        "datasets": [{"path": str(dataset_path), "split": "test"}],
        "systems": [dict(system or {"name": "bm25", "adapter": "bm25s"})],
        "stress": {"levels": [2], "warmup": 0, "timeout_s": 5.0, **stress},
    }


class AsyncBM25(Retriever):
    """A BM25 adapter speaking the async protocol (capability "async", `asearch_one`)."""

    adapter = "async_bm25"
    capabilities = frozenset({"async"})

    def __init__(self, name: str | None = None) -> None:
        super().__init__(name)
        self.inner = create("bm25s", {})

    def index(self, corpus: Corpus) -> None:
        self.inner.index(corpus)

    def search_batch(self, texts: Sequence[str], k: int) -> list[Ranking]:
        return self.inner.search_batch(texts, k)

    async def asearch_one(self, text: str, k: int) -> Ranking:
        await asyncio.sleep(0)
        return self.inner.search_one(text, k)


class LoggedBM25(Retriever):
    """BM25 that appends every query text it serves to a file: counts backend calls across processes."""

    adapter = "logged_bm25"

    def __init__(self, log: str, delay_ms: float = 0.0, name: str | None = None) -> None:
        super().__init__(name)
        self.inner = create("bm25s", {})
        self.delay_s = delay_ms / 1000.0
        self._fh = open(log, "a", encoding="utf-8", buffering=1)  # noqa: SIM115
        self._lock = threading.Lock()

    def index(self, corpus: Corpus) -> None:
        self.inner.index(corpus)

    def search_one(self, text: str, k: int) -> Ranking:
        with self._lock:
            self._fh.write(text.replace("\n", " ") + "\n")
            self._fh.flush()
            os.fsync(self._fh.fileno())
        if self.delay_s:
            threading.Event().wait(self.delay_s)
        return self.inner.search_one(text, k)

    def close(self) -> None:
        self._fh.close()


def logged_bm25(log: str, delay_ms: float = 0.0, name: str | None = None) -> LoggedBM25:
    return LoggedBM25(log, delay_ms, name)
