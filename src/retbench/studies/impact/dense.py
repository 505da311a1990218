"""The exact incremental impact engine for a dense exact (FAISS flat inner product) retriever.

Nothing is re-indexed. K's per-query top-(depth+1) lists are searched once; a candidate changes query q's
top-depth iff its score beats q's depth-th entry in trec_eval order (score descending, then doc id
descending), so "alone" for every candidate is one queries x candidates matrix product plus per-query
thresholds, and the new lists are merges: exact, equal doc for doc to a from-scratch FAISS flat rebuild
(tests/test_ingest.py). Metrics of the changed rows go through the metric engine (`judge_qrels`, registry
metrics on a GainMatrix).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from retbench.data import Qrels, Run
from retbench.errors import InputError
from retbench.metrics.judges import judge_qrels
from retbench.results.impact import Impact
from retbench.studies.impact.engine import TIE_MARGIN, _Base, pair_gain_matrix
from retbench.studies.impact.support import ContextRecall


@dataclass
class _State:
    pos: np.ndarray  # int64 [n, width] doc positions in trec_eval order, -1 padding
    score: np.ndarray  # float32 [n, width], -inf padding
    gains: np.ndarray  # float64 [n, width] grade of each ranked doc
    lengths: np.ndarray  # int64 [n] valid entries per row
    values: np.ndarray  # float64 [n, n_metrics] metric values per query
    cr: np.ndarray  # float64 [n] context recall per query (NaN without references)

    def copy(self) -> _State:
        return _State(*(np.array(getattr(self, f)) for f in ("pos", "score", "gains", "lengths", "values", "cr")))


Search = Callable[[np.ndarray, int], tuple[np.ndarray, np.ndarray]]


def _dot(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Row-wise float32 inner products, one fixed summation per pair: the same two vectors always give the same
    score, however they were batched (matrix products may round the last bit differently per call)."""
    return np.multiply(a, b, dtype=np.float32).sum(axis=-1, dtype=np.float32)


def _slack(kth: np.ndarray) -> np.ndarray:
    """Margin of the fast matrix-product screen: far above float32 rounding of a 1,000-dim inner product."""
    return np.where(np.isfinite(kth), 1e-4 * np.maximum(1.0, np.abs(kth)), 0.0)


