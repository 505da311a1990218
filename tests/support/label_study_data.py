"""A small label study for the labelling page's tests, made by the study's own `init_study` (what
`retbench label init` runs) from real BM25 runs over the shipped RAG corpus (corpora/rag: 95 passages).

Two systems: bm25s with and without stemming, top 3 pooled for the first few golden questions. Pre-labels
stand in for a judge's (running the LLM judge is not what these tests are about): grade 3 for the golden set's
expected passage of the query, 0 otherwise, status "ok"; the last pair carries status "error" and no grade, as a
failed verdict does. The queue (`order`) is fixed by the study itself the first time `next_pairs` is asked.
"""

from __future__ import annotations

import json
from pathlib import Path

import yaml

import repo_paths
from retbench.data import Corpus
from retbench.retrievers import create
from retbench.studies.labels.study import init_study, read_study

RAG = repo_paths.ROOT / "corpora" / "rag"
SYSTEMS = {"bm25": {}, "bm25-nostem": {"stemmer": None}}


def write_study(study: Path, n_queries: int = 4, k: int = 3) -> Path:
    """Write the study folder (and its dataset and runs beside it) and return it."""
    docs = [json.loads(line) for line in (RAG / "corpus.jsonl").read_text(encoding="utf-8").splitlines()]
    golden = yaml.safe_load((RAG / "golden.yaml").read_text(encoding="utf-8"))["samples"]
    samples = [s for s in golden if s.get("expected_output")][:n_queries]
    source = study.parent / f"{study.name}-source"
    (source / "runs").mkdir(parents=True)
    (source / "corpus.jsonl").write_text("".join(json.dumps(d) + "\n" for d in docs), encoding="utf-8")
    queries = "".join(json.dumps({"_id": s["id"], "text": s["input"]}) + "\n" for s in samples)
    (source / "queries.jsonl").write_text(queries, encoding="utf-8")
    corpus = Corpus([d["_id"] for d in docs], [d["text"] for d in docs])
    runs = []
    for system, params in SYSTEMS.items():
        retriever = create("bm25s", params)
        retriever.index(corpus)
        rankings = retriever.search_batch([s["input"] for s in samples], k)
        runs.append(source / "runs" / f"{system}.trec")
        with open(runs[-1], "w", encoding="utf-8") as fh:
            for sample, ranking in zip(samples, rankings, strict=True):
                for rank, (doc, score) in enumerate(ranking, start=1):
                    fh.write(f"{sample['id']} Q0 {doc} {rank} {score:.6f} {system}\n")
    init_study(study, source, runs, k=k, decision=("bm25", "bm25-nostem"))
    made = read_study(study)
    expected = {s["id"]: set(s["expected_output"]) for s in samples}
    for pair in made.pairs:
        pair["llm"] = {"grade": 3 if pair["doc_id"] in expected[pair["qid"]] else 0, "status": "ok", "probs": None}
    made.pairs[-1]["llm"] = {"grade": None, "status": "error", "probs": None}
    made.save_pairs()
    return study
