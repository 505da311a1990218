"""trec_eval's measure parameters that are not cutoffs: 11pt_avg's own recall levels and the gain maps.

- `11pt_avg.L1,L2,...` (`11pt_avg..25,.5,.75`): the mean of iprec_at_recall over the levels given instead of
  0, 0.1, ..., 1 (trec_eval's `m_11pt_avg.c`). trec_eval's loop reads the levels as an increasing list and
  prints a number that is no mean of anything for any other order, so levels not strictly increasing are
  refused here.
- `ndcg.1=3,2=9,4=4.5` (also `G`, `ndcg_rel`, `Rndcg`): `level=gain` pairs replace the gain of a relevance
  level (every other level keeps its grade as its gain; level 0 may get a gain too), as trec_eval's
  `gain_init.c` does. The ranking's gain at a rank is the gain of its document's level (0 when unjudged);
  the ideal ranking holds every judged document with a positive gain, the levels taken from the highest
  gain down and cut at the first level that has documents and a gain <= 0. trec_eval orders the levels with
  a comparator that returns the *whole-number part* of the difference of two gains, so two gains less than 1
  apart count as equal and keep their order (the pairs as given, then the other levels in increasing order):
  that order is reproduced here, which is why `ndcg.1=0.5` on 0/1 qrels has an empty ideal ranking (0.5 and
  level 0's gain 0 tie, and level 0 sorts above) exactly as in trec_eval. Rndcg keeps its test of the query
  having relevant documents at the relevance level (`-l`), which gains do not change.
  Negative levels and negative gains are refused (trec_eval would give unjudged documents, level -1, a gain,
  and subtract negative gains from DCG; retbench's gain matrix holds positive gains only).
  trec_eval's `ndcg_cut` takes cutoffs only (its help: "if you want different gains, change the qrels
  file"), so gains belong to `ndcg`, not to `ndcg_cut`.

The measure's name is the one trec_eval prints: the family, `_`, and the parameters as typed
(`11pt_avg_.25,.5,.75`, `ndcg_1=3,2=9,4=4.5`); the spec's canonical name is the `-m` spelling itself, which
reads back to the same measure.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Callable
from functools import cmp_to_key

import numpy as np

import retbench.metrics.ranking as ranking
import retbench.metrics.trec_more as tm
from retbench.errors import ConfigError
from retbench.metrics.base import Builtin, Metric, MetricContext
from retbench.metrics.gain import GainMatrix, pair_order

#: trec_eval's measures that take `level=gain` pairs, and each one's function of a gain matrix (and its context)
GAIN_MEASURES: dict[str, Callable[[GainMatrix, MetricContext, int], np.ndarray]] = {
    "ndcg": lambda g, c, lv: ranking.ndcg(g, None),
    "G": lambda g, c, lv: tm.gain_g(g),
    "ndcg_rel": lambda g, c, lv: tm.ndcg_rel(g),
    "Rndcg": lambda g, c, lv: tm.rndcg(g, lv, n_rel=c.gm.n_relevant(lv)),
}


def variant(row: Metric, family: str, text: str, spec: str) -> Builtin | None:
    """The measure `-m FAMILY.text` names when `text` is one of these parameter lists (None when it is not)."""
    if not isinstance(row, Builtin):
        return None
    if family == "11pt_avg":
        levels = _levels(text, spec)
        return dataclasses.replace(
            row,
            fn=lambda c, k, lv, p: tm.eleven_point_average(c.gm, lv, c.recall_rounding, levels),
            trec=f"{family}_{text}",
            trec_cut=None,
        )
    if family in GAIN_MEASURES and "=" in text:
        gains = gain_map(text, spec)
        measure = GAIN_MEASURES[family]
        return dataclasses.replace(
            row, fn=lambda c, k, lv, p: measure(with_gains(c.gm, gains), c, lv), trec=f"{family}_{text}", trec_cut=None
        )
    return None


def _levels(text: str, spec: str) -> tuple[float, ...]:
    try:
        levels = tuple(float(v) for v in text.split(","))
    except ValueError:
        raise ConfigError(f"metric {spec!r}: recall levels must be numbers, got {text!r}", field="metric") from None
    if any(not 0.0 <= v <= 1.0 for v in levels) or any(b <= a for a, b in itertools.pairwise(levels)):
        raise ConfigError(
            f"metric {spec!r}: recall levels must lie in [0, 1] in increasing order (trec_eval averages them "
            "correctly only so)",
            field="metric",
        )
    return levels


def gain_map(text: str, spec: str) -> dict[int, float]:
    """`1=3,2=9,4=4.5` -> {1: 3.0, 2: 9.0, 4: 4.5}, in the order given; a malformed pair is a ConfigError."""
    out: dict[int, float] = {}
    for part in text.split(","):
        level, eq, gain = part.partition("=")
        try:
            if not eq or not level.strip().lstrip("+").isdigit():
                raise ValueError
            lv, g = int(level), float(gain)
        except ValueError:
            raise ConfigError(
                f"metric {spec!r}: {part!r} must be level=gain with a level >= 0 (trec_eval's rel_level=gain)",
                field="metric",
            ) from None
        if lv in out:
            raise ConfigError(f"metric {spec!r}: level {lv} is given two gains", field="metric")
        if not g >= 0.0:
            raise ConfigError(f"metric {spec!r}: gain {gain!r} of level {lv} must be >= 0", field="metric")
        out[lv] = g
    return out


def _trec_order(gains: dict[int, float], top: int) -> list[tuple[int, float]]:
    """The (level, gain) list of a query whose highest judged level is `top`, in trec_eval's increasing order."""
    entries = list(gains.items()) + [(lv, float(lv)) for lv in range(top + 1) if lv not in gains]

    def whole_difference(a: tuple[int, float], b: tuple[int, float]) -> int:
        return int(a[1] - b[1])  # C's (int) cast of a double: the fraction dropped

    return sorted(entries, key=cmp_to_key(whole_difference))


