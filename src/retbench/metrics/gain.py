"""The GainMatrix: the graded relevance of the document at each rank, behind every rank metric.

For each query (row) it holds the grade of the document at each rank (0 when unjudged or not
relevant), how many documents the system returned, and the query's ideal grades (all positive judged
grades, sorted descending) from which relevant counts at any level and ideal DCG follow.

The measures made for incomplete judgements (bpref, infAP, trec_eval's `-J`) must tell a document judged
not relevant from one nobody judged, so the matrix also keeps, sparse like the hits, where the ranked
documents judged 0 sit (`zero_rows`/`zero_ranks`), where those with a negative judgement sit (trec_eval
reads a negative grade as "in the pool but not judged": `pool_rows`/`pool_ranks`), and how many
documents each query has judged 0 (`n_zero`). A matrix built without them (a passage judge) has none:
every ranked document that is not a hit then reads as unjudged.

Internally the matrix is kept sparse (one entry per relevant ranked document) because rankings are
deep (1,000 docs) and relevant documents few: metrics then cost time in proportion to the number of
hits, not to the number of ranked documents. The dense `gains` array is built on first use.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def _csr_from_lists(ideal: Sequence[Sequence[float]] | np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Per-query grade lists (or a padded 2-D array) -> (offsets, positive grades sorted descending per query)."""
    rows = list(ideal)
    if len(rows) != n:
        raise ValueError(f"ideal has {len(rows)} rows, expected {n} (one per query)")
    lengths = np.fromiter((len(r) for r in rows), dtype=np.int64, count=n)
    flat = np.concatenate([np.asarray(r, dtype=np.float64).ravel() for r in rows]) if n else np.zeros(0)
    row = np.repeat(np.arange(n, dtype=np.int64), lengths)
    return _ideal_csr(row, flat, n)


def pair_order(major: np.ndarray, minor: np.ndarray) -> np.ndarray:
    """`np.lexsort((minor, major))` for non-negative integer columns (rows and ranks): the same stable
    order from one stable argsort of `major * (max(minor) + 1) + minor`, several times faster (and
    near-linear for pairs already nearly in order, as located hits are)."""
    major, minor = np.asarray(major, dtype=np.int64), np.asarray(minor, dtype=np.int64)
    if len(major) == 0:
        return np.zeros(0, dtype=np.int64)
    span = int(minor.max()) + 1
    if int(minor.min()) < 0 or int(major.min()) < 0 or int(major.max()) >= (2**62) // span:
        return np.lexsort((minor, major))
    return np.argsort(major * span + minor, kind="stable")


def _ideal_csr(row: np.ndarray, grades: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    keep = grades > 0
    row, grades = row[keep], grades[keep]
    top = grades.max() if len(grades) else 0.0
    if len(grades) and top < 2**31 and bool(np.all(grades == np.trunc(grades))):  # integer grades (qrels')
        order = pair_order(row, (top - grades).astype(np.int64))  # row ascending, grade descending
    else:
        order = np.lexsort((-grades, row))
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(row, minlength=n), out=offsets[1:])
    return offsets, grades[order]


