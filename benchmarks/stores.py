"""Vector stores on the same embeddings: quality against FAISS Flat, and latency/QPS side by side.

    .venv/bin/python benchmarks/stores.py [--config configs/stores.yaml] [--chroma-server] [--force]

1. Runs the experiment config through the runner (resumable: systems finished earlier are reused) and
   reads back nDCG@10 and recall@10 per system, the delta to Flat, and the overlap of each system's
   top 10 with Flat's (how much of the exact answer the approximate store returns).
2. Builds each system again and times the store alone, one query vector at a time (FAISS
   `search_embeddings`, the stores' `search_vectors`; vectors encoded beforehand), the way an
   application calls a store, after a warm-up: p50/p95 latency and sequential QPS. The batched figure
   is the runner's (the whole search over all queries in batches of `batch_size`, query encoding
   through the embedding cache included).

`--chroma-server` also starts `chroma run` on loopback (a temporary folder) and adds a Chroma HTTP
system. FAISS and NumPy run single-threaded unless OMP_NUM_THREADS is set. Numbers are for this machine
at the time of the run: compare rows, not absolute values.
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# One thread for FAISS (OpenMP) and NumPy's BLAS unless asked otherwise: single-query latency on a small,
# shared machine is otherwise dominated by thread wake-ups. Set OMP_NUM_THREADS=N to change it.
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", os.environ["OMP_NUM_THREADS"])

import numpy as np

from retbench.results import load_results
from retbench.retrievers.base import create
from retbench.studies.benchmark import SystemSpec, load_config, prepare_dataset, run_experiment

ROOT = Path(__file__).resolve().parents[1]


def start_chroma() -> tuple[subprocess.Popen, int, str]:
    exe = shutil.which("chroma") or str(Path(sys.executable).with_name("chroma"))
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    folder = tempfile.mkdtemp(prefix="retbench-chroma-")
    proc = subprocess.Popen(
        [exe, "run", "--path", folder, "--host", "127.0.0.1", "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "ANONYMIZED_TELEMETRY": "False"},
    )
    deadline = time.monotonic() + 60
    while True:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/v2/heartbeat", timeout=2):
                return proc, port, folder
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                raise SystemExit("chroma run did not start") from None
            time.sleep(0.3)


def overlap_at(run_a, run_b, k: int = 10) -> float:
    """Mean |top-k(a) ∩ top-k(b)| / k over queries both answered."""
    shared = [q for q in run_a.query_ids if q in run_b]
    return float(np.mean([len(set(run_a.docs(q)[:k]) & set(run_b.docs(q)[:k])) / k for q in shared]))


def time_single(spec: SystemSpec, corpus, queries, where: str) -> dict[str, float]:
    """Index, then time the store alone on one query vector at a time (vectors encoded beforehand)."""
    r = create(spec.adapter, spec.params, name=spec.name, where=where)
    try:
        t0 = time.perf_counter()
        r.index(corpus)
        index_s = time.perf_counter() - t0
        vectors = r.encoder.encode_queries(list(queries.values()))
        search = r.search_embeddings if hasattr(r, "search_embeddings") else r.search_vectors  # FAISS | stores
        for v in vectors[:20]:  # warm-up: lazy graph loading, connections
            search(v[None], 10)
        lat = []
        for v in vectors:
            t0 = time.perf_counter()
            search(v[None], 10)
            lat.append(time.perf_counter() - t0)
    finally:
        r.close()
    arr = np.asarray(lat) * 1000
    return {
        "index_s": index_s,
        "p50": float(np.percentile(arr, 50)),
        "p95": float(np.percentile(arr, 95)),
        "qps": len(arr) / (arr.sum() / 1000),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--config", default=str(ROOT / "configs" / "stores.yaml"))
    ap.add_argument("--output", default=None, help="results directory (default: the config's)")
    ap.add_argument("--chroma-server", action="store_true", help="also start `chroma run` and add a Chroma HTTP system")
    ap.add_argument("--baseline", default="faiss-flat")
    ap.add_argument(
        "--force", action="store_true", help="redo systems finished earlier (fresh batched timings for all)"
    )
    args = ap.parse_args()

    cfg = load_config(args.config, args.output)
    server = None
    if args.chroma_server:
        proc, port, folder = start_chroma()
        server = (proc, folder)
        base = next(s for s in cfg.systems if s.adapter == "chroma")
        params = {k: v for k, v in base.params.items() if k != "path"}
        cfg.systems.append(SystemSpec("chroma-http", "chroma", {**params, "host": "127.0.0.1", "port": port}))
        shutil.rmtree(cfg.output / "systems" / "chroma-http", ignore_errors=True)  # a new server (and port) each time
    try:
        t0 = time.perf_counter()
        outcome = run_experiment(cfg, force=args.force, log=lambda m: print(m, file=sys.stderr))
        print(f"experiment: {time.perf_counter() - t0:.1f} s -> {cfg.output}", file=sys.stderr)
        res = load_results(cfg.output)
        ds, queries = prepare_dataset(cfg.datasets[0])
        flat_run = res.run(args.baseline)
        flat_ndcg = res.metrics_json[args.baseline]["ndcg@10"]
        rows = []
        for spec in cfg.systems:
            m = res.metrics_json[spec.name]
            timings = next(o.timings for o in outcome.systems if o.name == spec.name)
            single = time_single(spec, ds.corpus, queries, cfg.source)
            rows.append(
                (
                    spec.name,
                    m["ndcg@10"],
                    m["ndcg@10"] - flat_ndcg,
                    m["recall@10"],
                    overlap_at(res.run(spec.name), flat_run),
                    single["index_s"],
                    single["p50"],
                    single["p95"],
                    single["qps"],
                    len(queries) / timings["search_seconds"] if timings.get("search_seconds") else float("nan"),
                    m["coverage"]["failed"],
                )
            )
    finally:
        if server is not None:
            server[0].terminate()
            server[0].wait(timeout=30)
            shutil.rmtree(server[1], ignore_errors=True)

    print(
        f"\nSciFact {cfg.datasets[0].split}: {len(ds.corpus)} docs, {len(queries)} queries, same MiniLM embeddings for every system\n"
    )
    print(
        "| system | nDCG@10 | Δ vs Flat | recall@10 | top-10 overlap with Flat | index s | p50 ms | p95 ms | QPS (one at a time) | QPS (runner, batched) | failed |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for name, ndcg, delta, rec, ov, idx, p50, p95, qps, bqps, failed in rows:
        print(
            f"| {name} | {ndcg:.4f} | {delta:+.4f} | {rec:.4f} | {ov:.3f} | {idx:.1f} | {p50:.2f} | {p95:.2f} | {qps:.0f} | {bqps:.0f} | {failed} |"
        )
    worst = max(abs(r[2]) for r in rows)
    print(f"\nlargest |Δ nDCG@10| vs {args.baseline}: {worst:.4f} ({'within' if worst <= 0.01 else 'OUTSIDE'} 0.01)")


if __name__ == "__main__":
    main()