def with_gains(gm: GainMatrix, gains: dict[int, float]) -> GainMatrix:
    """`gm` with each judged document's grade replaced by its level's gain, and the ideal ranking trec_eval
    builds from those gains (see the module docstring)."""
    n = len(gm)
    hit_gain = np.array([gains.get(int(g), float(g)) for g in gm.hit_grades], dtype=np.float64)
    zero_gain = gains.get(0, 0.0)
    rows = np.concatenate([gm.hit_rows, gm.zero_rows if zero_gain > 0 else gm.zero_rows[:0]])
    ranks = np.concatenate([gm.hit_ranks, gm.zero_ranks if zero_gain > 0 else gm.zero_ranks[:0]])
    values = np.concatenate([hit_gain, np.full(len(rows) - len(hit_gain), zero_gain)])
    # judged documents per query and level (level 0: those judged 0)
    levels = gm.ideal_grades.astype(np.int64)
    width = int(max(levels.max(initial=0), max(gains, default=0))) + 1
    counts = np.zeros((n, width), dtype=np.int64)
    counts[:, 0] = gm.n_zero
    np.add.at(counts, (gm.ideal_rows, levels), 1)
    top = np.where(counts.any(axis=1), width - 1 - np.argmax(counts[:, ::-1] > 0, axis=1), 0)
    out_rows, out_pos, out_gain = [], [], []
    for t in np.unique(top):
        qs = np.flatnonzero(top == t)
        order = _trec_order(gains, int(t))[::-1]  # highest gain first, as trec_eval walks them
        if not order or order[0][1] <= 0:
            continue
        lv = np.array([e[0] for e in order])
        g = np.array([e[1] for e in order])
        c = counts[qs][:, lv]
        stop = (c > 0) & (g <= 0)
        first = np.where(stop.any(axis=1), np.argmax(stop, axis=1), len(order))
        c = np.where(np.arange(len(order)) < first[:, None], c, 0)
        per_row = c.sum(axis=1)
        out_rows.append(np.repeat(qs, per_row))
        out_gain.append(np.repeat(np.tile(g, len(qs)), c.ravel()))
        out_pos.append(np.arange(int(per_row.sum())))
    i_rows = np.concatenate(out_rows) if out_rows else np.zeros(0, dtype=np.int64)
    i_pos = np.concatenate(out_pos) if out_pos else np.zeros(0, dtype=np.int64)
    i_gain = np.concatenate(out_gain) if out_gain else np.zeros(0)
    order_i = pair_order(i_rows, i_pos)
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(i_rows, minlength=n), out=offsets[1:])
    return GainMatrix.from_hits(gm.query_ids, rows, ranks, values, gm.lengths, offsets, i_gain[order_i])
