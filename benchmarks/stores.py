"""Vector stores on the same embeddings: quality against exact search, filters, ingestion, latency and QPS.

    .venv/bin/python benchmarks/stores.py [--config configs/stores.yaml] [--only NAME ...] [--chroma-server]
                                          [--queries N --docs N]

Starts PostgreSQL + pgvector, Milvus Lite and Typesense on loopback (temporary folders, random
credentials in environment variables), points the config's pgvector/milvus/typesense systems at them,
and runs the same measurement for every system of `configs/stores.yaml` (SciFact test, 300 queries, all
fed the same all-MiniLM-L6-v2 vectors through the embedding cache; set RETBENCH_CACHE to share it):

1. index the corpus (documents carry a synthetic `year` field, 2000-2019 from the document id, for the
   filter pass): ingestion docs/s over the whole `index()` (vectors read from the cache, written,
   index built); the ANN build alone where the store builds after loading; size on disk (the
   store's own figure, or the growth of the server's data folder);
2. search all queries to depth 100: nDCG@10 and recall@10 (trec_eval rules), nDCG@10's rank interval among the
   systems (three or more: a paired bootstrap over the queries, those tied for first marked), and overlap@10
   with the exact reference (`faiss-flat`): |top10 ∩ exact top10| / 10;
3. the same queries each carrying a filter (a 5-year range, a 2-year range, or one year: 25%, 10% and 5%
   of the corpus): filtered recall@10 = |top10 ∩ exact filtered top10| / |exact filtered top10|, the
   exact filtered top 10 coming from FAISS flat with the filter applied exactly;
4. latency (the first `--latency-queries`, default 100): one query at a time after a warm-up, the store alone on pre-encoded query vectors (text
   systems get the text): p50/p99 and QPS with 1 client, then 8 client threads sharing the queries
   (wall-clock QPS and per-request p50/p99).
`--chroma-server` adds a Chroma HTTP system against `chroma run` on loopback. `--queries`/`--docs` take a
seeded slice (judged documents kept) for a quick look. FAISS and NumPy run single-threaded unless OMP_NUM_THREADS is set. Figures are this machine's at the time
of the run: compare rows, not absolute values.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", os.environ["OMP_NUM_THREADS"])

import numpy as np

from retbench.config import read_config
from retbench.data import Corpus, Queries
from retbench.evaluation import evaluate
from retbench.metrics.agreement import overlap_at_k
from retbench.report.resolution import interval_cell, note
from retbench.resolution import resolve
from retbench.retrievers.base import create
from retbench.retrievers.stores import VectorStoreRetriever
from retbench.studies.benchmark import parse_config, prepare_dataset
from retbench.testing import start_chroma, start_milvus, start_postgres, start_typesense

ROOT = Path(__file__).resolve().parents[1]
FILTERS = [{"year": {"gte": 2005, "lt": 2010}}, {"year": {"gte": 2018}}, {"year": 2003}]
SERVERS = {"pgvector": ("dsn", start_postgres), "milvus": ("uri", start_milvus), "typesense": ("url", start_typesense)}


def with_years(corpus: Corpus) -> Corpus:
    meta = [{"year": 2000 + int(d) % 20 if str(d).isdigit() else 2000 + i % 20} for i, d in enumerate(corpus.ids)]
    return Corpus(list(corpus.ids), list(corpus.texts), list(corpus.titles) if corpus.titles else None, meta)


def with_filters(queries: Queries) -> Queries:
    return Queries(dict(queries), {q: {"filter": FILTERS[i % len(FILTERS)]} for i, q in enumerate(queries)})


def folder_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def disk_size(r, server, before: int) -> float | None:
    """MB on disk: the store's own figure, a FAISS index's serialized size, a Chroma folder, or the
    growth of the server's data folder while indexing."""
    own = r.disk_bytes() if hasattr(r, "disk_bytes") else None
    if own is not None:
        return own / 1e6
    if server is not None:
        time.sleep(1)  # let the server flush what it buffers
        return (folder_bytes(server.folder) - before) / 1e6
    if r.adapter == "dense":
        import faiss

        return len(faiss.serialize_index(r._faiss_index)) / 1e6
    if r.adapter == "chroma" and r.path:
        return folder_bytes(Path(r.path)) / 1e6
    return None


