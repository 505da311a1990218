"""trec_eval's preference measures (`-R prefs` / `-R qrels_prefs`, `-m all_prefs`), from its `form_prefs_counts.c`
and `m_prefs_*.c` (trec_eval 10.0).

For one query: the judged documents are those any judgement line names; the retrieved ones (NJR of them) are
numbered 0.. in rank order, the others after them by doc id. Each judgement group g gives a set of preferences
a > b: with one subgroup, every pair of its documents with different levels (the higher one preferred); with
several, each subgroup's pairs and everything they imply (the transitive closure; a cycle, or a document with
level 0 in one subgroup and another level in another, is refused). For each g:
ful_ret = prefs with both retrieved and a ranked above b, poss_ret = prefs with both retrieved; ful_imp = prefs
with only a retrieved, poss_imp = ful_imp + prefs with only b retrieved; notoccur = prefs with neither retrieved;
R_g / N_g its documents with level > 0 / the rest (R_ret, N_ret: those retrieved). C[a, b] counts the groups
preferring a to b.

- prefs_num_prefs_poss = sum over g of poss_ret + poss_imp + notoccur; prefs_num_prefs_ful = sum of ful_ret +
  ful_imp; prefs_num_prefs_ful_ret = sum of ful_ret (counts: the `all` line is their sum);
- prefs_simp = num_prefs_ful / num_prefs_poss; prefs_simp_ret = sum ful_ret / sum poss_ret; prefs_simp_imp =
  sum (ful_ret + ful_imp) / sum (poss_ret + poss_imp);
- prefs_avgjg(_ret, _imp): the same ratios per group (0 for a group with nothing possible), averaged over the
  groups;
- prefs_pair: over the pairs {a, b} some group has a preference about, the mean of C[a, b] / (C[a, b] + C[b, a])
  with a the one ranked higher when one is retrieved, and 0 for a pair with neither retrieved; prefs_pair_ret and
  prefs_pair_imp: over the pairs with both retrieved, and with at least one retrieved;
- prefs_avgjg_Rnonrel: as prefs_avgjg with each group's non-relevant documents (level 0) set to R_g in number:
  when N_g <= R_g, R_ret (R_g - N_g) fulfilled and R_g (R_g - N_g) possible preferences are added; otherwise
  only the first R_g non-relevant documents (in the numbering above) are kept and the preferences counted again,
  in trec_eval's own way (with one subgroup its recount pairs the levels other than the last among themselves,
  and every level, the last one included, with the kept non-relevant documents; a pair counts as fulfilled when
  a is retrieved and ranked above b). prefs_avgjg_Rnonrel_ret does the same over retrieved documents (R_ret,
  N_ret; trec_eval still adds R_g (R_ret - N_ret) possible preferences and keeps the first R_g non-relevant
  documents in its several-subgroup recount, which is reproduced).

A ratio whose denominator is 0 counts as 0, as in trec_eval (which leaves the value at 0); a group average
whose sum is not positive is 0.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from retbench.errors import InputError

COUNTS = ("prefs_num_prefs_poss", "prefs_num_prefs_ful", "prefs_num_prefs_ful_ret")
#: the measures in trec_eval's order (its measure table)
MEASURES = (
    *COUNTS,
    "prefs_simp", "prefs_pair", "prefs_avgjg", "prefs_avgjg_Rnonrel",
    "prefs_simp_ret", "prefs_pair_ret", "prefs_avgjg_ret", "prefs_avgjg_Rnonrel_ret",
    "prefs_simp_imp", "prefs_pair_imp", "prefs_avgjg_imp",
)  # fmt: skip
#: trec_eval's nicknames for them (runid and num_q come with both)
NICKNAMES = {"all_prefs": ("runid", "num_q", *MEASURES), "prefs": ("runid", "num_q", *MEASURES[:6])}


class Line(Protocol):
    """One judgement line (io/prefs.Preference)."""

    @property
    def group(self) -> str: ...
    @property
    def subgroup(self) -> str: ...
    @property
    def doc(self) -> str: ...
    @property
    def level(self) -> float: ...


@dataclass
class _Group:
    a: np.ndarray  # a[i, j]: i preferred to j (documents numbered as the module docstring says)
    ecs: list[np.ndarray] | None  # one subgroup: each level's documents, levels descending, numbers ascending
    level: np.ndarray  # each document's level in this group (NaN: not in it)
    counts: dict[str, int]


def _bytes(s: str) -> bytes:
    return s.encode("utf-8")


def query_measures(lines: Sequence[Line], ranked: Sequence[str], qid: str = "") -> dict[str, float]:
    """Every preference measure of one query, given its judgement lines and the run's documents in rank order."""
    judged = {x.doc for x in lines}
    retrieved = [d for d in ranked if d in judged]
    njr = len(retrieved)
    rest = sorted(judged.difference(retrieved), key=_bytes)
    number = {d: i for i, d in enumerate([*retrieved, *rest])}
    nj = len(number)
    order = sorted(lines, key=lambda x: (_bytes(x.group), _bytes(x.subgroup), -x.level, number[x.doc]))
    groups = []
    start = 0
    for i in range(1, len(order) + 1):
        if i == len(order) or order[i].group != order[start].group:
            groups.append(_group(order[start:i], number, nj, njr, qid))
            start = i
    pref_counts = np.zeros((nj, nj), dtype=np.int64)
    for g in groups:
        pref_counts += g.a
    return _measures(groups, pref_counts, njr)


