"""The rest of trec_eval 9's measures as vectorized functions of a GainMatrix (one float64 per query).

Formulas, read from trec_eval's `m_*.c` (R: relevant documents at the level, Rp: documents with a positive
grade, nrr: relevant retrieved, n: retrieved; ranks 1-based unless said):

- iprec_at_recall(p): c = round(p * R), halves away from zero (trec_eval 10.0's lround; the `round` rule), or
  c = floor(p * R + 0.9) (trec_eval 9 and pytrec_eval; the `floor_plus_0.9` rule): they differ where the
  fractional part of p * R lies in [0.1, 0.5), e.g. p = 0.6, R = 4: 10.0 takes 2 relevant documents, 9 takes 3;
  the largest precision at or after the c-th relevant document (c = 0 reads as c = 1), 0 when c > nrr;
  11pt_avg: its mean over p = 0, 0.1, ..., 1 (or the levels given);
- Rprec_mult(x): relevant in the top c / c with c = floor(x * R + 0.9) (0 when c = 0; 10.0 kept this rule);
- relative_P@k: relevant in the top k / min(k, R);
- set_P = nrr / n, set_recall = nrr / R, set_relative_P = nrr / min(n, R), set_map = nrr^2 / (n R),
  set_F(x) = (x + 1) P R / (x P + R) with P, R the set precision and recall (trec_eval's own weighting,
  not beta squared);
- utility(a, b, c, d) = a nrr + b (n - nrr) + c (R - nrr) + d (N + nrr - n - R), N the collection size
  (trec_eval -N; 0 when not given, as in trec_eval);
- binG = (1/R) sum over relevant retrieved of 1 / log2(2 + non-relevant ranked above it);
- G = (1/sum of ideal gains) sum over retrieved d of g_d / log2(2 + C_i - S_i), where S_i is the gain
  retrieved up to rank i and C_i the sum of max(ideal gain, 1) over the first i ideal ranks;
- ndcg_rel: nDCG at each retrieved document with a positive grade (the ideal cut at min(rank, Rp)),
  plus the final DCG / ideal DCG once for each positive document not retrieved, all divided by Rp;
- Rndcg: the mean of nDCG at the ranks where the ideal gain changes (each grade boundary and Rp), plus
  DCG at the end of the ranking / ideal DCG when more than Rp + 1 documents were retrieved.

Gains are the grades themselves (trec_eval's default gains; its `level=gain` pairs: metrics/trec_params.py).
Sums run in trec_eval's order (per row, rank by rank), so values agree to the last bit or nearly.
"""

from __future__ import annotations

import numpy as np

from retbench.metrics.gain import GainMatrix, check_level
from retbench.metrics.incomplete import nth_in_row
from retbench.metrics.ranking import relevant_retrieved

ELEVEN_POINTS = tuple(i / 10 for i in range(11))


def _ratio(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    den = np.asarray(den, dtype=np.float64)
    return np.divide(num, den, out=np.zeros(len(num), dtype=np.float64), where=den > 0)


def row_prefix(rows: np.ndarray, values: np.ndarray) -> np.ndarray:
    """Inclusive running sums of `values` within each row (entries sorted by row), summed one by one in
    order as trec_eval does (a global cumsum minus each row's start would round differently)."""
    if len(rows) == 0:
        return np.zeros(0, dtype=np.float64)
    col = nth_in_row(rows) - 1
    start = np.ones(len(rows), dtype=bool)
    start[1:] = rows[1:] != rows[:-1]
    compact = np.cumsum(start) - 1
    pad = np.zeros((int(compact[-1]) + 1, int(col.max()) + 1), dtype=np.float64)
    pad[compact, col] = values
    np.cumsum(pad, axis=1, out=pad)
    return pad[compact, col]


def _row_starts(rows: np.ndarray, n: int) -> np.ndarray:
    starts = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(rows, minlength=n), out=starts[1:])
    return starts


def _relevant(gm: GainMatrix, level: int) -> tuple[np.ndarray, np.ndarray]:
    check_level(level)
    rel = gm.hit_grades >= level
    return gm.hit_rows[rel], gm.hit_ranks[rel]


def recall_cutoff(p: float, r: np.ndarray, rounding: str = "floor_plus_0.9") -> np.ndarray:
    """The number of relevant documents that recall level p stands for among R: trec_eval 9's (long)(p * R + 0.9)
    (`floor_plus_0.9`), or trec_eval 10.0's lround(p * R) (`round`: halves away from zero, computed exactly, as
    floor(x + 0.5) would round 0.49999999999999994 up)."""
    x = p * r.astype(np.float64)
    if rounding == "round":
        whole = np.floor(x)
        return (whole + (x - whole >= 0.5)).astype(np.int64)
    return np.floor(x + 0.9).astype(np.int64)


