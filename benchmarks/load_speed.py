"""Loading SciFact: retbench's BEIR reader vs BEIR's GenericDataLoader-style plain json reading.

The peer reproduces what `beir.datasets.data_loader.GenericDataLoader.load` does (json.loads per line
into a dict of dicts, csv.reader over the qrels tsv) without importing BEIR. retbench also validates
(duplicate ids, missing fields, unknown ids in qrels) and keeps columns instead of dicts.

    .venv/bin/python benchmarks/load_speed.py [--repeat 5] [--dataset corpora/scifact]
"""

from __future__ import annotations

import argparse
import csv
import gzip
import json
import statistics
import time
import tracemalloc
from pathlib import Path

from retbench.io.beir import read_beir

ROOT = Path(__file__).resolve().parents[1]


def generic_dataloader_style(folder: Path, split: str = "test") -> tuple[dict, dict, dict]:
    """What BEIR's GenericDataLoader does: dict of dicts, json per line, csv for qrels."""

    def lines(path: Path):
        opener = gzip.open if path.suffix == ".gz" else open
        with opener(path, "rt", encoding="utf8") as fh:
            yield from fh

    corpus_path = next(p for p in (folder / "corpus.jsonl", folder / "corpus.jsonl.gz") if p.exists())
    queries_path = next(p for p in (folder / "queries.jsonl", folder / "queries.jsonl.gz") if p.exists())
    corpus = {}
    for line in lines(corpus_path):
        obj = json.loads(line)
        corpus[obj.get("_id")] = {"text": obj.get("text"), "title": obj.get("title")}
    queries = {}
    for line in lines(queries_path):
        obj = json.loads(line)
        queries[obj.get("_id")] = obj.get("text")
    qrels: dict = {}
    with open(folder / "qrels" / f"{split}.tsv", encoding="utf8") as fh:
        reader = csv.reader(fh, delimiter="\t", quoting=csv.QUOTE_MINIMAL)
        next(reader)
        for row in reader:
            qrels.setdefault(row[0], {})[row[1]] = int(row[2])
    queries = {q: queries[q] for q in qrels}
    return corpus, queries, qrels


def timed(fn, repeat: int) -> tuple[float, float]:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    tracemalloc.start()
    fn()
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return statistics.median(times), peak / 2**20


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--dataset", default=str(ROOT / "corpora" / "scifact"))
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    folder = Path(args.dataset)
    ours, ours_mem = timed(lambda: read_beir(folder, ["test"]), args.repeat)
    peer, peer_mem = timed(lambda: generic_dataloader_style(folder), args.repeat)
    print(f"dataset: {folder.name} (median of {args.repeat} runs)")
    print(f"{'loader':<38}{'seconds':>10}{'peak MiB':>10}{'time ratio':>12}")
    print(f"{'retbench read_beir (validating)':<38}{ours:>10.3f}{ours_mem:>10.1f}{1.0:>12.2f}")
    print(f"{'GenericDataLoader-style json':<38}{peer:>10.3f}{peer_mem:>10.1f}{peer / ours:>12.2f}")
    print(f"retbench is {peer / ours:.2f}x the speed of the GenericDataLoader-style reader")


if __name__ == "__main__":
    main()