def _group(lines: Sequence[Line], number: dict[str, int], nj: int, njr: int, qid: str) -> _Group:
    ranks = np.array([number[x.doc] for x in lines], dtype=np.int64)
    levels = np.array([x.level for x in lines])
    level = np.full(nj, np.nan)
    a = np.zeros((nj, nj), dtype=bool)
    if len({x.subgroup for x in lines}) == 1:
        bounds = np.flatnonzero(np.diff(levels)) + 1
        ecs = np.split(ranks, bounds)
        for k, ec in enumerate(ecs):
            lower = np.concatenate(ecs[k + 1 :]) if k + 1 < len(ecs) else ranks[:0]
            a[np.ix_(ec, lower)] = True
        level[ranks] = levels
        rel = levels > 0
        counts = {"rel": int(rel.sum()), "nonrel": int((~rel).sum())}
        counts |= {"rel_ret": int((rel & (ranks < njr)).sum()), "nonrel_ret": int((~rel & (ranks < njr)).sum())}
        return _Group(a, ecs, level, counts | _pref_counts(a, njr))
    for x, r in zip(lines, ranks.tolist(), strict=True):
        if (level[r] > 0 and x.level == 0) or (level[r] == 0 and x.level > 0):
            raise InputError(f"query {qid!r} group {x.group!r}: {x.doc!r} has level 0 and a level above 0")
        level[r] = x.level
    for i, x in enumerate(lines):
        below = [j for j in range(i + 1, len(lines)) if lines[j].subgroup == x.subgroup and lines[j].level < x.level]
        a[ranks[i], ranks[below]] = True
    a = _closure(a, qid, lines[0].group)
    counts = {"rel": int((level > 0).sum()), "nonrel": int((level == 0).sum())}
    counts |= {"rel_ret": int((level[:njr] > 0).sum()), "nonrel_ret": int((level[:njr] == 0).sum())}
    return _Group(a, None, level, counts | _pref_counts(a, njr))


def _closure(a: np.ndarray, qid: str, group: str) -> np.ndarray:
    """The preferences a group's subgroups imply together (a > b and b > c give a > c); a cycle is refused."""
    reach = a | np.eye(len(a), dtype=bool)
    while True:
        step = reach.astype(np.float32)  # BLAS: a sum of 0/1 products is > 0 exactly when a path exists
        wider = (step @ step) > 0
        if np.array_equal(wider, reach):
            break
        reach = wider
    np.fill_diagonal(reach, False)
    if np.any(reach & reach.T):
        raise InputError(f"query {qid!r} group {group!r}: its preferences contradict each other (a cycle)")
    return reach


def _pref_counts(a: np.ndarray, njr: int) -> dict[str, int]:
    top = a[:njr, :njr]
    ful_ret, ful_imp = int(np.triu(top, 1).sum()), int(a[:njr, njr:].sum())
    return {
        "ful_ret": ful_ret,
        "poss_ret": int(top.sum()),
        "ful_imp": ful_imp,
        "poss_imp": ful_imp + int(a[njr:, :njr].sum()),
        "notoccur": int(a[njr:, njr:].sum()),
    }


def _ratio(num: float, den: float) -> float:
    return num / den if den else 0.0


def _avg(values: list[float], n: int) -> float:
    total = float(np.sum(values)) if values else 0.0
    return total / n if total > 0 else 0.0


