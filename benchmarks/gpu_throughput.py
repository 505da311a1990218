"""GPU encode and rerank throughput through retbench's own Encoder and cross-encoder reranker.

Nothing in retbench needs a GPU; this measures what one buys when `device: cuda` is set.

- encode: all SciFact abstracts (5,183; title + " " + text, as retbench joins them) through
  `retbench.retrievers.encoders.Encoder` (all-MiniLM-L6-v2 by default, max length 256, normalized,
  cache off so every text reaches the model; its length-sorted shards of 1,024 texts as in a real index)
  at several batch sizes, fp32 and fp16, each the median of `--repeat` timed runs after a warm-up.
- rerank: (query, abstract) pairs scored by `retbench.retrievers.rerank.CrossEncoderReranker`
  (`CrossEncoder.predict`, max length 256) at several batch sizes. Pairs: SciFact's 300 test claims,
  each with its top `--depth` abstracts by the fp32 MiniLM embeddings just computed (a dense first stage).
  The cross-encoder is built from the same MiniLM weights with a fresh one-output head, exactly as
  `retbench.retrievers.rerank.train` builds the project's own trained cross-encoder before training:
  same architecture, so the same throughput (speed depends on the architecture, not the head's weights;
  its scores are meaningless and are only compared fp16 against fp32).
- CPU peer: with `--device cuda`, the same fp32 encode and rerank on the same machine's CPU threads
  (batch 32, retbench's default) over every k-th document / pair (a slice with the corpus's length mix),
  for the GPU/CPU ratio.

fp32 vs fp16: the model may be given as an fp16 copy (half the bytes to carry); it is loaded and cast to
fp32 for the fp32 figures (the weights are then fp16-rounded, which changes no timing) and to fp16 for
the fp16 ones. The fp16 vectors are checked against the fp32 ones (lowest cosine).

    .venv/bin/python benchmarks/gpu_throughput.py --device cuda [--model FOLDER] [--json out.json]
    .venv/bin/python benchmarks/gpu_throughput.py --device cpu --limit 64      # quick check, no GPU
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import tempfile
import time
from collections.abc import Callable, Sequence
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import numpy as np
import torch

from retbench.io.datasets import load_dataset
from retbench.retrievers.encoders.encoder import Encoder, default_model
from retbench.retrievers.rerank import CrossEncoderReranker

DTYPES = {"fp32": torch.float32, "fp16": torch.float16}


def ints(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x]


def strided(items: Sequence[Any], n: int | None) -> list[Any]:
    """`n` items spread evenly over `items` (every k-th), so a slice keeps the whole list's length mix."""
    if n is None or n >= len(items):
        return list(items)
    step = len(items) / n
    return [items[int(i * step)] for i in range(n)]


def cast(model: Any, dtype: torch.dtype) -> None:
    """Cast a SentenceTransformer / CrossEncoder in place (both are torch modules in sentence-transformers 6)."""
    target = model if isinstance(model, torch.nn.Module) else model.model
    target.to(dtype)


def timed(fn: Callable[[], Any], repeat: int, device: str) -> tuple[float, list[float], Any]:
    """Median and all wall-clock seconds of `repeat` calls (CUDA synchronized on both sides of each), last result."""
    times, result = [], None
    for _ in range(repeat):
        if device.startswith("cuda"):
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        result = fn()
        if device.startswith("cuda"):
            torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), times, result


def peak_mib(device: str) -> float | None:
    return torch.cuda.max_memory_allocated() / 2**20 if device.startswith("cuda") else None


