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

from retbench.embeddings import Encoder, default_model
from retbench.io.beir import read_beir

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

        def run_raw(block: list[str]) -> tuple[np.ndarray, float]:
            t0 = time.perf_counter()
            out = model.encode(block, batch_size=args.batch_size, normalize_embeddings=True, show_progress_bar=False)
            return out, time.perf_counter() - t0

        def run_cold(block: list[str]) -> tuple[np.ndarray, float]:
            t0 = time.perf_counter()
            out = enc.encode_documents(block)
            return out, time.perf_counter() - t0

        raw_parts, cold_parts, t_raw, t_cold = [], [], 0.0, 0.0
        for i, start in enumerate(range(0, len(texts), args.block)):
            block = texts[start : start + args.block]
            if i % 2 == 0:
                (r, tr), (c, tc) = run_raw(block), run_cold(block)
            else:
                (c, tc), (r, tr) = run_cold(block), run_raw(block)
            raw_parts.append(r)
            cold_parts.append(c)
            t_raw += tr
            t_cold += tc
            print(f"  block {i}: raw {tr:.1f}s, retbench {tc:.1f}s", flush=True)
        raw, cold = np.concatenate(raw_parts), np.concatenate(cold_parts)
        assert enc.stats.encoded == len(set(texts)), enc.stats

        t0 = time.perf_counter()
        enc2 = Encoder(batch_size=args.batch_size, max_seq_length=args.max_seq_length, cache_dir=cache_dir)
        warm = enc2.encode_documents(texts)
        t_warm = time.perf_counter() - t0
        assert enc2.stats.encoded == 0, enc2.stats
        assert enc2._model is None, "warm re-run should not load the model"

        new_doc = "A new abstract about retrieval benchmarks that the cache has never seen."
        t0 = time.perf_counter()
        enc2.encode_documents([*texts, new_doc])
        t_add = time.perf_counter() - t0
        assert enc2.stats.encoded == 1, enc2.stats

    diff = float(np.abs(raw - cold).max())
    print(f"max |raw - retbench| = {diff:.2e}; warm equals cold: {np.array_equal(warm, cold)}")
    print()
    print(f"{'path':<32}{'seconds':>10}{'docs/s':>10}{'ratio':>10}")
    print(f"{'raw SentenceTransformer.encode':<32}{t_raw:>10.2f}{len(texts) / t_raw:>10.1f}{1.0:>10.3f}")
    print(f"{'retbench cold (empty cache)':<32}{t_cold:>10.2f}{len(texts) / t_cold:>10.1f}{t_raw / t_cold:>10.3f}")
    print(f"{'retbench warm (re-run)':<32}{t_warm:>10.2f}{'':>10}{t_warm / t_cold:>10.3f}  (of cold)")
    print(f"{'retbench warm + 1 new doc':<32}{t_add:>10.2f}{'':>10}{t_add / t_cold:>10.3f}  (of cold)")
    print()
    print(
        f"throughput cold/raw = {t_raw / t_cold:.3f}x (goal >= 0.95x); warm/cold = {t_warm / t_cold:.1%} (goal <= 5%)"
    )


if __name__ == "__main__":
    main()
