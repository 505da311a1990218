"""Ingestion impact speed: the exact incremental engine against re-indexing and re-running, same results.

    .venv/bin/python benchmarks/ingest_speed.py [--candidates 200] [--bm25-candidates 20] [--repeat 3] [--docs N]

`--docs N` keeps the judged documents plus others up to N in all (a quick look; the test suite's smoke run).

SciFact: 200 random documents are held out of the corpus (K = the other 4,983) and evaluated as
candidates, each alone, against the 300 test queries (recall@10, nDCG@10, MRR@10). Peers in the same run:

- incremental: `DenseImpact.alone` (one queries x candidates product, per-query thresholds, merges);
  setup (K's top-(k+1) lists from the flat index) is timed separately;
- dense add + re-run: `RebuildImpact` over the flat DenseRetriever: FAISS add, search all queries,
  evaluate, FAISS remove, per candidate;
- dense re-index + re-run (the naive reference): `RebuildImpact(strategy="reindex")`: the index built from
  scratch over K + {d} (embeddings come from the on-disk cache, so no encoding is timed), search, evaluate;
- bm25s add + re-run: the BM25 adapter's `add` is a full rebuild (exact collection statistics), on the first
  `--bm25-candidates` candidates, reported per candidate.

Embeddings are encoded (or read from the cache) before any timing. Every dense peer must give the same
per-candidate deltas and changed queries as the incremental engine, or the script exits 1.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


from retbench.io.datasets import load_dataset
from retbench.retrievers.base import create
from retbench.retrievers.encoders import Encoder
from retbench.studies.impact import DenseImpact, Impact, RebuildImpact

METRICS = ["recall@10", "ndcg@10", "mrr@10"]


def same(a: list[Impact], b: list[Impact]) -> tuple[bool, float]:
    """Equal changed-query sets and deltas (up to float summation order) for every candidate."""
    worst = 0.0
    ok = True
    for x, y in zip(a, b, strict=True):
        ok &= x.doc_id == y.doc_id and sorted(x.changed) == sorted(y.changed)
        for m in METRICS:
            worst = max(worst, abs(x.deltas[m] - y.deltas[m]))
    return ok and worst < 1e-9, worst


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--candidates", type=int, default=200)
    ap.add_argument("--bm25-candidates", type=int, default=20)
    ap.add_argument("--repeat", type=int, default=3, help="runs of the incremental engine (median reported)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", help="also write the figures here")
    ap.add_argument("--docs", type=int, default=0, help="a corpus slice: the judged documents + others up to N")
    args = ap.parse_args()

    ds = load_dataset("scifact", ["test"])
    qrels = ds.split("test")
    if args.docs:
        judged = {d for q in qrels for d in qrels[q]}
        others = [d for d in ds.corpus.ids if d not in judged][: max(0, args.docs - len(judged))]
        keep = judged | set(others)
        ds.corpus = ds.corpus.subset([d for d in ds.corpus.ids if d in keep])
    qids = [q for q in qrels if q in ds.queries]
    queries = ds.queries.subset(qids)
    held = random.Random(args.seed).sample(list(ds.corpus.ids), args.candidates)
    held_set = set(held)
    kb = ds.corpus.subset([d for d in ds.corpus.ids if d not in held_set])
    cands = ds.corpus.subset(held)
    params = {"index": "flat_ip", "normalize": True, "max_seq_length": 256, "batch_size": 64}
    encoder = Encoder(max_seq_length=256, batch_size=64)
    t0 = time.perf_counter()
    encoder.encode_documents(ds.corpus.joined_texts())
    qv = encoder.encode_queries([queries[q] for q in qids])
    cv = encoder.encode_documents(cands.joined_texts())
    print(
        f"embeddings ready in {time.perf_counter() - t0:.1f}s (encoded {encoder.stats.encoded}, cached {encoder.stats.cached})"
    )

    dense = create("dense", {**params, "encoder": encoder})
    rows: list[dict] = []

    # incremental: setup once per run, alone() timed on its own
    setups, alones = [], []
    inc: list[Impact] = []
    for _ in range(args.repeat):
        t0 = time.perf_counter()
        dense.index(kb)
        t1 = time.perf_counter()
        eng = DenseImpact(kb.ids, qids, qv, qrels, METRICS, search=dense.search_embeddings)
        t2 = time.perf_counter()
        inc = eng.alone(cands.ids, cv)
        t3 = time.perf_counter()
        setups.append(t2 - t1)
        alones.append(t3 - t2)
    n = len(cands)
    t_inc = statistics.median(alones)
    t_setup = statistics.median(setups)
    rows.append(
        {"peer": "incremental (DenseImpact.alone)", "candidates": n, "seconds": t_inc, "setup_seconds": t_setup}
    )

    def timed(label: str, engine: RebuildImpact, corpus, k: int) -> list[Impact]:
        t0 = time.perf_counter()
        out = engine.alone(corpus)
        rows.append(
            {
                "peer": label,
                "candidates": k,
                "seconds": time.perf_counter() - t0,
                "split": {key: round(v, 3) for key, v in engine.seconds.items()},
            }
        )
        return out

    dense.index(kb)
    add_eng = RebuildImpact(dense, kb, queries, qrels, METRICS, indexed=True)
    add_eng.seconds = dict.fromkeys(add_eng.seconds, 0.0)
    add_res = timed("dense add + re-run (FAISS add/remove)", add_eng, cands, n)
    re_eng = RebuildImpact(dense, kb, queries, qrels, METRICS, strategy="reindex", indexed=True)
    re_eng.seconds = dict.fromkeys(re_eng.seconds, 0.0)
    re_res = timed("dense re-index + re-run (naive)", re_eng, cands, n)
    ok_add, worst_add = same(inc, add_res)
    ok_re, worst_re = same(inc, re_res)

    bm25 = create("bm25s", {"k1": 1.5, "b": 0.75, "method": "lucene", "stopwords": "en", "stemmer": "english"})
    k_bm = min(args.bm25_candidates, n)
    bm_eng = RebuildImpact(bm25, kb, queries, qrels, METRICS)
    bm_eng.seconds = dict.fromkeys(bm_eng.seconds, 0.0)
    timed("bm25s add (full rebuild) + re-run", bm_eng, cands.subset(cands.ids[:k_bm]), k_bm)

    per_inc = t_inc / n
    print()
    print(
        f"SciFact: K = {len(kb)} documents, {n} candidates (held out), {len(qids)} test queries; metrics {', '.join(METRICS)}"
    )
    print(f"incremental setup (K's top-11 per query from the flat index): {t_setup * 1000:.1f} ms, once")
    print()
    print("| peer | candidates | seconds | ms per candidate | slower than incremental |")
    print("|---|---|---|---|---|")
    for r in rows:
        per = r["seconds"] / r["candidates"]
        r["ms_per_candidate"] = per * 1000
        r["ratio"] = per / per_inc
        print(f"| {r['peer']} | {r['candidates']} | {r['seconds']:.3f} | {per * 1000:.2f} | {r['ratio']:.1f}x |")
    with_setup = (t_inc + t_setup) / n
    naive = next(r for r in rows if "naive" in r["peer"])
    print()
    print(
        f"naive / incremental: {naive['ratio']:.0f}x (with the setup counted: {naive['seconds'] / n / with_setup:.0f}x)"
    )
    print(
        f"same results as add+re-run: {ok_add} (max |delta difference| {worst_add:.2e}); "
        f"as re-index+re-run: {ok_re} (max {worst_re:.2e})"
    )
    changed = sum(bool(i.changed) for i in inc)
    print(
        f"candidates that change some query's top 10: {changed} of {n}; pairs evaluated: {sum(len(i.changed) for i in inc)}"
    )
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(
                {
                    "rows": rows,
                    "setup_seconds": t_setup,
                    "same_add": ok_add,
                    "same_reindex": ok_re,
                    "max_delta_diff": max(worst_add, worst_re),
                },
                fh,
                indent=2,
            )
    return 0 if ok_add and ok_re else 1


if __name__ == "__main__":
    sys.exit(main())