class GainMatrix:
    """Grades by rank for each query, plus each query's ideal grades.

    Build it dense, the simple way a new judge should::

        GainMatrix(query_ids, gains, ideal, lengths)

    - `gains`: float [n_queries, depth], the grade of the document at rank r+1 of query i
      (0 when unjudged or not relevant; negative grades are treated as 0, as trec_eval does);
    - `ideal`: per query, the grades of *all* relevant items (retrieved or not) in any order,
      as a list of sequences or a zero-padded 2-D array; only positive grades are kept;
    - `lengths`: how many documents the system returned per query (default: `depth` each).

    Judges that know the hits directly use `GainMatrix.from_hits` (no dense array at all).
    """

    def __init__(
        self,
        query_ids: Sequence[str],
        gains: np.ndarray,
        ideal: Sequence[Sequence[float]] | np.ndarray,
        lengths: Sequence[int] | np.ndarray | None = None,
    ) -> None:
        g = np.asarray(gains, dtype=np.float64)
        n = len(query_ids)
        if g.ndim != 2 or g.shape[0] != n:
            raise ValueError(f"gains must be 2-D with one row per query ({n}), got shape {g.shape}")
        rows, ranks = np.nonzero(g > 0)
        lens = np.full(n, g.shape[1], dtype=np.int64) if lengths is None else np.asarray(lengths, dtype=np.int64)
        offsets, grades = _csr_from_lists(ideal, n)
        self._init(list(query_ids), rows, ranks, g[rows, ranks], lens, offsets, grades, g.shape[1])

    @classmethod
    def from_hits(
        cls,
        query_ids: Sequence[str],
        rows: np.ndarray,
        ranks: np.ndarray,
        grades: np.ndarray,
        lengths: np.ndarray,
        ideal_offsets: np.ndarray,
        ideal_grades: np.ndarray,
    ) -> GainMatrix:
        """From sparse hits: `rows`, 0-based `ranks` and positive `grades` of relevant ranked documents,
        and the ideal grades in CSR form (`ideal_offsets` [n+1], grades sorted descending per query)."""
        self = cls.__new__(cls)
        lengths = np.asarray(lengths, dtype=np.int64)
        depth = int(lengths.max()) if len(lengths) else 0
        rows = np.asarray(rows, dtype=np.int64)
        ranks = np.asarray(ranks, dtype=np.int64)
        grades = np.asarray(grades, dtype=np.float64)
        keep = grades > 0
        if not keep.all():
            rows, ranks, grades = rows[keep], ranks[keep], grades[keep]
        order = pair_order(rows, ranks)
        self._init(
            list(query_ids),
            rows[order],
            ranks[order],
            grades[order],
            lengths,
            np.asarray(ideal_offsets, dtype=np.int64),
            np.asarray(ideal_grades, dtype=np.float64),
            depth,
        )
        return self

    def _init(
        self,
        query_ids: list[str],
        rows: np.ndarray,
        ranks: np.ndarray,
        grades: np.ndarray,
        lengths: np.ndarray,
        ideal_offsets: np.ndarray,
        ideal_grades: np.ndarray,
        depth: int,
    ) -> None:
        n = len(query_ids)
        if len(lengths) != n or len(ideal_offsets) != n + 1:
            raise ValueError("lengths and ideal offsets must have one entry per query")
        self.query_ids = query_ids
        self.hit_rows = rows.astype(np.int64, copy=False)
        self.hit_ranks = ranks.astype(np.int64, copy=False)
        self.hit_grades = grades
        self.lengths = lengths
        self.ideal_offsets = ideal_offsets
        self.ideal_grades = ideal_grades
        self.depth = int(depth)
        self._dense: np.ndarray | None = None
        empty = np.zeros(0, dtype=np.int64)
        self.zero_rows, self.zero_ranks, self.pool_rows, self.pool_ranks = empty, empty, empty, empty
        self.n_zero = np.zeros(n, dtype=np.int64)

    def with_judged(
        self,
        zero: tuple[np.ndarray, np.ndarray],
        pool: tuple[np.ndarray, np.ndarray],
        n_zero: np.ndarray,
    ) -> GainMatrix:
        """Attach (in place; returns self) the ranked documents judged 0 and those judged negative (each as
        (rows, 0-based ranks), any order), and each query's count of grade-0 judgements."""
        self.zero_rows, self.zero_ranks = _sorted_pairs(*zero)
        self.pool_rows, self.pool_ranks = _sorted_pairs(*pool)
        self.n_zero = np.asarray(n_zero, dtype=np.int64)
        return self

    def condensed(self) -> GainMatrix:
        """The judged documents only, ranked in their order (trec_eval `-J`; the condensed lists of Sakai and
        Kando 2008): unjudged and negatively judged documents are removed before any measure is computed."""
        rows = np.concatenate([self.hit_rows, self.zero_rows])
        ranks = np.concatenate([self.hit_ranks, self.zero_ranks])
        is_hit = np.arange(len(rows)) < len(self.hit_rows)
        order = pair_order(rows, ranks)
        rows, is_hit = rows[order], is_hit[order]
        counts = np.bincount(rows, minlength=len(self)).astype(np.int64)
        starts = np.zeros(len(self), dtype=np.int64)
        np.cumsum(counts[:-1], out=starts[1:])
        new_rank = np.arange(len(rows), dtype=np.int64) - starts[rows]
        grades = self.hit_grades[order[is_hit]]
        empty = np.zeros(0, dtype=np.int64)
        out = GainMatrix.from_hits(
            self.query_ids, rows[is_hit], new_rank[is_hit], grades, counts, self.ideal_offsets, self.ideal_grades
        )
        return out.with_judged((rows[~is_hit], new_rank[~is_hit]), (empty, empty), self.n_zero)

    def shifted(self) -> GainMatrix:
        """Every judged document's grade raised by 1 (grade 0 becomes 1; negative grades stay unjudged): a binary
        measure at level 1 of this matrix is that measure at level 0 of this one (trec_eval -l 0, where every
        judged document is relevant). The graded measures keep reading the grades themselves."""
        rows = np.concatenate([self.hit_rows, self.zero_rows])
        ranks = np.concatenate([self.hit_ranks, self.zero_ranks])
        grades = np.concatenate([self.hit_grades + 1.0, np.ones(len(self.zero_rows))])
        ideal_rows = np.concatenate([self.ideal_rows, np.repeat(np.arange(len(self), dtype=np.int64), self.n_zero)])
        ideal = np.concatenate([self.ideal_grades + 1.0, np.ones(int(self.n_zero.sum()))])
        offsets, ideal_sorted = _ideal_csr(ideal_rows, ideal, len(self))
        empty = np.zeros(0, dtype=np.int64)
        out = GainMatrix.from_hits(self.query_ids, rows, ranks, grades, self.lengths, offsets, ideal_sorted)
        return out.with_judged((empty, empty), (self.pool_rows, self.pool_ranks), np.zeros(len(self), dtype=np.int64))

    # -- shape and views --------------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self.query_ids)

    @property
    def gains(self) -> np.ndarray:
        """Dense float64 [n_queries, depth] grades by rank (built on first use)."""
        if self._dense is None:
            dense = np.zeros((len(self), self.depth), dtype=np.float64)
            dense[self.hit_rows, self.hit_ranks] = self.hit_grades
            self._dense = dense
        return self._dense

    def ideal(self, i: int) -> np.ndarray:
        """Positive grades of query i's relevant items, sorted descending (the ideal ranking)."""
        return self.ideal_grades[self.ideal_offsets[i] : self.ideal_offsets[i + 1]]

    @property
    def ideal_rows(self) -> np.ndarray:
        """Row index of each entry of `ideal_grades`."""
        return np.repeat(np.arange(len(self), dtype=np.int64), np.diff(self.ideal_offsets))

    @property
    def ideal_positions(self) -> np.ndarray:
        """0-based position of each entry of `ideal_grades` within its query's ideal ranking."""
        return np.arange(len(self.ideal_grades), dtype=np.int64) - np.repeat(
            self.ideal_offsets[:-1], np.diff(self.ideal_offsets)
        )

    def n_relevant(self, level: int = 1) -> np.ndarray:
        """Per query, the number of judged items with grade >= level (trec_eval's num_rel)."""
        check_level(level)
        return np.bincount(self.ideal_rows[self.ideal_grades >= level], minlength=len(self)).astype(np.int64)

    def n_nonrelevant(self, level: int = 1) -> np.ndarray:
        """Per query, the judged documents below `level` (grade 0 included, negative grades not): bpref's N."""
        check_level(level)
        below = np.bincount(self.ideal_rows[self.ideal_grades < level], minlength=len(self)).astype(np.int64)
        return self.n_zero + below

    def take(self, rows: np.ndarray | Sequence[int]) -> GainMatrix:
        """A gain matrix of the given rows, in the given order."""
        rows = np.asarray(rows, dtype=np.int64)
        n = len(self)
        new_of_old = np.full(n, -1, dtype=np.int64)
        new_of_old[rows] = np.arange(len(rows))
        if len(np.unique(rows)) != len(rows):
            raise ValueError("take() rows must be distinct")
        sel = new_of_old[self.hit_rows] >= 0
        irow = self.ideal_rows
        isel = new_of_old[irow] >= 0
        off, gr = _ideal_csr(new_of_old[irow[isel]], self.ideal_grades[isel], len(rows))
        z = new_of_old[self.zero_rows] >= 0
        pl = new_of_old[self.pool_rows] >= 0
        zero = (new_of_old[self.zero_rows[z]], self.zero_ranks[z])
        pool = (new_of_old[self.pool_rows[pl]], self.pool_ranks[pl])
        return GainMatrix.from_hits(
            [self.query_ids[r] for r in rows],
            new_of_old[self.hit_rows[sel]],
            self.hit_ranks[sel],
            self.hit_grades[sel],
            self.lengths[rows],
            off,
            gr,
        ).with_judged(zero, pool, self.n_zero[rows])

    def __repr__(self) -> str:
        return f"GainMatrix(queries={len(self)}, depth={self.depth}, hits={len(self.hit_rows)}, judged_relevant={len(self.ideal_grades)})"


def _sorted_pairs(rows: np.ndarray, ranks: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    rows, ranks = np.asarray(rows, dtype=np.int64), np.asarray(ranks, dtype=np.int64)
    order = pair_order(rows, ranks)
    return rows[order], ranks[order]


def check_level(level: float) -> None:
    """Relevance levels start at 1: grade 0 means 'not relevant' and unjudged documents read as 0."""
    if int(level) != level or level < 1:
        raise ValueError(f"relevance level must be an integer >= 1, got {level!r}")
