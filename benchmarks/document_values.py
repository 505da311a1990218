"""Scale of exact document values (KNN-Shapley, precision@K, flat inner product) on synthetic embeddings.

Documents and queries are random unit vectors (float32); each query has 1-3 relevant documents, planted near it
with noise so that some rank inside the top K and some below it (the case that charges the documents above).
The run times `values.shapley_streamed` (scores by query block, exact values and leave-one-out of every document)
and prints seconds, the per-query cost, peak memory, the load average, and a linear extrapolation to the goal
size (1M documents x 10k queries): the work is one (block x N) matrix product plus O(N) passes per judged pair,
linear in both N and Q.

    python benchmarks/document_values.py --docs 200000 --queries 1000
"""

from __future__ import annotations

import argparse
import os
import resource
import time

import numpy as np

from retbench.values import Judged, shapley_streamed


def synthetic(docs: int, queries: int, dim: int, seed: int) -> tuple[np.ndarray, np.ndarray, Judged]:
    rng = np.random.default_rng(seed)
    d = rng.standard_normal((docs, dim), dtype=np.float32)
    d /= np.linalg.norm(d, axis=1, keepdims=True)
    q = rng.standard_normal((queries, dim), dtype=np.float32)
    q /= np.linalg.norm(q, axis=1, keepdims=True)
    per = rng.integers(1, 4, queries)
    qi = np.repeat(np.arange(queries), per)
    di = rng.choice(docs, len(qi), replace=False) if len(qi) <= docs else rng.integers(0, docs, len(qi))
    noise = rng.uniform(2.0, 8.0, len(qi)).astype(np.float32)[:, None]
    planted = q[qi] + noise * rng.standard_normal((len(qi), dim), dtype=np.float32) / np.sqrt(dim)
    d[di] = planted / np.linalg.norm(planted, axis=1, keepdims=True)
    judged = Judged(qi, di, np.ones(len(qi)), np.full(queries, 10.0))
    return q, d, judged


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--docs", type=int, default=200_000)
    ap.add_argument("--queries", type=int, default=1_000)
    ap.add_argument("--dim", type=int, default=384)
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--block", type=int, default=64)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    t0 = time.perf_counter()
    q, d, judged = synthetic(args.docs, args.queries, args.dim, args.seed)
    made = time.perf_counter() - t0
    tb = np.arange(args.docs)  # ids in index order: the larger index wins a tie
    t0 = time.perf_counter()
    out = shapley_streamed(q, d, judged, args.k, tb, block=args.block)
    secs = time.perf_counter() - t0
    peak_gib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
    cells = args.docs * args.queries
    goal = 1_000_000 * 10_000
    below = float(np.mean(out.positions > args.k))
    print(f"documents {args.docs:,} x queries {args.queries:,} (dim {args.dim}, K {args.k}, block {args.block})")
    print(f"judged pairs {len(judged.query):,}; ranked below K: {below:.0%}")
    print(f"synthetic data made in {made:.1f}s; embeddings {d.nbytes / 2**30:.2f} GiB")
    print(f"exact values + leave-one-out: {secs:.2f}s ({secs / args.queries * 1e3:.1f} ms per query)")
    print(f"efficiency check: sum of values {out.shapley.sum():.6f} = mean P@{args.k} {out.utility.mean():.6f}")
    print(f"peak RSS {peak_gib:.2f} GiB")
    print(f"extrapolated to 1M x 10k (linear in documents x queries): {secs * goal / cells / 60:.1f} min")
    print(f"load average at end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