def _measures(groups: list[_Group], pref: np.ndarray, njr: int) -> dict[str, float]:
    c = [g.counts for g in groups]
    ful = [x["ful_ret"] + x["ful_imp"] for x in c]
    poss = [x["poss_ret"] + x["poss_imp"] + x["notoccur"] for x in c]
    poss_imp = [x["poss_ret"] + x["poss_imp"] for x in c]
    n = len(groups)
    out = {
        "prefs_num_prefs_poss": float(sum(poss)),
        "prefs_num_prefs_ful": float(sum(ful)),
        "prefs_num_prefs_ful_ret": float(sum(x["ful_ret"] for x in c)),
        "prefs_simp": _ratio(sum(ful), sum(poss)),
        "prefs_simp_ret": _ratio(sum(x["ful_ret"] for x in c), sum(x["poss_ret"] for x in c)),
        "prefs_simp_imp": _ratio(sum(ful), sum(poss_imp)),
        "prefs_avgjg": _avg([f / p for f, p in zip(ful, poss, strict=True) if p], n),
        "prefs_avgjg_ret": _avg([x["ful_ret"] / x["poss_ret"] for x in c if x["poss_ret"]], n),
        "prefs_avgjg_imp": _avg([f / p for f, p in zip(ful, poss_imp, strict=True) if p], n),
        "prefs_avgjg_Rnonrel": _avg([_rnonrel(g, njr, False) for g in groups], n),
        "prefs_avgjg_Rnonrel_ret": _avg([_rnonrel(g, njr, True) for g in groups], n),
    }
    both = pref + pref.T
    i, j = np.nonzero(np.triu(both > 0, 1))
    share = pref[i, j] / both[i, j]
    ret_i, ret_j = i < njr, j < njr
    out["prefs_pair"] = _ratio(float(np.sum(share[ret_i])), len(i))
    out["prefs_pair_ret"] = _ratio(float(np.sum(share[ret_i & ret_j])), int(np.sum(ret_i & ret_j)))
    out["prefs_pair_imp"] = _ratio(float(np.sum(share[ret_i])), int(np.sum(ret_i)))
    return out


def _rnonrel(g: _Group, njr: int, ret_only: bool) -> float:
    """One group's term of prefs_avgjg_Rnonrel (`ret_only`: prefs_avgjg_Rnonrel_ret); NaN where trec_eval's
    division is 0 / 0 (its sum then is not positive, and the measure 0)."""
    x = g.counts
    r, n = (x["rel_ret"], x["nonrel_ret"]) if ret_only else (x["rel"], x["nonrel"])
    if r >= n:
        ful = x["ful_ret"] + (0 if ret_only else x["ful_imp"]) + x["rel_ret"] * (r - n)
        poss = x["poss_ret"] + (0 if ret_only else x["poss_imp"] + x["notoccur"]) + x["rel"] * (r - n)
    elif g.ecs is not None:
        ful, poss = _recount_ecs(g.ecs, njr, x["rel_ret"] if ret_only else x["rel"], ret_only)
    else:
        ful, poss = _recount_array(g, njr, x["rel"], ret_only)
    return ful / poss if poss else float("nan")


def _pairs(x: np.ndarray, y: np.ndarray, njr: int, ret_only: bool) -> tuple[int, int]:
    """(fulfilled, the others) among the pairs x > y of a recount."""
    if ret_only:
        x, y = x[x < njr], y[y < njr]
        won = x[:, None] < y[None, :]
    else:
        won = (x[:, None] < y[None, :]) & (x[:, None] < njr)
    f = int(won.sum())
    return f, len(x) * len(y) - f


def _recount_ecs(ecs: list[np.ndarray], njr: int, keep: int, ret_only: bool) -> tuple[int, int]:
    kept = ecs[-1][:keep]
    ful = other = 0
    for k, ec in enumerate(ecs):
        for lower in ecs[k + 1 : len(ecs) - 1]:
            f, o = _pairs(ec, lower, njr, ret_only)
            ful, other = ful + f, other + o
        f, o = _pairs(ec, kept, njr, ret_only)
        ful, other = ful + f, other + o
    return ful, other + ful


def _recount_array(g: _Group, njr: int, rel: int, ret_only: bool) -> tuple[int, int]:
    scan = g.level[:njr] if ret_only else g.level
    zeros = np.flatnonzero(scan == 0)
    first_dropped = int(zeros[rel]) if len(zeros) > rel else len(scan)
    keep = ~((np.arange(len(g.level)) >= first_dropped) & (g.level == 0))
    a = g.a & keep[:, None] & keep[None, :]
    top = a[:njr, :njr]
    ful, other = int(np.triu(top, 1).sum()), int(np.tril(top, -1).sum())
    if not ret_only:
        ful += int(a[:njr, njr:].sum())
        other += int(a[njr:, :].sum())
    return ful, other + ful