def iprec_at_recall(gm: GainMatrix, p: float, level: int = 1, rounding: str = "round") -> np.ndarray:
    """Interpolated precision at recall level p (trec_eval iprec_at_recall; `rounding`: see `recall_cutoff`)."""
    rows, ranks = _relevant(gm, level)
    prec = nth_in_row(rows) / (ranks + 1.0)
    nrr = np.bincount(rows, minlength=len(gm))
    c = np.maximum(recall_cutoff(p, gm.n_relevant(level), rounding), 1)
    ok = np.flatnonzero(c <= nrr)
    out = np.zeros(len(gm), dtype=np.float64)
    if len(ok):
        starts = _row_starts(rows, len(gm))
        pairs = np.empty(2 * len(ok), dtype=np.int64)
        pairs[0::2], pairs[1::2] = starts[ok] + c[ok] - 1, starts[ok + 1]
        out[ok] = np.maximum.reduceat(np.append(prec, 0.0), pairs)[0::2]
    return out


def eleven_point_average(
    gm: GainMatrix, level: int = 1, rounding: str = "round", points: tuple[float, ...] = ELEVEN_POINTS
) -> np.ndarray:
    """Mean interpolated precision over recall 0, 0.1, ..., 1, or the levels given (trec_eval 11pt_avg)."""
    total = np.zeros(len(gm), dtype=np.float64)
    for p in points:  # one vectorized pass per level, not a loop over queries
        total += iprec_at_recall(gm, p, level, rounding)
    return total / len(points)


def rprec_mult(gm: GainMatrix, x: float, level: int = 1) -> np.ndarray:
    """Precision at x * R documents (trec_eval Rprec_mult)."""
    c = recall_cutoff(x, gm.n_relevant(level))
    return _ratio(relevant_retrieved(gm, c, level), c)


def relative_precision(gm: GainMatrix, k: np.ndarray, level: int = 1) -> np.ndarray:
    """Relevant in the top k / min(k, R) (trec_eval relative_P)."""
    return _ratio(relevant_retrieved(gm, k, level), np.minimum(k, gm.n_relevant(level)))


