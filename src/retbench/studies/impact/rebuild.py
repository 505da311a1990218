"""The generic impact engine: any retriever with add/delete (BM25, hybrid, stores).

`add` the document, re-run every query, evaluate, `delete` it again (for BM25 a full rebuild, measured in
benchmarks/ingest_speed.py).
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence

import numpy as np

from retbench.data import Corpus, Qrels, Queries, Run
from retbench.errors import BackendError, ConfigError, InputError
from retbench.metrics.judges import judge_qrels
from retbench.results.impact import Impact
from retbench.retrievers.base import Retriever
from retbench.studies.impact.candidates import concat_corpora
from retbench.studies.impact.engine import TIE_MARGIN, _Base
from retbench.studies.impact.support import ContextRecall


# -- the generic engine: any retriever with add/delete ------------------------------------------------
class RebuildImpact(_Base):
    """Impact through any Retriever: add the document, re-run every query, evaluate, remove it again.

    Exact by construction and as slow as the retriever's `add` (BM25 adapters rebuild) plus a full search.
    `strategy="reindex"` builds the index from scratch over K + {d} instead (the naive reference).
    """

    def __init__(
        self,
        retriever: Retriever,
        kb: Corpus,
        queries: Queries,
        qrels: Qrels | Mapping[str, Mapping[str, int]],
        metrics: Sequence[str],
        *,
        relevance_level: int = 1,
        context: ContextRecall | None = None,
        affected_by: str | None = None,
        strategy: str = "add",
        indexed: bool = False,
    ) -> None:
        super().__init__(list(queries), qrels, metrics, relevance_level, context, affected_by)
        if strategy not in ("add", "reindex"):
            raise ConfigError(f"unknown strategy {strategy!r}; expected 'add' or 'reindex'", field="strategy")
        if strategy == "add" and not {"add", "delete"} <= set(retriever.capabilities):
            raise ConfigError(
                f"adapter {retriever.adapter!r} cannot add and delete documents; use strategy 'reindex'",
                field="retriever",
            )
        self.engine = f"rebuild ({strategy}, re-run every query)"
        self.retriever, self.kb, self.strategy = retriever, kb, strategy
        self.queries = queries.subset(self.qids)
        self.seconds = {"index": 0.0, "search": 0.0, "evaluate": 0.0}
        if not indexed:
            self._index(kb)
        self.base_run = self._search("K")
        self.base_values = self._evaluate(self.base_run)
        self.base_ids = self._top(self.base_run)
        self.base_cr = self._cr(self.base_run)

    def _index(self, corpus: Corpus) -> None:
        t0 = time.perf_counter()
        self.retriever.index(corpus)
        self.seconds["index"] += time.perf_counter() - t0

    def _search(self, name: str) -> Run:
        t0 = time.perf_counter()
        # fetch past the cut and let the Run's trec_eval order decide ties there (FAISS and bm25s break ties
        # at the cut by their own internal order)
        run = self.retriever.search(self.queries, self.depth + TIE_MARGIN).truncate(self.depth)
        run.name = name
        self.seconds["search"] += time.perf_counter() - t0
        failed = run.failed()
        if failed:
            raise BackendError(f"retriever failed on query {failed[0]}: {run.errors.get(failed[0], '')}")
        return run

    def _evaluate(self, run: Run) -> np.ndarray:
        t0 = time.perf_counter()
        gm = judge_qrels(run, self.qrels, self.qids)
        values = self._values(gm)
        self.seconds["evaluate"] += time.perf_counter() - t0
        return values

    def _top(self, run: Run) -> list[list[str]]:
        return [run.docs(q)[: self.depth] if q in run else [] for q in self.qids]

    def _cr(self, run: Run) -> np.ndarray:
        if self.context is None:
            return np.full(self.n, np.nan)
        return self.context.scores(self.qids, self._top(run))

    @property
    def before(self) -> dict[str, float]:
        out = {m: float(self.base_values[:, j].mean()) for j, m in enumerate(self.metric_names)}
        if self.context is not None and self.has_ref.any():
            out["context_recall"] = float(np.nanmean(self.base_cr[self.has_ref]))
        return out

    def _with(self, corpus: Corpus, name: str) -> Run:
        if self.strategy == "add":
            t0 = time.perf_counter()
            self.retriever.add(corpus)
            self.seconds["index"] += time.perf_counter() - t0
        else:
            self._index(concat_corpora(self.kb, corpus))
        return self._search(name)

    def _restore(self, ids: Sequence[str]) -> None:
        if self.strategy == "add":
            t0 = time.perf_counter()
            self.retriever.delete(list(ids))
            self.seconds["index"] += time.perf_counter() - t0

    def _diff(
        self,
        values: np.ndarray,
        cr: np.ndarray,
        top: list[list[str]],
        ref_values: np.ndarray,
        ref_cr: np.ndarray,
        ref_top: list[list[str]],
        sign: float = 1.0,
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        delta = sign * (values - ref_values)
        dcr = sign * (cr - ref_cr)
        changed = np.array([a != b for a, b in zip(top, ref_top, strict=True)], dtype=bool)
        rows = np.flatnonzero(changed | (delta != 0).any(axis=1) | (np.nan_to_num(dcr) != 0))
        return rows, delta[rows], dcr[rows], changed[rows]

    def alone(self, candidates: Corpus, skip: Sequence[bool] | None = None) -> list[Impact]:
        noop = np.zeros(len(candidates), dtype=bool) if skip is None else np.asarray(skip, dtype=bool)
        parts: list[tuple[np.ndarray, ...]] = []
        for c in range(len(candidates)):
            if noop[c]:
                continue
            cid = str(candidates.ids[c])
            one = candidates.subset([cid])
            run = self._with(one, "K+d")
            try:
                rows, d, dcr, ch = self._diff(
                    self._evaluate(run), self._cr(run), self._top(run), self.base_values, self.base_cr, self.base_ids
                )
            finally:
                self._restore([cid])
            parts.append((rows, np.full(len(rows), c), d, dcr, ch))
        return self._collect("alone", [str(i) for i in candidates.ids], *self._cat(parts))

    def sequential(self, candidates: Corpus, skip: Sequence[bool] | None = None) -> list[Impact]:
        noop = np.zeros(len(candidates), dtype=bool) if skip is None else np.asarray(skip, dtype=bool)
        parts: list[tuple[np.ndarray, ...]] = []
        prev = (self.base_values, self.base_cr, self.base_ids)
        added: list[str] = []
        afters: list[dict[str, float]] = []
        kb = self.kb
        try:
            for c in range(len(candidates)):
                if not noop[c]:
                    cid = str(candidates.ids[c])
                    one = candidates.subset([cid])
                    if self.strategy == "add":
                        run = self._with(one, "K+seq")
                    else:
                        kb = concat_corpora(kb, one)
                        self._index(kb)
                        run = self._search("K+seq")
                    added.append(cid)
                    cur = (self._evaluate(run), self._cr(run), self._top(run))
                    rows, d, dcr, ch = self._diff(*cur, *prev)
                    parts.append((rows, np.full(len(rows), c), d, dcr, ch))
                    prev = cur
                means = {m: float(prev[0][:, j].mean()) for j, m in enumerate(self.metric_names)}
                if self.context is not None and self.has_ref.any():
                    means["context_recall"] = float(np.nanmean(prev[1][self.has_ref]))
                afters.append(means)
        finally:
            if self.strategy == "add":
                self._restore(added)
            else:
                self._index(self.kb)
        out = self._collect("sequential", [str(i) for i in candidates.ids], *self._cat(parts))
        for imp, a in zip(out, afters, strict=True):
            imp.after = a
        return out

    def leave_one_out(self, doc_ids: Sequence[str]) -> list[Impact]:
        parts: list[tuple[np.ndarray, ...]] = []
        for c, d in enumerate(doc_ids):
            if d not in self.kb:
                raise InputError(f"leave-one-out document {d!r} is not in the knowledge base", field="leave_one_out")
            one = self.kb.subset([d])
            if self.strategy == "add":
                self.retriever.delete([d])
            else:
                self._index(self.kb.subset([x for x in self.kb.ids if x != d]))
            try:
                run = self._search("K-d")
                rows, dd, dcr, ch = self._diff(
                    self._evaluate(run),
                    self._cr(run),
                    self._top(run),
                    self.base_values,
                    self.base_cr,
                    self.base_ids,
                    sign=-1.0,
                )
            finally:
                if self.strategy == "add":
                    self.retriever.add(one)
            parts.append((rows, np.full(len(rows), c), dd, dcr, ch))
        if self.strategy == "reindex":
            self._index(self.kb)
        return self._collect("leave_one_out", [str(d) for d in doc_ids], *self._cat(parts))


# -- the experiment: config, candidates, runner, report ------------------------------------------------
