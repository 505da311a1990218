"""User-model measures as vectorized functions of a GainMatrix: ERR, RBP and its residual, C/W/L.

Each function returns one float64 value per query (row), like `metrics/ranking.py`; `k` is a per-row
int64 cutoff array or None (uncut). Ranks are 1-based in the formulas below.

ERR (Chapelle, Metzler, Zhang and Grinspan 2009, "Expected reciprocal rank for graded relevance"), as
gdeval.pl (TREC Web track 2010-2014) computes it: R_i = (2^g_i - 1) / 2^4 with g_i the grade at rank i
(grades above 4 are refused, as gdeval refuses them), ERR@k = sum_{i<=k} R_i / i * prod_{j<i} (1 - R_j).
gdeval's nDCG@k is `ndcg_exp@k` (2^g - 1 gains, the ideal from all judged grades, trec_eval's tie order).

RBP (Moffat and Zobel 2008, "Rank-biased precision for measurement of retrieval effectiveness"):
RBP = (1 - p) * sum_i gain_i * p^(i-1). With `rel=L` the gain is 1 for grade >= L, else 0 (ir_measures'
`RBP(rel=L)`, cwl_eval's RBP). Without `rel` the gains are trec_eval 10.0's (m_rbp.c): the grade itself,
divided by the query's highest judged grade when that is above 1, so gains lie in [0, 1]. The residual is
how much RBP could still grow if every unjudged ranked document were fully relevant and the ranking went on
with relevant documents: (1 - p) * sum_{unjudged i <= n} p^(i-1) + p^n for n ranked documents, which is
1 - (1 - p) * sum_{judged i} p^(i-1). As trec_eval 10.0's rbp_resid (m_rbp_resid.c) it is 0 when every
ranked document is judged (it then leaves the unseen tail out), and a negative grade reads as unjudged.

C/W/L (Moffat, Bailey, Scholer and Thomas 2017, "Incorporating user expectations and behavior into the
measurement of search effectiveness"; Azzopardi, Thomas and Moffat 2019, cwl_eval): a user examines rank
i+1 after rank i with probability C_i; the weight of rank i is W_i = prod_{j<i} C_j / sum_m prod_{j<m} C_j
and the measure is the expected rate of gain sum_i W_i * gain_i. As cwl_eval (and ir_measures' cwl_eval
provider) does: gains are (clip(g, min_rel, max_rel) - min_rel) / (max_rel - min_rel), unjudged documents
gain 0, every document costs 1, and the ranking is padded with zero gains (or cut) to 1,000 ranks, so W
is normalized over those 1,000 ranks. With cg_i the gain accumulated down to rank i:

- INST (Moffat et al. 2015): T_i = T - cg_i, C_i = ((i + T + T_i - 1) / (i + T + T_i))^2;
- INSQ (Moffat, Scholer and Thomas 2012): C_i = ((i + 2T - 1) / (i + 2T))^2;
- BPM, static (Zhang et al. 2017): C_i = 1 while cg_i < T and i < K (K = the cutoff), else 0;
- SDCG@k: C_i = log2(i + 1) / log2(i + 2) for i < k, else 0, i.e. DCG@k (gains as above, log2(i + 1)
  discounts) divided by the DCG of k fully relevant documents;
- NERR, the C/W/L forms of ERR (Azzopardi, Mackenzie and Moffat 2021, "ERR is not C/W/L", equations 8 to 11;
  cwl_eval's NERReq8..11), with g_i the gain at rank i: NERR8@k: C_i = 1 - g_i for i < k, else 0; NERR9@k:
  C_i = i / (i + 1) (1 - g_i) for i < k, else 0; NERR10(p): C_i = p (1 - g_i); NERR11(T):
  C_i = ((i + 2T - 1) / (i + 2T))^2 (1 - g_i).
"""

from __future__ import annotations

import numpy as np

from retbench.metrics.gain import GainMatrix
from retbench.metrics.ranking import _cut

#: gdeval.pl's MAX_JUDGMENT: ERR's R = (2^g - 1) / 2^4, and larger grades are an error there and here
GDEVAL_MAX_GRADE = 4
#: cwl_eval's (and ir_measures') ranking depth: the C/W/L weights are normalized over this many ranks
CWL_DEPTH = 1000
_BLOCK = 2048  # queries per dense C/W/L block: [2048 x 1000] float64 arrays stay near 16 MB each


