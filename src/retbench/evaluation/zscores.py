"""Standardised scores (trec_eval -Z): each per-query value in units of standard deviation from a mean.

For query q and measure m with (mean, sd) from a z-scores file (io/zscores.py), as trec_eval's
`convert_zscores.c` computes them: z = (v - mean) / sd; when sd is 0, z = 0 if v equals the mean, and otherwise
trec_eval's missing value -1,000,000; a (query, measure) the file does not list also gets -1,000,000, which
pulls the `all` line far down, as trec_eval's does, so a missing line cannot pass unnoticed. The `all` line is
then each measure's usual aggregate of the z-scores (the mean; the sum for the counts; for gm_map and gm_bpref
the geometric mean of max(z, 1e-5)), except `num_q`, which stays the number of queries.
Measures are matched by the name trec_eval prints (`P_10`, `utility_2,-1,0,0`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

import numpy as np

from retbench.evaluation.table import Evaluation
from retbench.io.zscores import ZScores

#: trec_eval's value for a (query, measure) without a usable mean and standard deviation (trec_eval.h)
MISSING_ZSCORE = -1_000_000.0


def standardise(ev: Evaluation, zscores: ZScores, printed: Sequence[str | None]) -> Evaluation:
    """`ev` with each value replaced by its z-score; `printed[j]` is the name trec_eval prints for metric j."""
    values = np.array(ev.values, dtype=np.float64, copy=True)
    for j, name in enumerate(printed):
        if name == "num_q":
            continue
        for i, qid in enumerate(ev.query_ids):
            values[i, j] = _z(values[i, j], zscores.get(qid, {}), name)
    return dataclasses.replace(ev, values=values)


def _z(value: float, table: Mapping[str, tuple[float, float]], name: str | None) -> float:
    if name is None or name not in table:
        return MISSING_ZSCORE
    mean, sd = table[name]
    if sd:
        return (value - mean) / sd
    return 0.0 if value == mean else MISSING_ZSCORE
