"""A 1M-document synthetic BM25 run: retbench's bm25s adapter vs raw bm25s, time and peak memory.

The corpus is synthetic (no million-document corpus ships offline): words drawn from a 50,000-word
vocabulary of made-up lowercase words with Zipf-like frequencies (p ∝ 1/rank^1.1), document lengths
Poisson(60) (at least 5), seeded. It is written once to a parquet file (`--data`, default a temp dir)
and each side runs in its own fresh process so its peak RSS (getrusage ru_maxrss) is its own:

  retbench  pyarrow.parquet.read_table(memory_map=True) -> corpus_from_arrow (lazy Arrow columns)
            -> create("bm25s").index(corpus) (tokenized and counted a batch at a time) -> search_batch
  raw       the same table's texts as a Python list -> bm25s.tokenize(stopwords="en", Stemmer english)
            -> bm25s.BM25().index(tokens) -> retrieve (what bm25s's README does)

Both score with bm25s defaults (lucene, k1 1.5, b 0.75) and answer the same queries (5 words each)
to depth 100; the top-10 of both sides are compared. The sides run one after the other (never
together), alternating order over --repeat rounds; medians are reported with retbench/raw ratios.

    .venv/bin/python benchmarks/scale_bm25.py [--docs 1000000] [--queries 1000] [--repeat 1]
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

K = 100


def generate(path: Path, n_docs: int, n_queries: int, seed: int = 0) -> None:
    """Write corpus.parquet (_id, text) and queries.json under `path`, a chunk of documents at a time."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = np.random.default_rng(seed)
    vocab_size = 50_000
    letters = np.array(list("abcdefghijklmnopqrstuvwxyz"))
    words = ["".join(rng.choice(letters, size=int(rng.integers(3, 10)))) for _ in range(vocab_size)]
    p = 1.0 / np.arange(1, vocab_size + 1) ** 1.1
    p /= p.sum()
    path.mkdir(parents=True, exist_ok=True)
    schema = pa.schema([("_id", pa.string()), ("text", pa.string())])
    with pq.ParquetWriter(path / "corpus.parquet", schema) as writer:
        for start in range(0, n_docs, 100_000):
            n = min(100_000, n_docs - start)
            lengths = np.maximum(5, rng.poisson(60, size=n))
            drawn = rng.choice(vocab_size, size=int(lengths.sum()), p=p)
            bounds = np.concatenate([[0], np.cumsum(lengths)])
            texts = [" ".join(words[w] for w in drawn[bounds[i] : bounds[i + 1]]) for i in range(n)]
            ids = [f"d{start + i}" for i in range(n)]
            writer.write_table(pa.table({"_id": ids, "text": texts}, schema=schema))
    queries = [" ".join(words[w] for w in rng.choice(vocab_size, size=5, p=p)) for _ in range(n_queries)]
    (path / "queries.json").write_text(json.dumps(queries))


def _peak_mib() -> float:
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


def side_retbench(path: Path, queries: list[str]) -> dict:
    import pyarrow.parquet as pq

    from retbench.io.hf import corpus_from_arrow
    from retbench.retrievers import create

    t0 = time.perf_counter()
    corpus = corpus_from_arrow(pq.read_table(path / "corpus.parquet", memory_map=True))
    r = create("bm25s", {})
    r.index(corpus)
    t1 = time.perf_counter()
    rankings = r.search_batch(queries, K)
    t2 = time.perf_counter()
    return {"index_s": t1 - t0, "search_s": t2 - t1, "top10": [[d for d, _ in x[:10]] for x in rankings]}


def side_raw(path: Path, queries: list[str]) -> dict:
    import bm25s
    import pyarrow.parquet as pq
    import Stemmer

    t0 = time.perf_counter()
    table = pq.read_table(path / "corpus.parquet")
    ids = table.column("_id").to_pylist()
    texts = [t.strip() for t in table.column("text").to_pylist()]
    del table
    stemmer = Stemmer.Stemmer("english")
    model = bm25s.BM25()
    model.index(bm25s.tokenize(texts, stopwords="en", stemmer=stemmer, show_progress=False), show_progress=False)
    t1 = time.perf_counter()
    qtok = bm25s.tokenize(queries, stopwords="en", stemmer=stemmer, return_ids=False, show_progress=False)
    docs, scores = model.retrieve(qtok, k=K, show_progress=False)
    top10 = [[ids[j] for j, s in zip(docs[i], scores[i], strict=True) if s != 0][:10] for i in range(len(queries))]
    t2 = time.perf_counter()
    return {"index_s": t1 - t0, "search_s": t2 - t1, "top10": top10}


def one(side: str, path: Path) -> None:
    queries = json.loads((path / "queries.json").read_text())
    out = (side_retbench if side == "retbench" else side_raw)(path, queries)
    out["peak_rss_mib"] = _peak_mib()
    print(json.dumps(out))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--docs", type=int, default=1_000_000)
    ap.add_argument("--queries", type=int, default=1000)
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--data", default="", help="folder for the generated corpus (kept; reused if present)")
    ap.add_argument("--one", choices=["retbench", "raw"], help=argparse.SUPPRESS)
    args = ap.parse_args()
    path = Path(args.data or Path(tempfile.gettempdir()) / f"retbench-synthetic-{args.docs}")
    if args.one:
        one(args.one, path)
        return
    if not (path / "corpus.parquet").is_file():
        t0 = time.perf_counter()
        generate(path, args.docs, args.queries)
        print(f"generated {args.docs:,} documents in {time.perf_counter() - t0:.0f} s -> {path}")
    runs: dict[str, list[dict]] = {"retbench": [], "raw": []}
    for r in range(args.repeat):
        for side in ("retbench", "raw") if r % 2 == 0 else ("raw", "retbench"):
            cmd = [sys.executable, __file__, "--one", side, "--data", str(path), "--docs", str(args.docs)]
            runs[side].append(json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout))
    med = {
        s: {k: statistics.median(x[k] for x in v) for k in ("index_s", "search_s", "peak_rss_mib")}
        for s, v in runs.items()
    }
    same = runs["retbench"][0]["top10"] == runs["raw"][0]["top10"]
    print(
        f"{args.docs:,} documents, {args.queries:,} queries, depth {K}, {args.repeat} round(s); top-10 identical: {same}"
    )
    print(f"{'':10} {'index+tokenize s':>17} {'search s':>9} {'total s':>8} {'peak RSS MiB':>13}")
    for s in ("retbench", "raw"):
        m = med[s]
        print(
            f"{s:10} {m['index_s']:17.1f} {m['search_s']:9.1f} {m['index_s'] + m['search_s']:8.1f} {m['peak_rss_mib']:13.0f}"
        )
    a, b = med["retbench"], med["raw"]
    ratio_t = (a["index_s"] + a["search_s"]) / (b["index_s"] + b["search_s"])
    print(f"ratio retbench/raw: time {ratio_t:.2f}x, peak memory {a['peak_rss_mib'] / b['peak_rss_mib']:.2f}x")


if __name__ == "__main__":
    main()
