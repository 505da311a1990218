"""Speed of an all-pairs, all-metrics comparison (`retbench compare --all-pairs --metrics all`).

    .venv/bin/python benchmarks/compare_speed.py                         # 8 systems x 23 metrics x 225 queries
    .venv/bin/python benchmarks/compare_speed.py --systems 4 --metrics 5  # a quick look

The shape is a Cranfield-sized collection (225 queries) with 8 systems and 23 metrics: 28 pairs x 23
metrics = 644 tests, so the resamples are sized for Holm over 644 tests (`resamples_for`: 128,799).
Per-query values are synthetic but shaped like metric values (a share of exact zeros, the rest in
(0, 1] on a grid of 1/1000, so ties occur as they do in real tables). Times one `compare()` call: the
randomization test and bootstrap CI of every test, the t-test and Wilcoxon, and Holm; prints the wall
time and a digest of every p-value and CI so two versions can be checked to agree on the same seed.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import time

import numpy as np

from retbench.comparison import compare
from retbench.evaluation import Evaluation


def evaluations(systems: int, metrics: int, queries: int, seed: int = 7) -> list[Evaluation]:
    rng = np.random.default_rng(seed)
    qids = [f"q{i}" for i in range(queries)]
    names = [f"m{j}@10" for j in range(metrics)]
    base = rng.uniform(0, 1, size=(queries, metrics))
    out = []
    for s in range(systems):
        noise = rng.normal(0.02 * s, 0.15, size=(queries, metrics))
        v = np.clip(base + noise, 0, 1)
        v[rng.uniform(size=v.shape) < 0.2] = 0.0
        out.append(Evaluation(f"sys{s}", names, qids, np.round(v, 3), ["ok"] * queries))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--systems", type=int, default=8)
    ap.add_argument("--metrics", type=int, default=23)
    ap.add_argument("--queries", type=int, default=225)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    evs = evaluations(args.systems, args.metrics, args.queries)
    start = time.perf_counter()
    cmp = compare(evs, seed=args.seed)
    wall = time.perf_counter() - start
    numbers = [(r["p_randomization"], r["ci_low"], r["ci_high"]) for r in cmp.rows()]
    digest = hashlib.sha256(json.dumps([p for p, _, _ in numbers]).encode()).hexdigest()[:16]
    print(
        json.dumps(
            {
                "tests": cmp.family,
                "resamples": cmp.n_resamples,
                "wall_s": round(wall, 2),
                "p_randomization_sha256": digest,
                "ci_sum": float(sum(lo + hi for _, lo, hi in numbers)),
                "loadavg_1m": round(os.getloadavg()[0], 2),
            }
        )
    )


if __name__ == "__main__":
    main()