def _positions(rows: np.ndarray) -> np.ndarray:
    """0-based position of each hit among its row's hits (hits sorted by row, then rank)."""
    idx = np.arange(len(rows))
    start = np.ones(len(rows), dtype=bool)
    start[1:] = rows[1:] != rows[:-1]
    return idx - np.maximum.accumulate(np.where(start, idx, 0))


def err(gm: GainMatrix, k: np.ndarray | None) -> np.ndarray:
    """gdeval's ERR@k (uncut when k is None); raises ValueError on a grade above 4."""
    mask = _cut(gm, k)
    rows, ranks, grades = gm.hit_rows[mask], gm.hit_ranks[mask], gm.hit_grades[mask]
    out = np.zeros(len(gm), dtype=np.float64)
    if not len(rows):
        return out
    if grades.max() > GDEVAL_MAX_GRADE:
        raise ValueError(
            f"ERR takes grades 0 to {GDEVAL_MAX_GRADE} (gdeval's scale), got {grades.max():g}: "
            "map the grades onto that scale first"
        )
    r = (np.exp2(grades) - 1.0) / 2.0**GDEVAL_MAX_GRADE
    pos = _positions(rows)
    # the stopping probabilities of each row's relevant documents in rank order; a non-relevant one
    # multiplies the running product by exactly 1, so only the hits are needed
    table = np.ones((len(gm), int(pos.max()) + 1), dtype=np.float64)
    table[rows, pos] = 1.0 - r
    before = np.cumprod(table, axis=1)
    decay = np.where(pos > 0, before[rows, np.maximum(pos - 1, 0)], 1.0)
    out += np.bincount(rows, weights=r * decay / (ranks + 1.0), minlength=len(gm))
    return out


def _check_p(p: float) -> None:
    if not 0.0 < p < 1.0:
        raise ValueError(f"RBP's persistence p must be in (0, 1), got {p!r}")


def rbp_gains(gm: GainMatrix, level: int | None) -> np.ndarray:
    """Gain of each hit: 1/0 at relevance `level`, else trec_eval 10.0's grade / the query's top grade (if > 1)."""
    if level is not None:
        return (gm.hit_grades >= level).astype(np.float64)
    top = np.ones(len(gm), dtype=np.float64)
    starts = gm.ideal_offsets[:-1]
    has = np.diff(gm.ideal_offsets) > 0
    top[has] = np.maximum(gm.ideal_grades[starts[has]], 1.0)  # ideal grades are sorted descending
    return gm.hit_grades / top[gm.hit_rows]


def rbp(gm: GainMatrix, p: float, level: int | None = None) -> np.ndarray:
    """(1 - p) * sum_i gain_i * p^(i-1) over the whole ranking (see `rbp_gains` for the gains)."""
    _check_p(p)
    w = rbp_gains(gm, level) * np.power(p, gm.hit_ranks.astype(np.float64))
    return (1.0 - p) * np.bincount(gm.hit_rows, weights=w, minlength=len(gm))


def rbp_residual(gm: GainMatrix, p: float, judged_rows: np.ndarray, judged_ranks: np.ndarray) -> np.ndarray:
    """trec_eval 10.0's rbp_resid: 1 - (1 - p) * sum_{judged i} p^(i-1), or 0 when every ranked doc is judged.

    `judged_rows` / `judged_ranks`: row and 0-based rank of every ranked document judged with a grade >= 0
    (trec_eval reads a negative grade as "not in the pool"), each once.
    """
    _check_p(p)
    weight = np.bincount(judged_rows, weights=np.power(p, judged_ranks.astype(np.float64)), minlength=len(gm))
    n_judged = np.bincount(judged_rows, minlength=len(gm))
    holes = n_judged < gm.lengths
    return np.where(holes, 1.0 - (1.0 - p) * weight, 0.0)