def _set_counts(gm: GainMatrix, level: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    nrr = relevant_retrieved(gm, None, level)
    return nrr, gm.lengths.astype(np.float64), gm.n_relevant(level).astype(np.float64)


def set_precision(gm: GainMatrix, level: int = 1) -> np.ndarray:
    nrr, n, _ = _set_counts(gm, level)
    return _ratio(nrr, n)


def set_recall(gm: GainMatrix, level: int = 1) -> np.ndarray:
    nrr, _, r = _set_counts(gm, level)
    return _ratio(nrr, r)


def set_relative_precision(gm: GainMatrix, level: int = 1) -> np.ndarray:
    nrr, n, r = _set_counts(gm, level)
    return _ratio(nrr, np.where(r > 0, np.minimum(n, r), 0.0))


def set_map(gm: GainMatrix, level: int = 1) -> np.ndarray:
    nrr, n, r = _set_counts(gm, level)
    return _ratio(nrr * nrr, n * r)


def set_f(gm: GainMatrix, x: float = 1.0, level: int = 1) -> np.ndarray:
    nrr, n, r = _set_counts(gm, level)
    p, rec = _ratio(nrr, n), _ratio(nrr, r)
    return np.where(nrr > 0, _ratio((x + 1.0) * p * rec, x * p + rec), 0.0)


def utility(
    gm: GainMatrix, a: float, b: float, c: float, d: float, level: int = 1, collection: int | None = None
) -> np.ndarray:
    """a nrr + b (n - nrr) + c (R - nrr) + d (N + nrr - n - R) (trec_eval utility; N from -N).

    Without -N, trec_eval takes N = 0 (trec_eval.c sets num_docs_in_coll to 0), so a non-zero d counts
    nrr - n - R per query, as trec_eval prints it.
    """
    nrr = relevant_retrieved(gm, None, level).astype(np.int64)
    n, r = gm.lengths.astype(np.int64), gm.n_relevant(level).astype(np.int64)
    rest = (0 if collection is None else int(collection)) - n - r + nrr
    return a * nrr + b * (n - nrr) + c * (r - nrr) + d * rest.astype(np.float64)


def bin_g(gm: GainMatrix, level: int = 1) -> np.ndarray:
    """trec_eval binG."""
    rows, ranks = _relevant(gm, level)
    terms = 1.0 / np.log2(3.0 + ranks - nth_in_row(rows))
    return _ratio(np.bincount(rows, weights=terms, minlength=len(gm)), gm.n_relevant(level))


def _ideal_prefix(gm: GainMatrix, values: np.ndarray) -> np.ndarray:
    """Running sums of per-ideal-entry `values` within each query's ideal ranking."""
    return row_prefix(gm.ideal_rows, values)


def _at(prefix: np.ndarray, starts: np.ndarray, rows: np.ndarray, count: np.ndarray) -> np.ndarray:
    """The running sum over the first `count` entries of each row's segment (0 when count is 0)."""
    idx = starts[rows] + count - 1
    return np.where(count > 0, prefix[np.maximum(idx, 0)] if len(prefix) else 0.0, 0.0)


def gain_g(gm: GainMatrix) -> np.ndarray:
    """trec_eval G (gains are the grades)."""
    rp = np.diff(gm.ideal_offsets)
    pos = gm.hit_ranks + 1  # ideal ranks consumed up to and including this hit
    in_ideal = np.minimum(pos, rp[gm.hit_rows])
    cost = _ideal_prefix(gm, np.maximum(gm.ideal_grades, 1.0))
    c_i = _at(cost, gm.ideal_offsets, gm.hit_rows, in_ideal) + (pos - in_ideal)
    s_i = row_prefix(gm.hit_rows, gm.hit_grades)
    terms = gm.hit_grades / np.log2(2.0 + c_i - s_i)
    total = np.bincount(gm.hit_rows, weights=terms, minlength=len(gm))
    return _ratio(total, np.bincount(gm.ideal_rows, weights=gm.ideal_grades, minlength=len(gm)))


def _dcg_parts(gm: GainMatrix) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(per-hit running DCG, per-ideal-entry running ideal DCG, each row's first hit index)."""
    dcg = row_prefix(gm.hit_rows, gm.hit_grades / np.log2(gm.hit_ranks + 2.0))
    idcg = _ideal_prefix(gm, gm.ideal_grades / np.log2(gm.ideal_positions + 2.0))
    return dcg, idcg, _row_starts(gm.hit_rows, len(gm))


def ndcg_rel(gm: GainMatrix) -> np.ndarray:
    """trec_eval ndcg_rel."""
    dcg, idcg, hstart = _dcg_parts(gm)
    rp = np.diff(gm.ideal_offsets)
    rows = gm.hit_rows
    ideal_here = _at(idcg, gm.ideal_offsets, rows, np.minimum(gm.hit_ranks + 1, rp[rows]))
    total = np.bincount(rows, weights=_ratio(dcg, ideal_here), minlength=len(gm))
    n_hits = np.bincount(rows, minlength=len(gm))
    all_rows = np.arange(len(gm))
    final = _at(dcg, hstart, all_rows, n_hits)
    ideal_all = _at(idcg, gm.ideal_offsets, all_rows, rp)
    total = total + (rp - n_hits) * _ratio(final, ideal_all)
    return np.where(total > 0, _ratio(total, rp), 0.0)


def rndcg(gm: GainMatrix, level: int = 1, n_rel: np.ndarray | None = None) -> np.ndarray:
    """trec_eval Rndcg (0 for a query with no relevant document at `level`; `n_rel`: those counts, when `gm`
    holds gains that are not the grades)."""
    dcg, idcg, hstart = _dcg_parts(gm)
    rp = np.diff(gm.ideal_offsets)
    irows, ipos, grades = gm.ideal_rows, gm.ideal_positions, gm.ideal_grades
    change = np.zeros(len(grades), dtype=bool)
    change[1:] = (ipos[1:] > 0) & (grades[1:] != grades[:-1])
    has = np.flatnonzero(rp > 0)
    b_rows = np.concatenate([irows[change], has])  # boundary b: the ideal gain changes between b-1 and b
    b_at = np.concatenate([ipos[change], rp[has]])
    order = np.lexsort((b_at, b_rows))
    b_rows, b_at = b_rows[order], b_at[order]
    seen = np.minimum(b_at, gm.lengths[b_rows])
    hits_above = _hits_above(gm, hstart, b_rows, seen)
    points = _ratio(_at(dcg, hstart, b_rows, hits_above), _at(idcg, gm.ideal_offsets, b_rows, b_at))
    total = np.bincount(b_rows, weights=points, minlength=len(gm))
    count = np.bincount(b_rows, minlength=len(gm)).astype(np.float64)
    tail = (rp > 0) & (gm.lengths > rp + 1)
    all_rows = np.arange(len(gm))
    n_hits = np.bincount(gm.hit_rows, minlength=len(gm))
    final = _ratio(_at(dcg, hstart, all_rows, n_hits), _at(idcg, gm.ideal_offsets, all_rows, rp))
    total = total + np.where(tail, final, 0.0)
    count = count + tail
    return np.where((gm.n_relevant(level) if n_rel is None else n_rel) > 0, _ratio(total, count), 0.0)


def judged_count(gm: GainMatrix) -> np.ndarray:
    """Per query, the documents judged with a grade >= 0: the relevant count at relevance level 0 (-l 0)."""
    return gm.n_zero + np.diff(gm.ideal_offsets)


def _hits_above(gm: GainMatrix, hstart: np.ndarray, rows: np.ndarray, ranks: np.ndarray) -> np.ndarray:
    """How many hits of each given row sit at 0-based ranks below `ranks`."""
    keys = gm.hit_rows * (gm.depth + 1) + gm.hit_ranks
    return np.searchsorted(keys, rows * (gm.depth + 1) + ranks) - hstart[rows]
