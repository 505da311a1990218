"""Where a Ray worker's encode time goes: CPU-time accounting against raw sentence-transformers.

Wall-clock ratios on a shared machine move with everyone else's load; CPU time does not (much). For
the same texts and model this prints, in one run:

  1. per-encode CPU: raw `SentenceTransformer.encode` in this process vs the same call inside a Ray
     actor (model loaded and warmed on both sides, so only the encode is counted), with the actor's
     niceness, thread settings and thread-related environment, and the CPU the Ray daemons (raylet,
     GCS, agents) used meanwhile;
  2. the worker's fixed start: CPU seconds to import ray, torch and sentence-transformers and load
     the model in a fresh process (what every Ray worker pays before its first shard);
  3. the CPU share a worker gets while one normal-priority process of the same session encodes too,
     at Ray's default worker niceness (15) and at 0 (what retbench's local clusters use).

    .venv/bin/python benchmarks/ray_encode_cpu.py [--docs 128] [--parts 1,2,3]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
START = """
import os, time
def cpu(): t = os.times(); return t.user + t.system
c0 = cpu(); import ray; c1 = cpu(); import torch; c2 = cpu(); import sentence_transformers; c3 = cpu()
from retbench.retrievers.encoders.encoder import _load_model, default_model
_load_model(default_model(), "cpu", False); c4 = cpu()
print(f"ray {c1 - c0:.1f} s, torch {c2 - c1:.1f} s, sentence_transformers {c3 - c2:.1f} s, model load {c4 - c3:.1f} s")
"""
COMPETITOR = """
import json, sys
from ray_encode_cpu import encode_once, texts
from retbench.retrievers.encoders.encoder import _load_model, default_model
model, _ = _load_model(default_model(), "cpu", False)
print("READY", flush=True); sys.stdin.readline()
print(json.dumps(encode_once(model, texts(int(sys.argv[1])))), flush=True)
"""


def texts(n: int) -> list[str]:
    from retbench.io.beir import read_beir

    return read_beir(ROOT / "corpora" / "scifact").corpus.joined_texts()[:n]


def encode_once(model: object, docs: list[str]) -> dict[str, object]:
    """Warm up on 32 texts, then encode `docs`: wall and CPU seconds of this process, and its settings."""
    import torch

    model.max_seq_length = 256  # type: ignore[attr-defined]
    kw = {"batch_size": 32, "normalize_embeddings": True, "show_progress_bar": False}
    model.encode(docs[:32], **kw)  # type: ignore[attr-defined]
    t, c = time.perf_counter(), os.times()
    model.encode(docs, **kw)  # type: ignore[attr-defined]
    c2 = os.times()
    env = {k: v for k, v in os.environ.items() if k.startswith(("OMP_", "MKL_", "TOKENIZERS_", "KMP_"))}
    return {
        "wall": round(time.perf_counter() - t, 2),
        "cpu": round(c2.user + c2.system - c.user - c.system, 2),
        "nice": os.nice(0),
        "torch_threads": torch.get_num_threads(),
        "interop_threads": torch.get_num_interop_threads(),
        "dtype": str(next(model.parameters()).dtype),  # type: ignore[attr-defined]
        "env": env,
    }


class Worker:
    """A Ray actor with the model loaded (the same loader retbench's encode workers use)."""

    def __init__(self) -> None:
        from retbench.retrievers.encoders.encoder import _load_model, default_model

        self.model, _ = _load_model(default_model(), "cpu", False)

    def pid(self) -> int:
        return os.getpid()

    def encode(self, docs: list[str]) -> dict[str, object]:
        return encode_once(self.model, docs)


def daemons_cpu(skip: set[int]) -> float:
    """CPU seconds of this process's descendants that are not Ray workers (raylet, GCS, agents, monitors)."""
    import psutil

    from scale_encode import is_worker

    total = 0.0
    for p in psutil.Process().children(recursive=True):
        try:
            if p.pid not in skip and not is_worker(p):
                t = p.cpu_times()
                total += t.user + t.system
        except psutil.Error:
            continue
    return total


def start_cluster(niceness: str) -> object:
    import ray

    from retbench.studies.executors import NICENESS_ENV

    os.environ[NICENESS_ENV] = niceness  # read by the raylet that ray.init starts
    ray.init(num_cpus=2, include_dashboard=False, logging_level="WARNING")
    return ray.remote(num_cpus=2)(Worker).remote()


def per_encode(docs: list[str]) -> None:
    import ray

    from retbench.retrievers.encoders.encoder import _load_model, default_model

    raw = encode_once(_load_model(default_model(), "cpu", False)[0], docs)
    actor = start_cluster("15")
    ray.get(actor.pid.remote())
    d0 = daemons_cpu({os.getpid()})
    inside = ray.get(actor.encode.remote(docs))
    ray_daemons = daemons_cpu({os.getpid()}) - d0
    ray.shutdown()
    print(f"1. per-encode CPU, {len(docs)} docs (Ray's default worker niceness)")
    print(f"   raw in this process: {json.dumps(raw)}")
    print(f"   inside a Ray actor:  {json.dumps(inside)}")
    print(f"   actor / raw CPU {inside['cpu'] / raw['cpu']:.2f}x; Ray daemons meanwhile {ray_daemons:.2f} CPU s")  # type: ignore[operator]


def share(docs: list[str], niceness: str) -> None:
    """The actor encodes while a normal-priority process of this session encodes the same texts."""
    import psutil
    import ray

    actor = start_cluster(niceness)
    pa = psutil.Process(ray.get(actor.pid.remote()))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT / "benchmarks")])}
    comp = subprocess.Popen(
        [sys.executable, "-c", COMPETITOR, str(len(docs))],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert comp.stdin is not None and comp.stdout is not None
    while "READY" not in comp.stdout.readline():
        pass
    pc = psutil.Process(comp.pid)

    def cpu(p: psutil.Process) -> float:
        t = p.cpu_times()
        return t.user + t.system

    comp.stdin.write("go\n")
    comp.stdin.flush()
    fut, samples = actor.encode.remote(docs), []
    while comp.poll() is None:
        try:
            samples.append((cpu(pa), cpu(pc)))
        except psutil.Error:
            break
        time.sleep(0.5)
    ray.get(fut)
    ray.shutdown()
    (a0, c0), (a1, c1) = samples[0], samples[-1]
    got = (a1 - a0) / max((a1 - a0) + (c1 - c0), 1e-9)
    print(f"   worker niceness {niceness}: while both ran, the worker got {got:.0%} of the CPU the two used")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--docs", type=int, default=128)
    ap.add_argument("--parts", default="1,2,3", help="which of the three measurements to make (the test suite: 1)")
    args = ap.parse_args()
    parts = set(args.parts.split(","))
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    os.environ["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), str(ROOT / "benchmarks")])
    sys.path[:0] = [str(ROOT / "src"), str(ROOT / "benchmarks")]
    print(f"load average at start {os.getloadavg()[0]:.1f}")
    docs = texts(args.docs)
    if "1" in parts:
        per_encode(docs)
    if "2" in parts:
        print("2. a worker's fixed start, CPU seconds in a fresh process:")
        out = subprocess.run([sys.executable, "-c", START], capture_output=True, text=True, env=dict(os.environ))
        print("   " + out.stdout.strip())
    if "3" in parts:
        print("3. CPU share against one normal-priority encode in the same session")
        for niceness in ("15", "0"):
            share(docs, niceness)
    print(f"load average at end {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
