"""BM25 index + search: retbench adapters vs the raw libraries, side by side in one process.

Paths (same texts: SciFact title + text; same queries; k = 100):
  retbench bm25s      create("bm25s").index(corpus); .search(queries, 100) -> Run
  raw bm25s           bm25s.tokenize(stopwords="en", Stemmer english) + BM25().index + retrieve
  retbench rank_bm25  create("rank_bm25").index(corpus); .search(queries, 100) -> Run
  raw rank_bm25       BM25Okapi over the same tokens + get_scores + argsort per query
Every path starts from the same read corpus (`Corpus`) and query texts, and its timer holds all the work
from there: joining titles and texts, building the stemmer and tokenizer, and the ids' array each raw
path uses to name documents are inside the raw paths' timers, as retbench's own (create, join, id checks,
corpus fingerprint) are inside its. Each path runs --repeat times, interleaved (so load from other processes hits all paths alike);
the median is reported, with the ratio to the raw library. `--scale N` repeats the corpus N times
under new ids to see how index time grows. Also prints nDCG@10 (pytrec_eval) of each path on the
test split, and the time of `add` (a full rebuild) of one document.

    .venv/bin/python benchmarks/bm25_speed.py [--repeat 5] [--scale 1] [--queries test|all]
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from metrics_speed import record_figures
from retbench.data import Corpus
from retbench.io.beir import read_beir
from retbench.retrievers import create

ROOT = Path(__file__).resolve().parents[1]
K = 100


def ndcg10(results: dict[str, dict[str, float]], qrels: dict[str, dict[str, int]]) -> float:
    import pytrec_eval

    per_query = pytrec_eval.RelevanceEvaluator(qrels, {"ndcg_cut.10"}).evaluate(results)
    return float(np.mean([per_query.get(q, {"ndcg_cut_10": 0.0})["ndcg_cut_10"] for q in qrels]))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpus", default=str(ROOT / "corpora" / "scifact"))
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--scale", type=int, default=1, help="repeat the corpus N times under new ids")
    ap.add_argument("--queries", choices=["test", "all"], default="test")
    ap.add_argument("--figures", help="merge the ratios of this run into this JSON file")
    args = ap.parse_args()

    import bm25s
    import rank_bm25
    import Stemmer

    ds = read_beir(args.corpus)
    corpus = ds.corpus
    if args.scale > 1:
        n = args.scale
        corpus = Corpus(
            [f"{d}#{r}" if r else d for r in range(n) for d in corpus.ids],
            list(corpus.texts) * n,
            list(corpus.titles) * n,
        )
    qrels = ds.split("test")
    queries = ds.queries.subset(list(qrels)) if args.queries == "test" else ds.queries
    qids, qtexts = list(queries), list(queries.values())
    print(f"{len(corpus)} documents, {len(qtexts)} queries, k={K}, repeat {args.repeat}")

    def retbench_path(adapter: str) -> Callable[[], tuple[float, float, dict]]:
        def run() -> tuple[float, float, dict]:
            t0 = time.perf_counter()
            r = create(adapter)
            r.index(corpus)
            t1 = time.perf_counter()
            out = r.search(queries, K)
            t2 = time.perf_counter()
            return t1 - t0, t2 - t1, out.to_dict()

        return run

    def raw_bm25s() -> tuple[float, float, dict]:
        t0 = time.perf_counter()
        stem = Stemmer.Stemmer("english")
        texts, id_array = corpus.joined_texts(), np.asarray(corpus.ids, dtype=object)
        model = bm25s.BM25(k1=1.5, b=0.75)
        model.index(bm25s.tokenize(texts, stopwords="en", stemmer=stem, show_progress=False), show_progress=False)
        t1 = time.perf_counter()
        qtok = bm25s.tokenize(qtexts, stopwords="en", stemmer=stem, return_ids=False, show_progress=False)
        docs, scores = model.retrieve(qtok, k=K, show_progress=False)
        results = {
            q: dict(zip(id_array[docs[i]].tolist(), scores[i].tolist(), strict=True)) for i, q in enumerate(qids)
        }
        t2 = time.perf_counter()
        return t1 - t0, t2 - t1, results

    def raw_rank_bm25() -> tuple[float, float, dict]:
        from retbench.retrievers.tokenize import Tokenizer

        t0 = time.perf_counter()
        tok = Tokenizer()
        texts, id_array = corpus.joined_texts(), np.asarray(corpus.ids, dtype=object)
        model = rank_bm25.BM25Okapi(tok.tokenize(texts), k1=1.5, b=0.75)
        t1 = time.perf_counter()
        results = {}
        for q, toks in zip(qids, tok.tokenize(qtexts), strict=True):
            s = model.get_scores(toks)
            top = np.argsort(-s)[:K]
            results[q] = dict(zip(id_array[top].tolist(), s[top].tolist(), strict=True))
        t2 = time.perf_counter()
        return t1 - t0, t2 - t1, results

    paths: dict[str, Callable[[], tuple[float, float, dict]]] = {
        "retbench bm25s": retbench_path("bm25s"),
        "raw bm25s": raw_bm25s,
        "retbench rank_bm25": retbench_path("rank_bm25"),
        "raw rank_bm25": raw_rank_bm25,
    }
    times: dict[str, list[tuple[float, float]]] = {p: [] for p in paths}
    quality: dict[str, float] = {}
    for rep in range(args.repeat):
        order = list(paths) if rep % 2 == 0 else list(reversed(paths))
        for name in order:
            t_index, t_search, results = paths[name]()
            times[name].append((t_index, t_search))
            if name not in quality:
                quality[name] = ndcg10(results, qrels.to_dict())

    add_times = []
    r = create("bm25s")
    r.index(corpus)
    for i in range(args.repeat):
        t0 = time.perf_counter()
        r.add(Corpus([f"new-{i}"], ["A new abstract on retrieval benchmarks and BM25 rebuild cost."]))
        add_times.append(time.perf_counter() - t0)

    med = {p: (statistics.median(t[0] for t in v), statistics.median(t[1] for t in v)) for p, v in times.items()}
    raw_of = {
        "retbench bm25s": "raw bm25s",
        "raw bm25s": "raw bm25s",
        "retbench rank_bm25": "raw rank_bm25",
        "raw rank_bm25": "raw rank_bm25",
    }
    print()
    print(f"{'path':<22}{'index s':>9}{'search s':>10}{'total s':>9}{'q/s':>9}{'vs raw':>9}{'nDCG@10':>9}")
    for p, (ti, ts) in med.items():
        base = sum(med[raw_of[p]])
        print(
            f"{p:<22}{ti:>9.3f}{ts:>10.3f}{ti + ts:>9.3f}{len(qtexts) / ts:>9.0f}{(ti + ts) / base:>9.3f}{quality[p]:>9.4f}"
        )
    print()
    bm25s_total, rank_total = sum(med["retbench bm25s"]), sum(med["retbench rank_bm25"])
    print(f"retbench rank_bm25 / retbench bm25s total time: {rank_total / bm25s_total:.1f}x")
    print(
        f"bm25s add of 1 document (full rebuild over {len(corpus)}+ docs): median {statistics.median(add_times):.3f}s"
    )
    if args.figures:
        ours, raw = med["retbench bm25s"], med["raw bm25s"]
        record_figures(
            args.figures,
            {
                "bm25.index_search": {
                    "figure": f"{sum(ours) / sum(raw):.2f}x",
                    "retbench_s": round(sum(ours), 3),
                    "peer": "raw bm25s",
                    "peer_s": round(sum(raw), 3),
                },
                "bm25.search": {
                    "figure": f"{ours[1] / raw[1]:.2f}x",
                    "retbench_s": round(ours[1], 3),
                    "peer": "raw bm25s",
                    "peer_s": round(raw[1], 3),
                },
            },
        )


if __name__ == "__main__":
    main()
