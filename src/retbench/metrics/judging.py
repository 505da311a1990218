"""Judging: turn a Run and some notion of relevance into a gain matrix.

Every rank metric in retbench is a vectorized function of one object, the `GainMatrix`: for each
query (row) the grade of the document at each rank (0 when unjudged or not relevant), how many
documents the system returned, and the query's ideal grades (all positive judged grades, sorted
descending) from which relevant counts at any level and ideal DCG follow.

Judges differ only in how they decide the grade of a ranked document: `judge_qrels` looks doc ids
up in TREC-style qrels; span, anchor and cosine judges (see `chunking`) build the same object.

Internally the matrix is kept sparse (one entry per relevant ranked document) because rankings are
deep (1,000 docs) and relevant documents few: metrics then cost time in proportion to the number of
hits, not to the number of ranked documents. The dense `gains` array is built on first use.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from itertools import chain, repeat

import numpy as np

from retbench.data import Qrels, Run, _MappingIds
from retbench.keys import key_strings, lookup

__all__ = ["GainMatrix", "judge_qrels"]


def _csr_from_lists(ideal: Sequence[Sequence[float]] | np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Per-query grade lists (or a padded 2-D array) -> (offsets, positive grades sorted descending per query)."""
    rows = list(ideal)
    if len(rows) != n:
        raise ValueError(f"ideal has {len(rows)} rows, expected {n} (one per query)")
    lengths = np.fromiter((len(r) for r in rows), dtype=np.int64, count=n)
    flat = np.concatenate([np.asarray(r, dtype=np.float64).ravel() for r in rows]) if n else np.zeros(0)
    row = np.repeat(np.arange(n, dtype=np.int64), lengths)
    return _ideal_csr(row, flat, n)