def latency(call, n: int, clients: int) -> dict[str, float]:
    """Per-request latency (ms) and wall-clock QPS for n requests spread over `clients` threads."""
    lat = np.zeros(n)

    def worker(w: int) -> None:
        for i in range(w, n, clients):
            t0 = time.perf_counter()
            call(i)
            lat[i] = time.perf_counter() - t0

    with ThreadPoolExecutor(clients) as pool:
        list(pool.map(worker, range(clients)))  # warm-up: connections per thread, lazy loading
        t0 = time.perf_counter()
        list(pool.map(worker, range(clients)))
        wall = time.perf_counter() - t0
    ms = lat * 1000
    return {"p50": float(np.percentile(ms, 50)), "p99": float(np.percentile(ms, 99)), "qps": n / wall}


def measure(spec, corpus, queries, fqueries, qrels, server, n_latency: int) -> dict:
    r = create(spec.adapter, spec.params, name=spec.name)
    try:
        before = folder_bytes(server.folder) if server else 0
        t0 = time.perf_counter()
        r.index(corpus)
        index_s = time.perf_counter() - t0
        size = disk_size(r, server, before)
        run = r.search(queries, 100)
        ev = evaluate(run, qrels, ["ndcg@10", "recall@10"], system=spec.name)
        m = ev.means()
        frun = r.search(fqueries, 10) if "filters" in r.capabilities else None
        texts = list(queries.values())
        vector = r.adapter == "dense" or (
            isinstance(r, VectorStoreRetriever) and getattr(r, "mode", "vector") == "vector"
        )
        if vector:
            vectors = r.encoder.encode_queries(texts)
            search = r.search_embeddings if r.adapter == "dense" else r.search_vectors

            def call(i: int) -> None:
                search(vectors[i : i + 1], 10)
        else:

            def call(i: int) -> None:
                r.search_batch([texts[i]], 10)

        n = min(len(texts), n_latency)
        one, eight = latency(call, n, 1), latency(call, n, 8)
    finally:
        r.close()
    return {
        "name": spec.name,
        "vector": vector,
        "run": run,
        "ev": ev,
        "frun": frun,
        "ndcg": m["ndcg@10"],
        "recall": m["recall@10"],
        "docs_s": len(corpus) / index_s,
        "index_s": index_s,
        "build_s": getattr(r, "build_seconds", None),
        "size_mb": size,
        "one": one,
        "eight": eight,
    }


def fmt(x, spec: str) -> str:
    return "n/a" if x is None or (isinstance(x, float) and np.isnan(x)) else format(x, spec)


