"""A small label study folder for the labelling page's tests, written by the study contract (study.json, runs/,
queries.jsonl, pairs.jsonl) from real BM25 runs over the shipped RAG corpus (corpora/rag: 95 passages).

Two systems: bm25s with and without stemming. Their top-k are pooled per query in a stable order (first seen in
the stemmed run, then the other). The "LLM" grades stand in for pre-labels: 3 for the golden set's expected
passage of the query, 0 otherwise, with status "ok" (test data, not a judge), and one pair of the study carries
status "error" and no grade, as a failed verdict would. Every pair is queued (`order` = its id), pi = 1.
"""

from __future__ import annotations

import json
from pathlib import Path

import yaml

import repo_paths
from retbench.data import Corpus
from retbench.retrievers import create

RAG = repo_paths.ROOT / "corpora" / "rag"
SYSTEMS = {"bm25": {}, "bm25-nostem": {"stemmer": None}}


def write_study(study: Path, n_queries: int = 4, k: int = 3) -> Path:
    """Write the study folder and return it."""
    docs = [json.loads(line) for line in (RAG / "corpus.jsonl").read_text(encoding="utf-8").splitlines()]
    text = {d["_id"]: d["text"] for d in docs}
    golden = yaml.safe_load((RAG / "golden.yaml").read_text(encoding="utf-8"))["samples"]
    samples = [s for s in golden if s.get("expected_output")][:n_queries]
    corpus = Corpus([d["_id"] for d in docs], [d["text"] for d in docs])
    (study / "runs").mkdir(parents=True)
    pooled: dict[str, dict[str, dict[str, int]]] = {s["id"]: {} for s in samples}
    for system, params in SYSTEMS.items():
        retriever = create("bm25s", params)
        retriever.index(corpus)
        rankings = retriever.search_batch([s["input"] for s in samples], k)
        with open(study / "runs" / f"{system}.trec", "w", encoding="utf-8") as fh:
            for sample, ranking in zip(samples, rankings, strict=True):
                for rank, (doc, score) in enumerate(ranking, start=1):
                    fh.write(f"{sample['id']} Q0 {doc} {rank} {score:.6f} {system}\n")
                    pooled[sample["id"]].setdefault(doc, {})[system] = rank
    pairs = []
    for sample in samples:
        for doc, by in pooled[sample["id"]].items():
            good = doc in sample["expected_output"]
            llm = {"grade": 3 if good else 0, "status": "ok", "probs": None}
            pairs.append({"pair_id": len(pairs), "qid": sample["id"], "doc_id": doc, "query": sample["input"],
                          "doc_text": text[doc], "pooled_by": by, "llm": llm, "order": len(pairs), "pi": 1.0})  # fmt: skip
    pairs[-1]["llm"] = {"grade": None, "status": "error", "probs": None}
    (study / "pairs.jsonl").write_text("".join(json.dumps(p) + "\n" for p in pairs), encoding="utf-8")
    (study / "queries.jsonl").write_text(
        "".join(json.dumps({"qid": s["id"], "text": s["input"]}) + "\n" for s in samples), encoding="utf-8"
    )
    meta = {"schema": 1, "name": "rag-test", "metric": "nDCG@3", "k": k, "scale": [0, 1, 2, 3],
            "systems": list(SYSTEMS), "decision": {"a": "bm25", "b": "bm25-nostem"}, "seed": 0,
            "dataset": str(RAG), "judge": None}  # fmt: skip
    (study / "study.json").write_text(json.dumps(meta, indent=2), encoding="utf-8")
    return study