def _ideal_csr(row: np.ndarray, grades: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    keep = grades > 0
    row, grades = row[keep], grades[keep]
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
        order = np.lexsort((ranks, rows))
        self._init(list(query_ids), rows[order], ranks[order], grades[order], lengths,
                   np.asarray(ideal_offsets, dtype=np.int64), np.asarray(ideal_grades, dtype=np.float64), depth)
        return self

    def _init(self, query_ids: list[str], rows: np.ndarray, ranks: np.ndarray, grades: np.ndarray,
              lengths: np.ndarray, ideal_offsets: np.ndarray, ideal_grades: np.ndarray, depth: int) -> None:
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
        return np.arange(len(self.ideal_grades), dtype=np.int64) - np.repeat(self.ideal_offsets[:-1], np.diff(self.ideal_offsets))

    def n_relevant(self, level: int = 1) -> np.ndarray:
        """Per query, the number of judged items with grade >= level (trec_eval's num_rel)."""
        check_level(level)
        return np.bincount(self.ideal_rows[self.ideal_grades >= level], minlength=len(self)).astype(np.int64)

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
        return GainMatrix.from_hits(
            [self.query_ids[r] for r in rows], new_of_old[self.hit_rows[sel]], self.hit_ranks[sel],
            self.hit_grades[sel], self.lengths[rows], off, gr,
        )

    def __repr__(self) -> str:
        return f"GainMatrix(queries={len(self)}, depth={self.depth}, hits={len(self.hit_rows)}, judged_relevant={len(self.ideal_grades)})"


def check_level(level: int) -> None:
    """Relevance levels start at 1: grade 0 means 'not relevant' and unjudged documents read as 0."""
    if int(level) != level or level < 1:
        raise ValueError(f"relevance level must be an integer >= 1, got {level!r}")


def _flatten(table: Mapping[str, Mapping[str, int]], query_ids: Sequence[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(row, doc id, grade) of every judgement of the given queries, built by C-level iteration."""
    empty: Mapping[str, int] = {}
    judged = [table.get(q, empty) for q in query_ids]
    lengths = np.fromiter(map(len, judged), dtype=np.int64, count=len(judged))
    total = int(lengths.sum())
    docs = np.fromiter(chain.from_iterable(judged), dtype=object, count=total)
    grades = np.fromiter(chain.from_iterable(j.values() for j in judged), dtype=np.float64, count=total)
    return np.repeat(np.arange(len(judged), dtype=np.int64), lengths), docs, grades


def _flatten_qrels(qrels: Mapping[str, Mapping[str, int]], query_ids: Sequence[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(row, doc id, grade) of every positive judgement of the given queries."""
    rows, docs, grades = qrels.columns(query_ids) if isinstance(qrels, Qrels) else _flatten(qrels, query_ids)
    keep = grades > 0  # a plain mapping's grades stay as given (floats too); a Qrels' are integers
    return rows[keep], docs[keep], grades[keep].astype(np.float64)


def run_rows(run: Run, query_ids: Sequence[str]) -> np.ndarray:
    """The run's row of each query id (-1 where the run has no such query)."""
    if len(query_ids) == len(run.query_ids) and list(query_ids) == run.query_ids:  # the same queries, in order
        return np.arange(len(query_ids), dtype=np.int64)
    return np.fromiter(map(run._pos.get, query_ids, repeat(-1)), dtype=np.int64, count=len(query_ids))


def judge_qrels(
    run: Run,
    qrels: Qrels | Mapping[str, Mapping[str, int]],
    query_ids: Sequence[str] | None = None,
    rows: np.ndarray | None = None,
) -> GainMatrix:
    """Grade each ranked document by the qrels: one row per query in `query_ids` (default: qrels order).

    Work is proportional to the number of judgements wherever the run allows it: a run built from
    `{qid: {doc: score}}` mappings answers "is this judged doc ranked, and with what score?" by one
    dict lookup, and its rank follows from a vectorized binary search over the query's sorted
    scores; a run read from a TREC file finds them by a hash lookup over its doc keys; a run whose doc
    codes are already interned needs one gather over those codes; any other run is scanned once,
    looking each ranked doc up among the judged ids only. A query absent from the run gets an empty
    row (length 0). `rows`: the run's row of each query id, when the caller has them already.
    """
    qids = list(qrels) if query_ids is None else list(query_ids)
    n = len(qids)
    jrow, jdocs, jgrade = _flatten_qrels(qrels, qids)
    ideal_offsets, ideal_grades = _ideal_csr(jrow, jgrade, n)

    run_row = run_rows(run, qids) if rows is None else rows
    run_len = np.diff(run.offsets)
    lengths = np.where(run_row >= 0, run_len[np.maximum(run_row, 0)] if len(run_len) else 0, 0).astype(np.int64)

    jrr = run_row[jrow] if len(jrow) else np.zeros(0, dtype=np.int64)
    sel = np.flatnonzero(jrr >= 0)
    jrr, jr, jd, jg = jrr[sel], jrow[sel], jdocs[sel], jgrade[sel]

    found = None
    if len(sel) == 0 or len(run.scores) == 0:
        found = (np.zeros(0, dtype=np.int64),) * 2
    elif run._maps is not None:
        found = _locate_by_maps(run, jrr, jd)
    if found is None and run._codes is None and run._doc_key is not None:
        found = _locate_by_keys(run, jrr, jd)
    if found is None:
        found = _locate_by_codes(run, jrr, jd) if run._codes is not None else _locate_by_scan(run, jrr, jd)
    which, ranks = found
    return GainMatrix.from_hits(qids, jr[which], ranks, jg[which], lengths, ideal_offsets, ideal_grades)


def _locate_by_maps(run: Run, jrr: np.ndarray, jd: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """(judgement indices found in the run, their 0-based ranks) via the run's {doc: score} maps.

    Returns None when the maps no longer agree with the run (a mapping changed after the run was
    built); the caller then falls back to a scan, which reports the change.
    """
    maps = run._maps
    assert maps is not None and isinstance(run._lazy, _MappingIds)
    if not run._lazy.unchanged():
        return None
    # the score of every judged doc in its query's mapping, NaN when not ranked; for plain dicts the
    # lookups are driven from C (map over dict.get), other mappings go through their own .get
    owners = map(maps.__getitem__, jrr.tolist())
    if set(map(type, maps)) <= {dict}:
        lookups = map(dict.get, owners, jd.tolist(), repeat(np.nan))
    else:
        lookups = (m.get(d, np.nan) for m, d in zip(owners, jd.tolist(), strict=True))
    got = np.fromiter(lookups, dtype=np.float64, count=len(jd))
    which = np.flatnonzero(~np.isnan(got))
    if len(which) == 0:
        return which, np.zeros(0, dtype=np.int64)
    target = got[which]
    rr, d = jrr[which], jd[which]
    starts, stops = run.offsets[rr], run.offsets[rr + 1]
    scores = run.scores
    # doc ids are needed only where scores tie; the run keeps those (the others are never materialized)
    tied_pos, tied_docs = run._tied_pos, run._tied_docs
    last = max(len(tied_pos) - 1, 0)

    def before(pos: np.ndarray, sel: np.ndarray) -> np.ndarray:
        """Whether the ranked doc at `pos` comes before judged doc `sel` in trec_eval order
        (score descending, then doc id descending)."""
        sm, sv = scores[pos], target[sel]
        out = sm > sv
        tie = np.flatnonzero(sm == sv)
        if len(tie) and len(tied_pos):
            # an equal score outside every tie group can only be the judged doc itself (not before it)
            k = np.minimum(np.searchsorted(tied_pos, pos[tie]), last)
            grouped = tied_pos[k] == pos[tie]
            if grouped.any():
                g = tie[grouped]
                out[g] = np.greater(tied_docs[k[grouped]], d[sel[g]])
        return out

    # branchless binary search, all judgements at once: rank = how many ranked docs come before
    rank = np.zeros(len(which), dtype=np.int64)
    longest = int((stops - starts).max())
    step = 1 << max(longest.bit_length() - 1, 0)
    while step:
        probe = starts + rank + (step - 1)
        sel = np.flatnonzero(probe < stops)
        rank[sel[before(probe[sel], sel)]] += step
        step >>= 1
    lo = starts + rank
    if not np.all(lo < stops) or not np.all(scores[np.minimum(lo, len(scores) - 1)] == target):
        return None
    k = np.minimum(np.searchsorted(tied_pos, lo), last)
    grouped = (tied_pos[k] == lo) if len(tied_pos) else np.zeros(len(lo), dtype=bool)
    if not np.all(tied_docs[k[grouped]] == d[grouped]):
        return None
    return which, rank


def _match(run: Run, jrr: np.ndarray, jcode: np.ndarray, codes: np.ndarray, n_codes: int) -> tuple[np.ndarray, np.ndarray]:
    """Exact (query, doc) matching of judgements against ranked positions, given doc codes for both."""
    flag = np.zeros(n_codes, dtype=bool)
    flag[jcode] = True
    cand = np.flatnonzero(flag[codes]) if len(codes) else np.zeros(0, dtype=np.int64)
    cand_rr = np.searchsorted(run.offsets, cand, side="right") - 1
    key_c = cand_rr * n_codes + codes[cand]
    key_j = jrr * n_codes + jcode
    order = np.argsort(key_j, kind="stable")
    key_sorted = key_j[order]
    m = np.minimum(np.searchsorted(key_sorted, key_c), len(key_sorted) - 1)
    hit = key_sorted[m] == key_c
    return order[m[hit]], cand[hit] - run.offsets[cand_rr[hit]]


def _locate_by_codes(run: Run, jrr: np.ndarray, jd: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Judged ids -> the run's interned codes (binary search in its sorted vocabulary), then match."""
    vocab, codes = run.doc_codes()
    loc = np.minimum(np.searchsorted(vocab, jd), len(vocab) - 1)
    ok = np.flatnonzero(vocab[loc] == jd)
    which, ranks = _match(run, jrr[ok], loc[ok], codes, len(vocab))
    return ok[which], ranks


def _locate_by_keys(run: Run, jrr: np.ndarray, jd: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Match judged ids against a run that carries a 64-bit key per ranked doc (runs read from TREC files).

    The run's doc ids stay raw bytes: judged ids get keys the same way and a blocked hash lookup
    finds them (see `keys`). Keys of ids up to 8 bytes are the ids themselves; any other match is
    confirmed by comparing the strings, so two ids that hash alike can never make a wrong hit.
    """
    assert run._doc_key is not None
    jkey, jexact = key_strings(jd.tolist())
    which, pos = lookup(run.offsets, run._doc_key, jrr, jkey)
    unsure = np.flatnonzero(~(jexact[which] & run._key_exact)) if len(which) else np.zeros(0, dtype=np.int64)
    if len(unsure):
        ok = np.ones(len(which), dtype=bool)
        ok[unsure] = run._docs_at(pos[unsure]) == jd[which[unsure]]
        which, pos = which[ok], pos[ok]
    return which, pos - run.offsets[jrr[which]]


def _locate_by_scan(run: Run, jrr: np.ndarray, jd: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """One pass over the ranked docs, looking each up among the (few) judged ids only."""
    judged: dict[str, int] = {}
    jcode = np.fromiter((judged.setdefault(d, len(judged)) for d in jd.tolist()), dtype=np.int64, count=len(jd))
    codes = np.fromiter(map(judged.get, run.doc_ids.tolist(), repeat(len(judged))), dtype=np.int64, count=len(run.doc_ids))
    # unjudged docs share the code len(judged), which no judgement carries
    return _match(run, jrr, jcode, codes, len(judged) + 1)
