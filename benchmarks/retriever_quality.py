"""nDCG@10 of the built-in retrievers on BEIR SciFact (test split, 300 queries) vs published figures.

Metrics straight from pytrec_eval ('ndcg_cut.10', 'recall.100'), averaged over every query in the
qrels (a query a system did not answer counts 0). Embeddings go through the default cache
(`.retbench-cache/embeddings` or $RETBENCH_CACHE), so only the first run encodes the corpus.

    .venv/bin/python benchmarks/retriever_quality.py [--queries N --docs N]

`--queries N --docs N` score a slice (the first N test queries; their judged documents plus others up to N
documents): a quick look (the test suite's smoke run), not comparable with the published figures.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import numpy as np

from retbench.io.beir import read_beir
from retbench.retrievers import create

ROOT = Path(__file__).resolve().parents[1]
BM25 = {
    "adapter": "bm25s",
    "params": {"k1": 1.5, "b": 0.75, "method": "lucene", "stopwords": "en", "stemmer": "english"},
}
DENSE = {"adapter": "dense", "params": {"index": "flat_ip", "normalize": True, "max_seq_length": 256, "batch_size": 64}}
SYSTEMS = {
    "bm25s (k1 1.5, b .75, en stopwords, Snowball)": BM25,
    "rank_bm25 okapi (same tokens)": {"adapter": "rank_bm25", "params": {"variant": "okapi"}},
    "dense all-MiniLM-L6-v2 flat_ip len 256": DENSE,
    "hybrid rrf k=60 (bm25s + dense, depth 100)": {
        "adapter": "hybrid",
        "params": {"fusion": "rrf", "rrf_k": 60, "components": [BM25, DENSE], "depth": 100},
    },
    "hybrid weighted minmax .5/.5": {
        "adapter": "hybrid",
        "params": {"fusion": "weighted", "normalization": "minmax", "components": [BM25, DENSE], "depth": 100},
    },
    "hybrid weighted zscore .5/.5": {
        "adapter": "hybrid",
        "params": {"fusion": "weighted", "normalization": "zscore", "components": [BM25, DENSE], "depth": 100},
    },
}
PUBLISHED = {
    "bm25s (k1 1.5, b .75, en stopwords, Snowball)": "0.687 (bm25s)",
    "dense all-MiniLM-L6-v2 flat_ip len 256": "0.64508 (MTEB)",
}


def main() -> None:
    import pytrec_eval

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--queries", type=int, default=0, help="the first N test queries only (0: all 300)")
    ap.add_argument("--docs", type=int, default=0, help="their judged documents plus others up to N (0: all)")
    args = ap.parse_args()
    ds = read_beir(ROOT / "corpora" / "scifact")
    qrels = ds.split("test")
    if args.queries:
        qrels = qrels.subset(list(qrels)[: args.queries])
    if args.docs:
        judged = {d for q in qrels for d in qrels[q]}
        others = [d for d in ds.corpus.ids if d not in judged][: max(0, args.docs - len(judged))]
        keep = judged | set(others)
        ds.corpus = ds.corpus.subset([d for d in ds.corpus.ids if d in keep])
    queries = ds.queries.subset(list(qrels))
    evaluator = pytrec_eval.RelevanceEvaluator(qrels.to_dict(), {"ndcg_cut.10", "recall.100"})
    print(f"SciFact test: {len(ds.corpus)} documents, {len(queries)} queries\n")
    print(f"{'system':<48}{'nDCG@10':>9}{'R@100':>8}{'seconds':>9}  published")
    for name, spec in SYSTEMS.items():
        t0 = time.perf_counter()
        r = create(spec["adapter"], spec["params"], name=name)
        r.index(ds.corpus)
        run = r.search(queries, 100)
        seconds = time.perf_counter() - t0
        per_query = evaluator.evaluate(run.to_dict())
        ndcg = np.mean([per_query[q]["ndcg_cut_10"] if q in per_query else 0.0 for q in qrels])
        rec = np.mean([per_query[q]["recall_100"] if q in per_query else 0.0 for q in qrels])
        print(f"{name:<48}{ndcg:>9.4f}{rec:>8.4f}{seconds:>9.1f}  {PUBLISHED.get(name, '')}", flush=True)


if __name__ == "__main__":
    main()
