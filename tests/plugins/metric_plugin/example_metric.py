"""An example metric plugin: `labelled@k`, the share of the top k documents that carry any judgement.

It is exposed to retbench through the `retbench.metrics` entry point declared in
example_metric-0.1.dist-info/entry_points.txt (what `pip install` writes for a package that declares
`[project.entry-points."retbench.metrics"] labelled = "example_metric:Labelled"`).
"""

from __future__ import annotations

import numpy as np


class Labelled:
    name = "labelled"
    cutoff = "k"
    binary = False
    description = "share of the top k documents that have a judgement (any grade)"

    def compute(self, ctx, k, params):
        out = np.zeros(len(ctx.gm))
        for i, qid in enumerate(ctx.gm.query_ids):
            judged = ctx.qrels.get(qid, {}) if ctx.qrels is not None else {}
            top = ctx.ranked(i, int(k[i]))
            out[i] = sum(d in judged for d in top) / int(k[i])
        return out