def table(rows: list[dict], exact: dict) -> str:
    """The comparison table; with three systems or more, each one's nDCG@10 rank interval (paired bootstrap over
    the queries, the systems tied for first marked) and the note saying what it means."""
    res = resolve([r["ev"] for r in rows], "ndcg@10")
    head = (
        "| system | nDCG@10 | rank 95% | Δ vs exact | recall@10 | overlap@10 with exact | filtered recall@10 | docs/s ingest "
        "| ANN build s | MB on disk | p50 ms (1) | p99 ms (1) | QPS (1) | p50 ms (8) | p99 ms (8) | QPS (8) |"
    )
    lines = [head, "|" + "---|" * 16]
    for r in rows:
        lines.append(
            f"| {r['name']} | {r['ndcg']:.4f} | {interval_cell(res, r['name'])} | {r['ndcg'] - exact['ndcg']:+.4f} | {r['recall']:.4f} | "
            f"{fmt(r['overlap'], '.3f')} | {fmt(r['filtered'], '.3f')} | {r['docs_s']:.0f} | {fmt(r['build_s'], '.2f')} | "
            f"{fmt(r['size_mb'], '.1f')} | {r['one']['p50']:.2f} | {r['one']['p99']:.2f} | {r['one']['qps']:.0f} | "
            f"{r['eight']['p50']:.2f} | {r['eight']['p99']:.2f} | {r['eight']['qps']:.0f} |"
        )
    if res is not None:
        lines += ["", note(res)]
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--config", default=str(ROOT / "configs" / "stores.yaml"))
    ap.add_argument("--baseline", default="faiss-flat", help="the exact system (its runs are the reference)")
    ap.add_argument("--only", nargs="*", help="measure only these systems (the baseline always runs)")
    ap.add_argument("--latency-queries", type=int, default=100, help="queries timed per latency pass (default 100)")
    ap.add_argument("--chroma-server", action="store_true", help="add a Chroma HTTP system (`chroma run`)")
    ap.add_argument("--queries", type=int, default=0, help="a seeded sample of N queries (default: all)")
    ap.add_argument("--docs", type=int, default=0, help="a corpus slice of N documents: the judged ones + others")
    args = ap.parse_args()

    raw = read_config(args.config)[0]
    raw["systems"] = [  # the wanted systems only: the servers started below set the passwords they name
        s
        for s in raw["systems"]
        if not args.only
        or (s.get("name") or s["adapter"]) in {*args.only, args.baseline}
        or (args.chroma_server and s["adapter"] == "chroma")  # the chroma-http system copies its settings
    ]
    servers = {}
    try:
        for adapter in {s["adapter"] for s in raw["systems"]} & set(SERVERS):
            servers[adapter] = SERVERS[adapter][1]()
            print(f"{adapter}: {servers[adapter].address}", file=sys.stderr)
        cfg = parse_config(raw, args.config)
        wanted = [s for s in cfg.systems if not args.only or s.name in args.only or s.name == args.baseline]
        wanted.sort(key=lambda s: s.name != args.baseline)
        if args.chroma_server:
            servers["chroma-http"] = chroma = start_chroma()
            base = next(s for s in cfg.systems if s.adapter == "chroma")
            params = {k: v for k, v in base.params.items() if k != "path"}
            wanted.append(
                base.model_copy(  # a system block is a pydantic model (the dataset spec below is a dataclass)
                    update={"name": "chroma-http", "params": {**params, "host": "127.0.0.1", "port": chroma.port}}
                )
            )
        first = cfg.dataset_specs[0]  # the validated dataset block as the runner reads it
        spec = dataclasses.replace(
            first,
            max_queries=args.queries or first.max_queries,
            corpus_sample=args.docs or first.corpus_sample,
        )
        ds, queries = prepare_dataset(spec)
        corpus, qrels = with_years(ds.corpus), ds.split(cfg.datasets[0].split)
        fqueries = with_filters(queries)
        rows = []
        for system in wanted:
            if system.adapter in servers:
                address = {SERVERS[system.adapter][0]: servers[system.adapter].address}
                system = system.model_copy(update={"params": {**system.params, **address}})
            t0 = time.perf_counter()
            server = servers.get("chroma-http" if system.name == "chroma-http" else system.adapter)
            rows.append(measure(system, corpus, queries, fqueries, qrels, server, args.latency_queries))
            print(f"{system.name}: {time.perf_counter() - t0:.0f} s", file=sys.stderr)
    finally:
        for server in servers.values():
            server.stop()
    exact = rows[0]
    for row in rows:  # agreement with exact search means something for vector search only
        row["overlap"] = overlap_at_k(row["run"], exact["run"], list(queries), 10)[0] if row["vector"] else None
        row["filtered"] = (
            overlap_at_k(row["frun"], exact["frun"], list(fqueries), 10)[0] if row["vector"] and row["frun"] else None
        )
    print(f"\nSciFact {cfg.datasets[0].split}: {len(corpus)} docs, {len(queries)} queries; filters cycled: {FILTERS}\n")
    print(table(rows, exact))
    vec = [r for r in rows[1:] if r["vector"]]
    if vec:
        worst = max(vec, key=lambda r: abs(r["ndcg"] - exact["ndcg"]))
        print(f"\nlargest |Δ nDCG@10| vs {args.baseline}: {worst['name']} {worst['ndcg'] - exact['ndcg']:+.4f}")


if __name__ == "__main__":
    main()
