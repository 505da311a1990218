"""What every passage judge shares: the Judgement (a GainMatrix plus matched gold items) and item metrics.

A Judgement is relevance for `retbench.evaluation.evaluate`, as qrels are: the same counting rules,
the same registry metrics, with recall, recall_any, recall_all and f1 counting gold items.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

import retbench.metrics.ranking as ranking
from retbench.chunkers import ChunkSet
from retbench.data import Run
from retbench.metrics.gain import GainMatrix

NEVER = np.iinfo(np.int64).max
Groups = Mapping[str, Sequence[Sequence[int]]]


# -- ranked entries ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class _Entries:
    """Every ranked position of the judged queries: row (query), 0-based rank, index into the run."""

    rows: np.ndarray
    ranks: np.ndarray
    index: np.ndarray
    lengths: np.ndarray


def _entries(run: Run, qids: Sequence[str]) -> _Entries:
    pos = run.rows(qids)
    run_len = np.diff(run.offsets)
    lengths = np.where(pos >= 0, run_len[np.maximum(pos, 0)] if len(run_len) else 0, 0).astype(np.int64)
    starts = np.where(pos >= 0, run.offsets[np.maximum(pos, 0)], 0)
    total = int(lengths.sum())
    rows = np.repeat(np.arange(len(qids), dtype=np.int64), lengths)
    before = np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int64) if len(qids) else np.zeros(0, np.int64)
    ranks = np.arange(total, dtype=np.int64) - np.repeat(before, lengths)
    index = np.repeat(starts, lengths) + ranks
    return _Entries(rows, ranks, index.astype(np.int64), lengths)


def _chunk_rows(run: Run, ent: _Entries, chunks: ChunkSet) -> np.ndarray:
    """ChunkSet row of each ranked entry; an id that is not a chunk of the set is an error."""
    pos = chunks.positions(run.doc_ids[ent.index].tolist())
    if (pos < 0).any():
        bad = run.doc_ids[ent.index][pos < 0][0]
        raise ValueError(f"run {run.name!r} ranks {bad!r}, which is not a chunk of this chunk set")
    return pos


def _pad(items: Sequence[Sequence[object]], fill: object, dtype: object) -> np.ndarray:
    """Ragged per-query lists as a [n_queries, max_items] array filled with `fill`."""
    width = max((len(x) for x in items), default=0)
    out = np.full((len(items), width), fill, dtype=dtype)  # type: ignore[call-overload]
    for i, row in enumerate(items):
        if len(row):
            out[i, : len(row)] = row
    return out


def _block_pairs(n_pool: int, n_items: int, test: Callable[[slice], np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """All (pool element, gold item) pairs where `test(items)` ([n_pool, block] bool) holds.

    Gold items are taken in blocks so memory stays near 4M cells whatever the collection size.
    """
    block = max(1, 4_000_000 // max(n_pool, 1))
    pool_idx, item_idx = [np.zeros(0, np.int64)], [np.zeros(0, np.int64)]
    for start in range(0, n_items, block):
        p, t = np.nonzero(test(slice(start, min(start + block, n_items))))
        pool_idx.append(p)
        item_idx.append(t + start)
    return np.concatenate(pool_idx), np.concatenate(item_idx)


def _pool_counts(
    n: int, item_rows: np.ndarray, pair_items: np.ndarray, pair_pool: np.ndarray, pool_size: int
) -> np.ndarray:
    """Per query, how many distinct pool elements (chunks of the collection) match one of its items."""
    size = max(pool_size, 1)
    keys = np.unique(item_rows[pair_items].astype(np.int64) * size + pair_pool)
    return np.bincount(keys // size, minlength=n).astype(np.int64)


def _supports(
    n_items: np.ndarray,
    item_row: np.ndarray,
    item_col: np.ndarray,
    pair_item: np.ndarray,
    pair_pool: np.ndarray,
    ids: Sequence[str],
) -> list[list[list[str]]]:
    """Per query, per gold item, the ids of the pool elements matching it (from a judge's (pool, item) pairs)."""
    out: list[list[list[str]]] = [[[] for _ in range(int(c))] for c in n_items]
    for p, t in zip(pair_pool.tolist(), pair_item.tolist(), strict=True):
        out[int(item_row[t])][int(item_col[t])].append(ids[p])
    return out


# -- the judgement ----------------------------------------------------------------------------------
class Judgement:
    """A judge's verdict: the gain matrix plus, per gold item, the first rank that matched it."""

    def __init__(
        self,
        query_ids: Sequence[str],
        ent: _Entries,
        match: np.ndarray,
        n_items: np.ndarray,
        pool: np.ndarray | None = None,
        groups: list[list[list[int]]] | None = None,
        supports: list[list[list[str]]] | None = None,
    ) -> None:
        n = len(query_ids)
        n_items = np.asarray(n_items, dtype=np.int64)
        width = match.shape[1] if match.ndim == 2 else 0
        hit = match.any(axis=1) if width else np.zeros(len(ent.rows), dtype=bool)
        # relevant chunks in the collection; never fewer than were retrieved (ranked ids outside the pool)
        found = np.bincount(ent.rows[hit], minlength=n)
        self.n_relevant_chunks = np.maximum(found, n_items if pool is None else np.asarray(pool, dtype=np.int64))
        ideal_offsets = np.concatenate([[0], np.cumsum(self.n_relevant_chunks)]).astype(np.int64)
        self.gains = GainMatrix.from_hits(
            list(query_ids),
            ent.rows[hit],
            ent.ranks[hit],
            np.ones(int(hit.sum())),
            ent.lengths,
            ideal_offsets,
            np.ones(int(ideal_offsets[-1])),
        )
        self.n_items = n_items
        self.first_rank = np.full((n, max(width, int(n_items.max(initial=0)))), NEVER, dtype=np.int64)
        e, g = np.nonzero(match)
        np.minimum.at(self.first_rank, (ent.rows[e], g), ent.ranks[e])
        # one group per item unless the gold says which items stand in for each other
        self.groups = groups or [[[j] for j in range(int(c))] for c in n_items]
        # per query, per gold item: the ids of the collection's chunks that match it (None: the judge does not
        # say); scope_miss_rate reads them to ask whether a gold item lies inside a chosen scope
        self.supports = supports

    @property
    def query_ids(self) -> list[str]:
        return self.gains.query_ids

    def take(self, rows: np.ndarray) -> Judgement:
        """The judgement of the given rows (queries), in the given order."""
        rows = np.asarray(rows, dtype=np.int64)
        out = object.__new__(Judgement)
        out.gains = self.gains.take(rows)
        out.n_relevant_chunks = self.n_relevant_chunks[rows]
        out.n_items = self.n_items[rows]
        out.first_rank = self.first_rank[rows]
        out.groups = [self.groups[r] for r in rows.tolist()]
        out.supports = None if self.supports is None else [self.supports[r] for r in rows.tolist()]
        return out

    def __len__(self) -> int:
        return len(self.gains)

    def cutoffs(self, k: int | np.ndarray | None) -> np.ndarray | None:
        """A per-query cutoff array from an int (same k for all), an array, or None (uncut)."""
        if k is None:
            return None
        if np.isscalar(k):
            return np.full(len(self), int(k), dtype=np.int64)  # type: ignore[arg-type]
        return np.asarray(k, dtype=np.int64)

    def _found(self, k: int | np.ndarray | None) -> np.ndarray:
        kk = self.cutoffs(k)
        limit = np.full(len(self), NEVER - 1, dtype=np.int64) if kk is None else kk
        return self.first_rank < limit[:, None]

    def recall(self, k: int | np.ndarray | None = None) -> np.ndarray:
        """Share of each query's gold items matched by some top-k chunk (0 with no items)."""
        found = self._found(k).sum(axis=1).astype(np.float64)
        return np.asarray(np.divide(found, self.n_items, out=np.zeros(len(self)), where=self.n_items > 0))

    def recall_any(self, k: int | np.ndarray | None = None) -> np.ndarray:
        """1 when some gold item is matched in the top k (recall_any)."""
        return np.asarray(self._found(k).any(axis=1), dtype=np.float64)

    def recall_all(self, k: int | np.ndarray | None = None) -> np.ndarray:
        """1 when every support group has a matched item in the top k (recall_all).

        Groups list item indexes that stand in for one another; without groups every item is
        required. A query without gold items scores 0.
        """
        found = self._found(k)
        out = np.zeros(len(self))
        for i, groups in enumerate(self.groups):  # groups are few and small: one pass per query
            out[i] = float(bool(groups) and all(found[i, g].any() for g in groups if g))
        return out

    def precision(self, k: int | np.ndarray) -> np.ndarray:
        """Relevant chunks in the top k / k."""
        return ranking.precision(self.gains, self.cutoffs(k))  # type: ignore[arg-type]

    def f1(self, k: int | np.ndarray) -> np.ndarray:
        """Harmonic mean of `precision` and item `recall` at k: 2PR / (P + R), 0 when both are 0."""
        p, r = self.precision(k), self.recall(k)
        return np.divide(2 * p * r, p + r, out=np.zeros(len(self)), where=(p + r) > 0)

    def mrr(self, k: int | np.ndarray | None = None) -> np.ndarray:
        """1 / rank of the first relevant chunk (0 when none in the top k)."""
        return ranking.reciprocal_rank(self.gains, self.cutoffs(k))


# metrics that count gold items rather than relevant chunks when `evaluate` is given a Judgement
# (their registry rows in metrics/retrieval.py read `MetricContext.items`)
ITEM_METRICS = ("recall", "recall_any", "recall_all", "f1")


def _check_groups(
    qids: Sequence[str], n_items: Sequence[int] | np.ndarray, groups: Groups | None
) -> list[list[list[int]]] | None:
    if groups is None:
        return None
    out: list[list[list[int]]] = []
    for q, n in zip(qids, n_items, strict=True):
        qg = [list(g) for g in groups.get(q, [])] or [[j] for j in range(n)]
        for g in qg:
            for j in g:
                if not 0 <= j < n:
                    raise ValueError(f"support group of query {q!r} names item {j}, but it has {n} gold items")
        out.append(qg)
    return out


# -- spans ------------------------------------------------------------------------------------------
