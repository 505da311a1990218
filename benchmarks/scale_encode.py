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

Next to wall time, CPU time: for raw ST and in process, this process's (user + system); for Ray,
this process's plus the Ray daemons' (raylet, GCS, agents: every descendant not named `ray::...`)
plus each worker's whole life (start, imports, model load, encoding: `worker_cpu_seconds` in the
executor's report). On a machine shared with other work the wall-clock ratio moves with the load;
the CPU ratio says what the path itself costs. The Ray workers' niceness is printed (Ray's own
default is 15; retbench's local clusters run them at 0, see `init_ray`).

    .venv/bin/python benchmarks/scale_encode.py [--docs 512] [--repeat 3] [--cpus 2] [--paths raw,ray-1]
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
    ap.add_argument("--paths", default="raw,in-process,ray-1,ray-2", help="which paths to time (comma-separated)")
    args = ap.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT / "src"), os.environ.get("PYTHONPATH")]))

    import ray
    import torch

    from retbench.config.experiment import ExecutorBlock
    from retbench.io.beir import read_beir
    from retbench.retrievers.dense import DenseRetriever
    from retbench.retrievers.encoders.encoder import _load_model, default_model
    from retbench.studies.executors import InProcess, RayExecutor, init_ray

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

    nice: dict[str, str] = {}
    worker_cpu: dict[str, float] = {}

    def on_ray(n: int):
        def go() -> None:
            report = RayExecutor(ExecutorBlock(kind="ray", workers=n)).encode_corpus(fresh(), texts)
            assert report["encoded"] == len(texts)
            name = f"ray {n} worker{'s' if n > 1 else ''}"
            nice[name] = f", worker nice {report['worker_nice']}, worker CPU {report['worker_cpu_seconds']:.1f} s"
            worker_cpu[name] = report["worker_cpu_seconds"]

        return go

    every = {"raw": ("raw ST", raw), "in-process": ("in process", in_process)}
    every |= {"ray-1": ("ray 1 worker", on_ray(1)), "ray-2": ("ray 2 workers", on_ray(2))}
    paths = dict(every[p] for p in ["raw", *(p for p in args.paths.split(",") if p != "raw")])
    times: dict[str, list[float]] = {p: [] for p in paths}
    cpu: dict[str, list[float]] = {p: [] for p in paths}
    try:
        for r in range(args.repeat):
            order = list(paths) if r % 2 == 0 else list(reversed(paths))
            for name in order:
                clock = ray_side_cpu if name.startswith("ray") else own_cpu
                load0, c0, t0 = os.getloadavg()[0], clock(), time.perf_counter()
                paths[name]()
                times[name].append(time.perf_counter() - t0)
                cpu[name].append(clock() - c0 + worker_cpu.pop(name, 0.0))
                print(
                    f"round {r + 1}: {name} {times[name][-1]:.1f} s, CPU {cpu[name][-1]:.1f} s, "
                    f"load {load0:.1f} -> {os.getloadavg()[0]:.1f}{nice.get(name, '')}",
                    flush=True,
                )
    finally:
        ray.shutdown()
        shutil.rmtree(scratch, ignore_errors=True)
    base, base_cpu = statistics.median(times["raw ST"]), statistics.median(cpu["raw ST"])
    print(
        f"{len(texts)} SciFact documents, all-MiniLM-L6-v2, {args.repeat} rounds, in-process torch threads {torch.get_num_threads()}, local Ray cluster of {args.cpus} CPUs"
    )
    print(f"{'path':15} {'median s':>9} {'docs/s':>8} {'time vs raw ST':>15} {'CPU s':>7} {'CPU vs raw ST':>14}")
    for name, ts in times.items():
        m, c = statistics.median(ts), statistics.median(cpu[name])
        print(f"{name:15} {m:9.1f} {len(texts) / m:8.1f} {m / base:14.2f}x {c:7.1f} {c / base_cpu:13.2f}x")


def own_cpu() -> float:
    t = os.times()
    return t.user + t.system


def is_worker(p: object) -> bool:
    """A Ray worker process (named `ray::<task or actor>`; Ray's two agents are named `ray::...Agent`)."""
    name = (p.cmdline()[:1] or [""])[0]  # type: ignore[attr-defined]
    return name.startswith("ray::") and not name.endswith("Agent")


def ray_side_cpu() -> float:
    """CPU seconds of this process and of its descendants that are not Ray workers (the Ray daemons)."""
    import psutil

    total = own_cpu()
    for p in psutil.Process().children(recursive=True):
        try:
            if is_worker(p):
                continue  # workers report their own CPU
            t = p.cpu_times()
            total += t.user + t.system
        except psutil.Error:
            continue
    return total


if __name__ == "__main__":
    main()