def reset_peak(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.reset_peak_memory_stats()


def encode_bench(
    enc: Encoder, docs: list[str], batches: list[int], dtypes: list[str], repeat: int, device: str
) -> tuple[list[dict[str, Any]], dict[str, np.ndarray]]:
    """docs/s per (dtype, batch size); also each dtype's vectors at the first batch size."""
    rows, vecs = [], {}
    for dt in dtypes:
        cast(enc.model, DTYPES[dt])
        enc.batch_size = batches[0]
        enc.encode_documents(docs[:512])  # warm-up: kernels, allocator, tokenizer
        for b in batches:
            enc.batch_size = b
            reset_peak(device)
            med, times, out = timed(lambda: enc.encode_documents(docs), repeat, device)
            vecs.setdefault(dt, out)
            rows.append(
                {
                    "stage": "encode",
                    "device": device,
                    "dtype": dt,
                    "batch": b,
                    "items": len(docs),
                    "median_s": round(med, 3),
                    "per_s": round(len(docs) / med, 1),
                    "runs_s": [round(t, 3) for t in times],
                    "peak_mib": peak_mib(device),
                }
            )
            print(fmt(rows[-1]), flush=True)
    return rows, vecs


def rerank_bench(
    rr: CrossEncoderReranker,
    pairs: list[tuple[str, str]],
    batches: list[int],
    dtypes: list[str],
    repeat: int,
    device: str,
) -> tuple[list[dict[str, Any]], dict[str, np.ndarray]]:
    """pairs/s per (dtype, batch size); also each dtype's scores at the first batch size."""
    rows, scores = [], {}
    for dt in dtypes:
        cast(rr.model, DTYPES[dt])
        rr.batch_size = batches[0]
        rr.predict(pairs[:256])  # warm-up
        for b in batches:
            rr.batch_size = b
            reset_peak(device)
            med, times, out = timed(lambda: rr.predict(pairs), repeat, device)
            scores.setdefault(dt, out)
            rows.append(
                {
                    "stage": "rerank",
                    "device": device,
                    "dtype": dt,
                    "batch": b,
                    "items": len(pairs),
                    "median_s": round(med, 3),
                    "per_s": round(len(pairs) / med, 1),
                    "runs_s": [round(t, 3) for t in times],
                    "peak_mib": peak_mib(device),
                }
            )
            print(fmt(rows[-1]), flush=True)
    return rows, scores


def fmt(r: dict[str, Any]) -> str:
    unit = "docs/s" if r["stage"] == "encode" else "pairs/s"
    mem = f"  peak {r['peak_mib']:.0f} MiB" if r["peak_mib"] is not None else ""
    return (
        f"{r['stage']:6} {r['device']:5} {r['dtype']} batch {r['batch']:5}: {r['items']:6} in {r['median_s']:8.3f} s "
        f"= {r['per_s']:9.1f} {unit}{mem}  runs {r['runs_s']}"
    )


def build_cross_encoder(model: str, folder: str, max_length: int) -> None:
    """A one-output CrossEncoder from a BERT-style folder, saved to `folder` (as the training module does)."""
    from sentence_transformers import CrossEncoder

    torch.manual_seed(0)
    CrossEncoder(model, num_labels=1, max_length=max_length, device="cpu").save_pretrained(folder)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--model", default=None, help="sentence-transformers folder (default: packaged MiniLM)")
    ap.add_argument("--limit", type=int, default=None, help="encode only this many abstracts and score this many pairs")
    ap.add_argument("--encode-batches", type=ints, default=[32, 64, 256, 1024])
    ap.add_argument("--rerank-batches", type=ints, default=[32, 128, 512])
    ap.add_argument("--dtypes", default=None, help="comma list of fp32,fp16 (default: both on cuda, fp32 on cpu)")
    ap.add_argument("--queries", type=int, default=300)
    ap.add_argument("--depth", type=int, default=100)
    ap.add_argument("--max-length", type=int, default=256, help="cross-encoder max length")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--cpu-docs", type=int, default=512, help="CPU peer: abstracts (0: no CPU peer)")
    ap.add_argument("--cpu-pairs", type=int, default=1024, help="CPU peer: pairs")
    ap.add_argument("--json", default=None, help="write every figure here as JSON")
    args = ap.parse_args()
    device = args.device
    dtypes = args.dtypes.split(",") if args.dtypes else (["fp32", "fp16"] if device.startswith("cuda") else ["fp32"])
    model = args.model or default_model()

    env: dict[str, Any] = {
        "torch": torch.__version__,
        "python": platform.python_version(),
        "cpu_threads": torch.get_num_threads(),
        "cpu_count": os.cpu_count(),
    }
    try:
        import sentence_transformers
        import transformers

        env["sentence_transformers"] = sentence_transformers.__version__
        env["transformers"] = transformers.__version__
    except ImportError:
        pass
    if device.startswith("cuda"):
        env["gpu"] = torch.cuda.get_device_name()
        env["cuda"] = torch.version.cuda
    print(json.dumps(env), flush=True)

    ds = load_dataset("scifact", ["test"])
    qrels = ds.split("test")
    doc_ids = list(ds.corpus.index)
    all_text = [ds.corpus.joined(ds.corpus.index[d]) for d in doc_ids]
    qids = [q for q in qrels if q in ds.queries][: args.queries]
    qtext = [ds.queries[q] for q in qids]

    enc = Encoder(model, device=device, cache=False)
    docs = strided(all_text, args.limit)
    rows, vecs = encode_bench(enc, docs, args.encode_batches, dtypes, args.repeat, device)

    # dense first stage for the rerank pairs: fp32 vectors of the encoded abstracts
    cast(enc.model, torch.float32)
    q = enc.encode_queries(qtext)
    top = np.argsort(-(q @ vecs["fp32"].T), axis=1)[:, : args.depth]
    pairs = strided([(qtext[i], docs[j]) for i in range(len(qids)) for j in top[i]], args.limit)
    checks: dict[str, Any] = {}
    # the CPU-side floor: tokenizing alone, as the model's own tokenizer does it per call
    t0 = time.perf_counter()
    enc.tokenizer(docs, truncation=True, max_length=enc.max_seq_length)
    checks["tokenize_docs_per_s"] = round(len(docs) / (time.perf_counter() - t0), 1)
    t0 = time.perf_counter()
    enc.tokenizer([a for a, _ in pairs], [b for _, b in pairs], truncation=True, max_length=args.max_length)
    checks["tokenize_pairs_per_s"] = round(len(pairs) / (time.perf_counter() - t0), 1)
    if "fp16" in vecs and "fp32" in vecs:
        checks["encode_fp16_min_cosine"] = float((vecs["fp16"] * vecs["fp32"]).sum(axis=1).min())

    with tempfile.TemporaryDirectory() as tmp:
        build_cross_encoder(model, tmp, args.max_length)
        rr = CrossEncoderReranker(tmp, max_length=args.max_length, device=device)
        r_rows, scores = rerank_bench(rr, pairs, args.rerank_batches, dtypes, args.repeat, device)
        rows += r_rows
        if "fp16" in scores and "fp32" in scores:
            checks["rerank_fp16_max_abs_diff"] = float(np.abs(scores["fp16"] - scores["fp32"]).max())
            checks["rerank_score_range_fp32"] = [float(scores["fp32"].min()), float(scores["fp32"].max())]

        if device.startswith("cuda") and args.cpu_docs > 0:
            print(f"CPU peer on this machine: {torch.get_num_threads()} torch threads", flush=True)
            cpu_enc = Encoder(model, device="cpu", cache=False)
            c_rows, _ = encode_bench(cpu_enc, strided(all_text, args.cpu_docs), [32], ["fp32"], 1, "cpu")
            cpu_rr = CrossEncoderReranker(tmp, max_length=args.max_length, device="cpu")
            c2_rows, _ = rerank_bench(cpu_rr, strided(pairs, args.cpu_pairs), [32], ["fp32"], 1, "cpu")
            rows += c_rows + c2_rows
            for stage, cpu in (("encode", c_rows[0]), ("rerank", c2_rows[0])):
                gpu = [r for r in rows if r["stage"] == stage and r["device"] == device]
                best = max(gpu, key=lambda r: r["per_s"])
                same = [r for r in gpu if r["dtype"] == "fp32" and r["batch"] == 32]
                checks[f"{stage}_gpu_best_vs_cpu"] = round(best["per_s"] / cpu["per_s"], 1)
                checks[f"{stage}_gpu_best"] = f"{best['dtype']} batch {best['batch']}"
                if same:
                    checks[f"{stage}_gpu_fp32_batch32_vs_cpu"] = round(same[0]["per_s"] / cpu["per_s"], 1)

    print(json.dumps(checks), flush=True)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(
                {"env": env, "rows": rows, "checks": checks, "pairs": len(pairs), "docs": len(docs)}, fh, indent=1
            )


if __name__ == "__main__":
    main()
