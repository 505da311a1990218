"""Dense encoding through retbench's cached Encoder vs a raw SentenceTransformer.encode call.

Same model object, same texts (SciFact title + text), same batch size, same process:
  raw     SentenceTransformer.encode(block) (it sorts by length itself)
  cold    Encoder.encode_documents(block) into an empty cache (hashing + shard writes included)
The corpus is cut into blocks and raw/cold alternate per block (ABBA order), so load from other
processes on a shared machine hits both sides alike; the totals are sums over blocks.
  warm    a fresh Encoder on the same cache: re-run of the same texts (nothing should be encoded)
  add1    one new document on top of the warm cache (exactly one text should be encoded)

Goals (issue 4): cold >= 0.95x raw throughput; warm <= 5% of cold time.

    .venv/bin/python benchmarks/dense_speed.py [--docs N] [--batch-size 32] [--max-seq-length 256] [--block 1024]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import numpy as np

from retbench.io.beir import read_beir
from retbench.retrievers.encoders import Encoder, default_model

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpus", default=str(ROOT / "corpora" / "scifact"))
    ap.add_argument("--docs", type=int, default=0, help="first N documents (0 = all)")
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--max-seq-length", type=int, default=256)
    ap.add_argument("--block", type=int, default=1024, help="documents per alternating raw/retbench block")
    args = ap.parse_args()

    corpus = read_beir(args.corpus).corpus
    texts = corpus.joined_texts()
    if args.docs:
        texts = texts[: args.docs]
    print(f"{len(texts)} documents, batch {args.batch_size}, max_seq_length {args.max_seq_length}")
    import torch

    print(f"torch threads: {torch.get_num_threads()}")

    with tempfile.TemporaryDirectory() as cache_dir:
        enc = Encoder(batch_size=args.batch_size, max_seq_length=args.max_seq_length, cache_dir=cache_dir)
        t0 = time.perf_counter()
        model = enc.model  # loaded once, shared by raw and cold so neither pays the load
        model.max_seq_length = args.max_seq_length
        print(f"model load: {time.perf_counter() - t0:.1f}s  ({default_model()})")
        model.encode(texts[:64], batch_size=args.batch_size, show_progress_bar=False)  # warm-up

        def timed(fn, block: list[str]) -> tuple[np.ndarray, float, float]:
            w0, c0 = time.perf_counter(), time.process_time()
            out = fn(block)
            return out, time.perf_counter() - w0, time.process_time() - c0

        def raw_encode(block: list[str]) -> np.ndarray:
            return model.encode(block, batch_size=args.batch_size, normalize_embeddings=True, show_progress_bar=False)

        raw_parts, cold_parts = [], []
        t_raw = t_cold = cpu_raw = cpu_cold = 0.0
        for i, start in enumerate(range(0, len(texts), args.block)):
            block = texts[start : start + args.block]
            if i % 2 == 0:
                (r, tr, cr), (c, tc, cc) = timed(raw_encode, block), timed(enc.encode_documents, block)
            else:
                (c, tc, cc), (r, tr, cr) = timed(enc.encode_documents, block), timed(raw_encode, block)
            raw_parts.append(r)
            cold_parts.append(c)
            t_raw, t_cold, cpu_raw, cpu_cold = t_raw + tr, t_cold + tc, cpu_raw + cr, cpu_cold + cc
            print(f"  block {i}: raw {tr:.1f}s (cpu {cr:.1f}s), retbench {tc:.1f}s (cpu {cc:.1f}s)", flush=True)
        raw, cold = np.concatenate(raw_parts), np.concatenate(cold_parts)
        assert enc.stats.encoded == len(set(texts)), enc.stats

        t0, c0 = time.perf_counter(), time.process_time()
        enc2 = Encoder(batch_size=args.batch_size, max_seq_length=args.max_seq_length, cache_dir=cache_dir)
        warm = enc2.encode_documents(texts)
        t_warm, cpu_warm = time.perf_counter() - t0, time.process_time() - c0
        assert enc2.stats.encoded == 0, enc2.stats
        assert enc2._model is None, "warm re-run should not load the model"

        new_doc = "A new abstract about retrieval benchmarks that the cache has never seen."
        t0, c0 = time.perf_counter(), time.process_time()
        enc2.encode_documents([*texts, new_doc])
        t_add, cpu_add = time.perf_counter() - t0, time.process_time() - c0
        assert enc2.stats.encoded == 1, enc2.stats

    diff = float(np.abs(raw - cold).max())
    print(f"max |raw - retbench| = {diff:.2e}; warm equals cold: {np.array_equal(warm, cold)}")
    print()
    n = len(texts)
    print(f"{'path':<32}{'wall s':>9}{'cpu s':>9}{'docs/s':>9}{'wall ratio':>12}{'cpu ratio':>11}")
    print(f"{'raw SentenceTransformer.encode':<32}{t_raw:>9.2f}{cpu_raw:>9.2f}{n / t_raw:>9.1f}{1:>12.3f}{1:>11.3f}")
    print(
        f"{'retbench cold (empty cache)':<32}{t_cold:>9.2f}{cpu_cold:>9.2f}{n / t_cold:>9.1f}"
        f"{t_raw / t_cold:>12.3f}{cpu_raw / cpu_cold:>11.3f}  (throughput vs raw)"
    )
    print(
        f"{'retbench warm (re-run)':<32}{t_warm:>9.2f}{cpu_warm:>9.2f}{'':>9}"
        f"{t_warm / t_cold:>12.4f}{cpu_warm / cpu_cold:>11.4f}  (time vs cold)"
    )
    print(
        f"{'retbench warm + 1 new doc':<32}{t_add:>9.2f}{cpu_add:>9.2f}{'':>9}"
        f"{t_add / t_cold:>12.4f}{cpu_add / cpu_cold:>11.4f}  (time vs cold)"
    )
    print()
    print(
        f"cold/raw throughput: wall {t_raw / t_cold:.3f}x, cpu {cpu_raw / cpu_cold:.3f}x (goal >= 0.95x); "
        f"warm/cold time: wall {t_warm / t_cold:.2%}, cpu {cpu_warm / cpu_cold:.2%} (goal <= 5%)"
    )


if __name__ == "__main__":
    main()