# -- C/W/L ----------------------------------------------------------------------------------------------
def cwl_gains(gm: GainMatrix, rows: np.ndarray, min_rel: float, max_rel: float) -> np.ndarray:
    """Dense [len(rows), CWL_DEPTH] gains of the given rows, scaled as cwl_eval scales them."""
    if not 0 <= min_rel < max_rel:
        raise ValueError(f"C/W/L measures need 0 <= min_rel < max_rel, got min_rel={min_rel:g}, max_rel={max_rel:g}")
    local = np.full(len(gm), -1, dtype=np.int64)
    local[rows] = np.arange(len(rows))
    sel = (local[gm.hit_rows] >= 0) & (gm.hit_ranks < CWL_DEPTH)
    out = np.zeros((len(rows), CWL_DEPTH), dtype=np.float64)
    g = np.clip(gm.hit_grades[sel], min_rel, max_rel)
    out[local[gm.hit_rows[sel]], gm.hit_ranks[sel]] = (g - min_rel) / (max_rel - min_rel)
    return out


def expected_rate_of_gain(gains: np.ndarray, cont: np.ndarray) -> np.ndarray:
    """sum_i W_i gain_i with W from the continuation probabilities `cont` ([n, depth]; the last is unused)."""
    reach = np.ones_like(gains)
    np.cumprod(cont[:, :-1], axis=1, out=reach[:, 1:])
    w = reach * (1.0 / reach.sum(axis=1))[:, None]
    return np.einsum("ij,ij->i", w, gains)


_RANK = np.arange(1, CWL_DEPTH + 1, dtype=np.float64)  # 1-based ranks of the C/W/L depth


def _inst(gains: np.ndarray, t: float, k: np.ndarray | None) -> np.ndarray:
    ti = t - np.cumsum(gains, axis=1)
    return ((_RANK + t + ti - 1.0) / (_RANK + t + ti)) ** 2


def _insq(gains: np.ndarray, t: float, k: np.ndarray | None) -> np.ndarray:
    return np.broadcast_to(((_RANK + 2.0 * t - 1.0) / (_RANK + 2.0 * t)) ** 2, gains.shape)


def _bpm(gains: np.ndarray, t: float, k: np.ndarray | None) -> np.ndarray:
    assert k is not None
    return ((np.cumsum(gains, axis=1) < t) & (_RANK[None, :] < k[:, None])).astype(np.float64)


def _sdcg(gains: np.ndarray, t: float, k: np.ndarray | None) -> np.ndarray:
    assert k is not None
    ratio = (np.log(_RANK + 1.0) / np.log(2.0)) / (np.log(_RANK + 2.0) / np.log(2.0))
    return np.where(_RANK[None, :] < k[:, None], ratio[None, :], 0.0)


def _within(k: np.ndarray | None, c: np.ndarray) -> np.ndarray:
    assert k is not None
    return np.where(_RANK[None, :] < k[:, None], c, 0.0)


_CONTINUE = {
    "INST": _inst,
    "INSQ": _insq,
    "BPM": _bpm,
    "SDCG": _sdcg,
    "NERR8": lambda g, t, k: _within(k, 1.0 - g),
    "NERR9": lambda g, t, k: _within(k, _RANK / (_RANK + 1.0) * (1.0 - g)),
    "NERR10": lambda g, t, k: t * (1.0 - g),  # t carries p
    "NERR11": lambda g, t, k: _insq(g, t, k) * (1.0 - g),
}


def cwl(
    gm: GainMatrix, measure: str, k: np.ndarray | None, t: float = 1.0, min_rel: float = 0.0, max_rel: float = 1.0
) -> np.ndarray:
    """The C/W/L expected rate of gain of `measure` (INST, INSQ, BPM, SDCG, NERR8..NERR11; `t` is NERR10's p),
    in blocks of queries."""
    cont = _CONTINUE[measure]
    if measure in ("INST", "INSQ", "BPM", "NERR11") and t <= 0:
        raise ValueError(f"{measure}'s T (the gain the user wants) must be > 0, got {t:g}")
    if measure == "NERR10" and not 0 < t <= 1:
        raise ValueError(f"NERR10's p must be in (0, 1], got {t:g}")
    out = np.zeros(len(gm), dtype=np.float64)
    for start in range(0, len(gm), _BLOCK):
        rows = np.arange(start, min(start + _BLOCK, len(gm)), dtype=np.int64)
        gains = cwl_gains(gm, rows, min_rel, max_rel)
        out[rows] = expected_rate_of_gain(gains, cont(gains, t, None if k is None else k[rows]))
    return out


__all__ = ["CWL_DEPTH", "GDEVAL_MAX_GRADE", "cwl", "err", "rbp", "rbp_residual"]
