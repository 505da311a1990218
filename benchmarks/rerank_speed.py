"""Rerank-stage throughput vs a raw `CrossEncoder.predict` over the very same pairs.

Pairs: BM25's top `--depth` SciFact abstracts for the first `--queries` test queries. Both sides use
one model object and the same batch size, in one process:
  raw     CrossEncoder.predict(pairs of a block of queries)
  stage   RerankStage.rerank(first-stage run of that block) into an empty pair cache
          (hashing, cache shard writes, sorting and the invariant checks included)
Blocks of queries alternate raw/stage in ABBA order so load from other processes hits both alike.
  warm    a fresh stage on the same cache: the same run again (no pair should reach the model)

Goal: stage >= 0.95x raw pairs per second; warm scores 0 pairs.

    .venv/bin/python benchmarks/rerank_speed.py --model models/retbench-scifact-ce [--queries 100] [--depth 20]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from retbench.io.datasets import load_dataset
from retbench.retrievers.bm25 import BM25SRetriever
from retbench.retrievers.rerank import CrossEncoderReranker, RerankStage


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True)
    ap.add_argument("--queries", type=int, default=100)
    ap.add_argument("--depth", type=int, default=20)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--max-length", type=int, default=256)
    ap.add_argument("--block", type=int, default=10, help="queries per raw/stage block")
    args = ap.parse_args()

    ds = load_dataset("scifact", ["test"])
    qrels = ds.split("test")
    queries = ds.queries.subset([q for q in qrels if q in ds.queries][: args.queries])
    bm25 = BM25SRetriever()
    bm25.index(ds.corpus)
    first = bm25.search(queries, args.depth)
    reranker = CrossEncoderReranker(args.model, batch_size=args.batch_size, max_length=args.max_length)
    text = {d: ds.corpus.joined(i) for d, i in ds.corpus.index.items()}
    reranker.predict([("warm up", "the model")] * 4)
    qids = list(first.query_ids)
    blocks = [qids[i : i + args.block] for i in range(0, len(qids), args.block)]
    t = {"raw": 0.0, "stage": 0.0}
    n_pairs = 0
    with tempfile.TemporaryDirectory() as cache:
        for b, block in enumerate(blocks):
            part = first.subset(block)
            pairs = [(queries[q], text[d]) for q in block for d in part.docs(q)]
            n_pairs += len(pairs)
            stage = RerankStage(reranker, args.depth, cache_dir=cache)
            order = ("raw", "stage") if b % 4 in (0, 3) else ("stage", "raw")
            for side in order:
                t0 = time.perf_counter()
                if side == "raw":
                    reranker.predict(pairs)
                else:
                    reranked = stage.rerank(part, queries, ds.corpus)
                    if reranked.errors:  # a failed stage is fast and wrong: never report its timing
                        raise SystemExit(f"rerank stage failed: {next(iter(reranked.errors.values()))}")
                t[side] += time.perf_counter() - t0
        warm = RerankStage(reranker, args.depth, cache_dir=cache)
        t0 = time.perf_counter()
        warm.rerank(first, queries, ds.corpus)
        t_warm = time.perf_counter() - t0
    print(
        f"{len(qids)} queries x depth {args.depth} = {n_pairs} pairs, batch {args.batch_size}, max_length {args.max_length}"
    )
    print(f"raw CrossEncoder.predict  {n_pairs / t['raw']:8.1f} pairs/s  ({t['raw']:.1f} s)")
    print(f"rerank stage (cold cache) {n_pairs / t['stage']:8.1f} pairs/s  ({t['stage']:.1f} s)")
    print(f"stage / raw throughput    {t['raw'] / t['stage']:.3f}x  (goal >= 0.95x)")
    print(f"warm re-run               {t_warm:.2f} s, pairs scored {warm.stats.scored}, cached {warm.stats.cached}")


if __name__ == "__main__":
    main()