class DenseImpact(_Base):
    """Exact impact of adding or removing documents for a dense exact inner-product retriever, without re-indexing.

    `search(query_vectors, n)` gives the exact top-n (doc ids, scores) of K, e.g. a flat DenseRetriever's
    `search_embeddings`; without it a FAISS IndexFlatIP is built over `kb_vectors`. With `kb_vectors`, every
    score (K's and the candidates') is recomputed by one per-pair float32 function, so a candidate whose vector
    equals a K document's (a near-duplicate whose edits the model does not see) ties with it exactly and the
    tie goes by doc id as in trec_eval. Distinct vectors whose scores differ by float32 rounding alone
    (~1e-7) are the only pairs a rebuilt index could order the other way.
    """

    engine = "dense exact incremental (top-k merge)"

    def __init__(
        self,
        kb_ids: Sequence[str],
        query_ids: Sequence[str],
        query_vectors: np.ndarray,
        qrels: Qrels | Mapping[str, Mapping[str, int]],
        metrics: Sequence[str],
        *,
        search: Search | None = None,
        kb_vectors: np.ndarray | None = None,
        relevance_level: int = 1,
        context: ContextRecall | None = None,
        affected_by: str | None = None,
    ) -> None:
        super().__init__(query_ids, qrels, metrics, relevance_level, context, affected_by)
        qpos = {str(q): i for i, q in enumerate(query_ids)}
        self.Q = np.ascontiguousarray(np.asarray(query_vectors, dtype=np.float32)[[qpos[q] for q in self.qids]])
        self.ids: list[str] = [str(d) for d in kb_ids]
        if len(set(self.ids)) != len(self.ids):
            raise InputError("knowledge base repeats a document id", field="ids")
        self.pos_of = {d: i for i, d in enumerate(self.ids)}
        self.n_kb = len(self.ids)
        self.X = None if kb_vectors is None else np.ascontiguousarray(kb_vectors, dtype=np.float32)
        if search is None:
            if self.X is None:
                raise ValueError("give either search or kb_vectors")
            search = self._flat_search(self.X)
        self.base = self._initial_state(search)

    def _flat_search(self, vectors: np.ndarray) -> Search:
        import faiss

        index = faiss.IndexFlatIP(vectors.shape[1])
        index.add(np.ascontiguousarray(vectors))
        table = np.asarray([*self.ids, None], dtype=object)

        def search(q: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
            scores, labels = index.search(q, n)
            return table[np.where(labels < 0, len(self.ids), labels)], np.where(labels < 0, -np.inf, scores).astype(
                np.float32
            )

        return search

    # -- state ---------------------------------------------------------------------------------------
    def _initial_state(self, search: Search) -> _State:
        n_docs = self.n_kb
        want = min(self.width + TIE_MARGIN, n_docs)
        rows = np.arange(self.n)
        pos = np.full((self.n, want), -1, dtype=np.int64)
        score = np.full((self.n, want), -np.inf, dtype=np.float32)
        while len(rows):
            ids, sc = search(self.Q[rows], want)
            p = np.array(
                [[self.pos_of[d] if d is not None else -1 for d in r] for r in ids.tolist()], dtype=np.int64
            ).reshape(len(rows), -1)
            if p.shape[1] < pos.shape[1]:
                pad = pos.shape[1] - p.shape[1]
                p = np.pad(p, ((0, 0), (0, pad)), constant_values=-1)
                sc = np.pad(sc, ((0, 0), (0, pad)), constant_values=-np.inf)
            if p.shape[1] > pos.shape[1]:
                pos = np.pad(pos, ((0, 0), (0, p.shape[1] - pos.shape[1])), constant_values=-1)
                score = np.pad(score, ((0, 0), (0, p.shape[1] - score.shape[1])), constant_values=-np.inf)
            pos[rows], score[rows] = p, sc
            # a tie running past the last fetched neighbour might hide a doc id that wins the tie: fetch deeper
            k_in = min(self.width, want)
            tied = (
                np.isfinite(sc[:, -1]) & (sc[:, k_in - 1] == sc[:, -1]) if want < n_docs else np.zeros(len(rows), bool)
            )
            rows = rows[tied]
            want = min(want * 2, n_docs)
        if self.X is not None:  # one scoring function for K and candidates: identical vectors tie exactly
            live = pos >= 0
            score = np.where(live, _dot(self.Q[:, None, :], self.X[np.maximum(pos, 0)]), -np.inf).astype(np.float32)
        rank = self._id_rank(pos)
        order = np.lexsort((-rank, -score.astype(np.float64)), axis=-1)[:, : self.width]
        pos = np.take_along_axis(pos, order, axis=1)
        score = np.take_along_axis(score, order, axis=1)
        if pos.shape[1] < self.width:
            pad = self.width - pos.shape[1]
            pos = np.pad(pos, ((0, 0), (0, pad)), constant_values=-1)
            score = np.pad(score, ((0, 0), (0, pad)), constant_values=-np.inf)
        lengths = (pos >= 0).sum(axis=1).astype(np.int64)
        run = self._run(pos, score, lengths)
        gm = judge_qrels(run, self.qrels, self.qids)
        gains = np.zeros((self.n, self.width), dtype=np.float64)
        dense = gm.gains
        gains[:, : dense.shape[1]] = dense[:, : self.width]
        self.gm = gm
        values = self._values(gm)
        cr = np.full(self.n, np.nan)
        if self.context is not None:
            cr = self.context.scores(
                self.qids, [self._row_ids(pos[i], lengths[i], self.context_k) for i in range(self.n)]
            )
        return _State(pos, score, gains, lengths, values, cr)

    def _id_rank(self, pos: np.ndarray) -> np.ndarray:
        """Rank of each doc id in string order (trec_eval's tie-break), -1 for padding."""
        ids = np.asarray(self.ids, dtype=object)
        uniq = np.unique(pos[pos >= 0])
        order = np.argsort(ids[uniq].astype(str), kind="stable")
        rank_of = np.full(len(self.ids), -1, dtype=np.int64)
        rank_of[uniq[order]] = np.arange(len(uniq))
        return np.where(pos >= 0, rank_of[np.maximum(pos, 0)], -1)

    def _row_ids(self, pos_row: np.ndarray, length: int, k: int) -> list[str]:
        return [self.ids[p] for p in pos_row[: min(length, k)].tolist()]

    def _run(
        self, pos: np.ndarray, score: np.ndarray, lengths: np.ndarray, depth: int | None = None, name: str = ""
    ) -> Run:
        lens = np.minimum(lengths, depth if depth is not None else pos.shape[1])
        mask = np.arange(pos.shape[1])[None, :] < lens[:, None]
        ids = np.asarray(self.ids, dtype=object)[pos[mask]]
        offsets = np.concatenate([[0], np.cumsum(lens)]).astype(np.int64)
        return Run(list(self.qids), offsets, ids, score[mask].astype(np.float64), name=name)

    def run(self, state: _State | None = None, name: str = "K") -> Run:
        """The top-`depth` run of a state (default: K)."""
        s = state or self.base
        return self._run(s.pos, s.score, s.lengths, self.depth, name)

    @property
    def before(self) -> dict[str, float]:
        """Metric means over the evaluation queries with K (and context recall, when configured)."""
        out = {m: float(self.base.values[:, j].mean()) for j, m in enumerate(self.metric_names)}
        if self.context is not None and self.has_ref.any():
            out["context_recall"] = float(np.nanmean(self.base.cr[self.has_ref]))
        return out

    # -- insertion -----------------------------------------------------------------------------------
    def _positions(self, st: _State, qi: np.ndarray, s: np.ndarray, cid: Sequence[str]) -> np.ndarray:
        """0-based rank a new doc would take in each row (trec_eval order: score desc, then doc id desc)."""
        row_scores = st.score[qi]
        p = (row_scores > s[:, None]).sum(axis=1)
        eq = row_scores == s[:, None]
        for r in np.flatnonzero(eq.any(axis=1)).tolist():
            for j in np.flatnonzero(eq[r]).tolist():
                if self.ids[st.pos[qi[r], j]] > cid[r]:
                    p[r] += 1
        return p

    def _insert(
        self, st: _State, qi: np.ndarray, p: np.ndarray, new_pos: np.ndarray, s: np.ndarray, g: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Rows with a new doc at rank p (everything below shifts down one; the last entry falls off)."""
        J = np.arange(self.width)[None, :]
        src = np.where(p[:, None] > J, J, J - 1).clip(0)
        at = p[:, None] == J
        pos = np.where(at, new_pos[:, None], st.pos[qi[:, None], src])
        score = np.where(at, s[:, None], st.score[qi[:, None], src])
        gains = np.where(at, g[:, None], st.gains[qi[:, None], src])
        lengths = np.minimum(st.lengths[qi] + 1, self.width)
        return pos, score.astype(np.float32), gains, lengths

    def _context_after(self, st: _State, qi: np.ndarray, p: np.ndarray, cid: Sequence[str]) -> np.ndarray:
        """Context recall of rows once a candidate is at rank p (NaN without references; old value if p >= context_k)."""
        out = st.cr[qi].copy()
        if self.context is None:
            return out
        k = self.context_k
        todo = np.flatnonzero(self.has_ref[qi] & (p < k))
        ctxs = []
        for t in todo.tolist():
            r = qi[t]
            old = self._row_ids(st.pos[r], int(st.lengths[r]), k)
            ctxs.append((t, [*old[: p[t]], cid[t], *old[p[t] :]][:k]))
        self.context.prepare([d for _, ctx in ctxs for d in ctx])
        for t, ctx in ctxs:
            out[t] = self.context.score(self.qids[qi[t]], ctx)
        return out

    def _pairs(
        self, st: _State, qi: np.ndarray, cid: list[str], s: np.ndarray, new_pos: np.ndarray, limit: int
    ) -> dict[str, Any]:
        """Evaluate the (row, candidate) pairs whose candidate enters the top `limit`."""
        p = self._positions(st, qi, s, cid)
        keep = p < limit
        qi, p, s, new_pos = qi[keep], p[keep], s[keep], new_pos[keep]
        cid = [c for c, k in zip(cid, keep.tolist(), strict=True) if k]
        g = self._grades(qi, cid)
        pos, score, gains, lengths = self._insert(st, qi, p, new_pos, s, g)
        after = self._values(pair_gain_matrix(self.gm, qi, gains, lengths))
        cr = self._context_after(st, qi, p, cid)
        return {
            "qi": qi,
            "keep": keep,
            "p": p,
            "pos": pos,
            "score": score,
            "gains": gains,
            "lengths": lengths,
            "after": after,
            "cr": cr,
        }

    # -- modes -----------------------------------------------------------------------------------------
    def alone(
        self, cand_ids: Sequence[str], cand_vectors: np.ndarray, skip: Sequence[bool] | None = None
    ) -> list[Impact]:
        """Each candidate against K. `skip` marks no-op candidates (already present): their deltas are 0."""
        st = self.base
        cand_ids = [str(c) for c in cand_ids]
        C = np.ascontiguousarray(np.asarray(cand_vectors, dtype=np.float32).reshape(len(cand_ids), -1))
        kth = st.score[:, self.depth - 1]
        mask = (kth - _slack(kth))[:, None] <= self.Q @ C.T  # a fast screen; the pairs it passes are scored exactly
        mask[:, self._noop(cand_ids, skip)] = False
        qi, ci = np.nonzero(mask)
        s = _dot(self.Q[qi], C[ci])
        res = self._pairs(st, qi, [cand_ids[c] for c in ci.tolist()], s, np.full(len(qi), -1), self.depth)
        ci = ci[res["keep"]]
        delta = res["after"] - st.values[res["qi"]]
        dcr = res["cr"] - st.cr[res["qi"]]
        return self._collect("alone", cand_ids, res["qi"], ci, delta, dcr, np.ones(len(ci), dtype=bool))

    def _noop(self, cand_ids: Sequence[str], skip: Sequence[bool] | None) -> np.ndarray:
        """Candidates that change nothing: marked by the caller, or whose id is already in K (never counted twice)."""
        present = np.array([c in self.pos_of for c in cand_ids], dtype=bool)
        return present | np.asarray(skip, dtype=bool) if skip is not None else present

    def after_run(self, cand_ids: Sequence[str], cand_vectors: np.ndarray) -> Run:
        """The top-`depth` run of K plus these documents (added in order), by merges; for checks and reports."""
        st = self.base.copy()
        for c, v in zip(cand_ids, np.asarray(cand_vectors, dtype=np.float32).reshape(len(cand_ids), -1), strict=True):
            self._apply(st, str(c), v)
        return self.run(st, name="K+d")

    def _apply(self, st: _State, cid: str, vec: np.ndarray) -> tuple[dict[str, Any], np.ndarray]:
        """Ingest one document into a state (exact merge into every row it enters)."""
        kth = st.score[:, self.width - 1]
        qi = np.flatnonzero(self.Q @ vec >= kth - _slack(kth))
        s = _dot(self.Q[qi], np.broadcast_to(vec, (len(qi), len(vec))))
        new = len(self.ids)
        self.ids.append(cid)
        res = self._pairs(st, qi, [cid] * len(qi), s, np.full(len(qi), new), self.width)
        before = st.values[res["qi"]].copy(), st.cr[res["qi"]].copy()
        rows = res["qi"]
        st.pos[rows], st.score[rows], st.gains[rows], st.lengths[rows] = (
            res["pos"],
            res["score"],
            res["gains"],
            res["lengths"],
        )
        st.values[rows], st.cr[rows] = res["after"], res["cr"]
        return res, np.concatenate([before[0], before[1][:, None]], axis=1)

    def _forget(self, n_ids: int) -> None:
        """Drop doc ids appended by a sequential pass (the base state never refers to them)."""
        del self.ids[n_ids:]

    def sequential(
        self, cand_ids: Sequence[str], cand_vectors: np.ndarray, skip: Sequence[bool] | None = None
    ) -> list[Impact]:
        """Candidates ingested one after another: each against K plus the candidates before it (skipped ones stay out)."""
        st = self.base.copy()
        n_ids = len(self.ids)
        cand_ids = [str(c) for c in cand_ids]
        C = np.asarray(cand_vectors, dtype=np.float32).reshape(len(cand_ids), -1)
        noop = self._noop(cand_ids, skip)
        parts: list[tuple[np.ndarray, ...]] = []
        afters: list[dict[str, float]] = []
        m = len(self.specs)
        try:
            for c, cid in enumerate(cand_ids):
                if not noop[c]:
                    res, before = self._apply(st, cid, C[c])
                    parts.append(
                        (
                            res["qi"],
                            np.full(len(res["qi"]), c),
                            res["after"] - before[:, :m],
                            res["cr"] - before[:, m],
                            res["p"] < self.depth,
                        )
                    )
                afters.append(self._means(st))
        finally:
            self._forget(n_ids)
        out = self._collect("sequential", cand_ids, *self._cat(parts))
        for imp, a in zip(out, afters, strict=True):
            imp.after = a
        return out

    def _means(self, st: _State) -> dict[str, float]:
        out = {m: float(st.values[:, j].mean()) for j, m in enumerate(self.metric_names)}
        if self.context is not None and self.has_ref.any():
            out["context_recall"] = float(np.nanmean(st.cr[self.has_ref]))
        return out

    def leave_one_out(self, doc_ids: Sequence[str]) -> list[Impact]:
        """For documents in K: M(K) - M(K - {d}) (what each contributes); rows lose d and take up their next doc."""
        st = self.base
        doc_ids = [str(d) for d in doc_ids]
        missing = [d for d in doc_ids if d not in self.pos_of]
        if missing:
            raise InputError(
                f"leave-one-out documents not in the knowledge base: {', '.join(missing[:5])}", field="leave_one_out"
            )
        which = np.full(len(self.ids), -1, dtype=np.int64)
        which[[self.pos_of[d] for d in doc_ids]] = np.arange(len(doc_ids))
        hit = (st.pos[:, : self.depth] >= 0) & (which[np.maximum(st.pos[:, : self.depth], 0)] >= 0)
        qi, p = np.nonzero(hit)
        ci = which[st.pos[qi, p]]
        J = np.arange(self.width)[None, :]
        src = np.where(p[:, None] > J, J, J + 1)
        valid = src < self.width
        src = src.clip(max=self.width - 1)
        gains = np.where(valid, st.gains[qi[:, None], src], 0.0)
        lengths = st.lengths[qi] - 1
        after = self._values(pair_gain_matrix(self.gm, qi, gains, lengths))
        cr = st.cr[qi].copy()
        if self.context is not None:
            k = self.context_k
            ctxs = []
            for t in np.flatnonzero(self.has_ref[qi] & (p < k)).tolist():
                ids = self._row_ids(st.pos[qi[t]], int(st.lengths[qi[t]]), k + 1)
                ctxs.append((t, [d for j, d in enumerate(ids) if j != p[t]][:k]))
            self.context.prepare([d for _, ctx in ctxs for d in ctx])
            for t, ctx in ctxs:
                cr[t] = self.context.score(self.qids[qi[t]], ctx)
        delta = st.values[qi] - after
        dcr = st.cr[qi] - cr
        return self._collect("leave_one_out", doc_ids, qi, ci, delta, dcr, np.ones(len(qi), dtype=bool))
