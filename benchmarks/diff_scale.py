"""Migration canary at scale: 100k documents x 10k logged queries, two encoders with cached embeddings, and the
overlap report (`movement.diff`: every label-free measure with bootstrap intervals, the moved queries, the
documents entering or leaving many top 10s) in at most 5 minutes on the 2-core machine.

The embeddings are synthetic (no encode is timed: the goal assumes both encoders' embeddings are cached): the
current encoder's are random unit vectors in 384 dimensions (MiniLM's width) with topic structure (documents and
queries drawn around 2,000 centres), the candidate's the same vectors rotated by a random orthogonal map and
perturbed (noise 0.35), so a real share of top 10s changes. They are written to .npy files first (the cache) and
read back memory-mapped. Search is exact inner product (what the `dense` adapter's flat_ip index computes), in
blocks of queries, top 100 each, into a Run. Timed: loading the cached embeddings, both searches, the diff
(k = 10, p = 0.9, 10,000 bootstrap resamples) and the Markdown and HTML report. `--tiny`: 2,000 x 200.

    flock /tmp/retbench-heavy.lock .venv/bin/python benchmarks/diff_scale.py [--tiny]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

import numpy as np

from retbench.data import Run
from retbench.movement import diff
from retbench.report.diff import diff_html, diff_markdown

DIM = 384
DEPTH = 100


def _unit(x: np.ndarray) -> np.ndarray:
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


def make_cache(folder: Path, n_docs: int, n_queries: int, seed: int = 0) -> None:
    """Both encoders' document and query embeddings as .npy files (the embedding cache stand-in)."""
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((max(n_docs // 50, 10), DIM)).astype(np.float32)
    docs = _unit(centres[rng.integers(0, len(centres), n_docs)] + 0.8 * rng.standard_normal((n_docs, DIM)))
    queries = _unit(centres[rng.integers(0, len(centres), n_queries)] + 0.8 * rng.standard_normal((n_queries, DIM)))
    rotation, _ = np.linalg.qr(rng.standard_normal((DIM, DIM)))
    rotation = rotation.astype(np.float32)
    np.save(folder / "current_docs.npy", docs)
    np.save(folder / "current_queries.npy", queries)
    np.save(folder / "candidate_docs.npy", _unit(docs @ rotation + 0.35 * rng.standard_normal(docs.shape) / DIM**0.5))
    np.save(folder / "candidate_queries.npy", _unit(queries @ rotation))


def search(docs: np.ndarray, queries: np.ndarray, doc_ids: np.ndarray, name: str, block: int = 512) -> Run:
    """Exact inner-product top DEPTH per query, in blocks of queries, as a Run."""
    n = len(queries)
    top_idx = np.empty((n, DEPTH), dtype=np.int64)
    top_score = np.empty((n, DEPTH), dtype=np.float64)
    for lo in range(0, n, block):
        scores = queries[lo : lo + block] @ docs.T
        part = np.argpartition(-scores, DEPTH, axis=1)[:, :DEPTH]
        s = np.take_along_axis(scores, part, axis=1)
        order = np.argsort(-s, axis=1, kind="stable")
        top_idx[lo : lo + block] = np.take_along_axis(part, order, axis=1)
        top_score[lo : lo + block] = np.take_along_axis(s, order, axis=1)
    offsets = np.arange(0, n * DEPTH + 1, DEPTH, dtype=np.int64)
    qids = [f"q{i}" for i in range(n)]
    return Run(qids, offsets, doc_ids[top_idx.ravel()], top_score.ravel(), name=name)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tiny", action="store_true", help="2,000 documents x 200 queries (a smoke run)")
    ap.add_argument("--resamples", type=int, default=10_000)
    args = ap.parse_args()
    n_docs, n_queries = (2_000, 200) if args.tiny else (100_000, 10_000)
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    with tempfile.TemporaryDirectory(prefix="retbench-diff-scale-") as tmp:
        folder = Path(tmp)
        t = time.perf_counter()
        make_cache(folder, n_docs, n_queries)
        print(f"cache written (not timed below): {time.perf_counter() - t:.1f} s")
        doc_ids = np.array([f"doc{i}" for i in range(n_docs)], dtype=object)
        start = time.perf_counter()
        runs = {}
        for name in ("current", "candidate"):
            t = time.perf_counter()
            docs = np.load(folder / f"{name}_docs.npy", mmap_mode="r")
            queries = np.load(folder / f"{name}_queries.npy", mmap_mode="r")
            runs[name] = search(np.asarray(docs), np.asarray(queries), doc_ids, name)
            print(f"{name}: load + search {n_queries} x {n_docs}: {time.perf_counter() - t:.1f} s")
        t = time.perf_counter()
        d = diff(runs["current"], runs["candidate"], k=10, p=0.9, n_resamples=args.resamples)
        t_diff = time.perf_counter() - t
        t = time.perf_counter()
        diff_markdown(d)
        diff_html(d)
        t_report = time.perf_counter() - t
        total = time.perf_counter() - start
    print(f"diff (k=10, p=0.9, {args.resamples} resamples): {t_diff:.1f} s; report: {t_report:.2f} s")
    print(f"total from cached embeddings to report: {total:.1f} s (goal: <= 300 s)")
    c = d.counts
    print(
        f"changed top 10: {c['changed_set']} of {c['queries']} as a set, {c['changed_order']} as an order; "
        f"RBO_EXT mean {d.measure('rbo_ext').mean:.3f}"
    )
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
