"""Corpus encoding throughput: raw sentence-transformers vs retbench in process vs retbench on Ray.

Same model (the packaged all-MiniLM-L6-v2, max 256 tokens, normalized, batch 32) and the same texts
(the first --docs SciFact abstracts, title + text). Paths:

  raw ST       SentenceTransformer.encode(texts) in this process (model loaded before timing)
  in process   InProcess executor: Encoder.plan shards -> encode -> cache shards (model loaded before timing)
  ray N        Ray executor with N workers on a local cluster of --cpus CPUs (started before timing):
               shards over N actors, each loading the model itself: actor start and model load are
               part of the figure, because a user pays them on every encode

Every retbench path writes into a fresh, empty embedding cache, so everything is encoded. Rounds
alternate the order of the paths (--repeat); medians and ratios to raw ST are printed. On a machine
with fewer cores than workers, scaling shows the contention, not the ideal: it is measured, not assumed.

    .venv/bin/python benchmarks/scale_encode.py [--docs 512] [--repeat 3] [--cpus 2]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--docs", type=int, default=512)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--cpus", type=int, default=2)
    ap.add_argument("--shard-size", type=int, default=64)
    args = ap.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT / "src"), os.environ.get("PYTHONPATH")]))

    import ray
    import torch

    from retbench.io.beir import read_beir
    from retbench.retrievers.dense import DenseRetriever
    from retbench.retrievers.encoders.encoder import _load_model, default_model
    from retbench.studies.executors import ExecutorSettings, InProcess, RayExecutor, init_ray

    texts = read_beir(ROOT / "corpora" / "scifact").corpus.joined_texts()[: args.docs]
    model, _ = _load_model(default_model(), "cpu", False)
    init_ray(ray, num_cpus=args.cpus, include_dashboard=False, logging_level="WARNING")
    scratch = Path(tempfile.mkdtemp(prefix="retbench-encode-bench-"))

    def fresh() -> DenseRetriever:
        return DenseRetriever(cache_dir=str(Path(tempfile.mkdtemp(dir=scratch))), shard_size=args.shard_size)

    def raw() -> None:
        model.max_seq_length = 256
        model.encode(texts, batch_size=32, normalize_embeddings=True, show_progress_bar=False)

    def in_process() -> None:
        assert InProcess().encode_corpus(fresh(), texts)["encoded"] == len(texts)

    def on_ray(n: int):
        def go() -> None:
            assert RayExecutor(ExecutorSettings(kind="ray", workers=n)).encode_corpus(fresh(), texts)["encoded"] == len(
                texts
            )

        return go

    paths = {"raw ST": raw, "in process": in_process, "ray 1 worker": on_ray(1), "ray 2 workers": on_ray(2)}
    times: dict[str, list[float]] = {p: [] for p in paths}
    try:
        for r in range(args.repeat):
            order = list(paths) if r % 2 == 0 else list(reversed(paths))
            for name in order:
                t0 = time.perf_counter()
                paths[name]()
                times[name].append(time.perf_counter() - t0)
                print(f"round {r + 1}: {name} {times[name][-1]:.1f} s", flush=True)
    finally:
        ray.shutdown()
        shutil.rmtree(scratch, ignore_errors=True)
    base = statistics.median(times["raw ST"])
    print(
        f"{len(texts)} SciFact documents, all-MiniLM-L6-v2, {args.repeat} rounds, in-process torch threads {torch.get_num_threads()}, local Ray cluster of {args.cpus} CPUs"
    )
    print(f"{'path':15} {'median s':>9} {'docs/s':>8} {'time vs raw ST':>15}")
    for name, ts in times.items():
        m = statistics.median(ts)
        print(f"{name:15} {m:9.1f} {len(texts) / m:8.1f} {m / base:14.2f}x")


if __name__ == "__main__":
    main()
