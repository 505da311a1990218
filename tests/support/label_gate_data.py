"""A label study over a small SciFact slice, built the way a user builds one: a BEIR folder without qrels,
three systems' runs (a real BM25 run and two worse rankings made from it),
`init_study`, judge verdicts on every pair, and people's grades appended to labels.jsonl in the queue's order
(the contract's event lines). SciFact's test qrels play the people; the judge is the people with a seeded
share of grades flipped (its bias is what PPI corrects)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from retbench.studies.labels.answer import next_pairs
from retbench.studies.labels.study import init_study, read_study


def beir_slice(scifact: Any, out: Path, n_queries: int = 30, n_docs: int = 300) -> dict[tuple[str, str], int]:
    """Write out/corpus.jsonl and out/queries.jsonl (no qrels): n_queries test queries, their relevant documents
    and the first n_docs others. Returns the test qrels of the slice, (qid, doc) -> grade."""
    qrels = scifact.split("test")
    qids = list(qrels)[:n_queries]
    keep = set(scifact.corpus.ids[:n_docs]) | {d for q in qids for d in qrels[q]}
    out.mkdir(parents=True)
    corpus = scifact.corpus
    with open(out / "corpus.jsonl", "w", encoding="utf-8") as fh:
        for i, d in enumerate(corpus.ids):
            if d in keep:
                fh.write(json.dumps({"_id": d, "title": corpus.title(i), "text": corpus.texts[i]}) + "\n")
    with open(out / "queries.jsonl", "w", encoding="utf-8") as fh:
        for q in qids:
            fh.write(json.dumps({"_id": q, "text": scifact.queries[q]}) + "\n")
    return {(q, d): int(g) for q in qids for d, g in qrels[q].items()}


def bm25_runs(data: Path, out: Path) -> list[Path]:
    """out/bm25.trec (bm25s over the slice, top 10), out/shifted.trec (its ranks 6-15 as ranks 1-10) and
    out/swapped.trec (its top 10 with ranks 1 and 2 swapped: a small drop)."""
    from retbench.io.beir import read_beir
    from retbench.retrievers import create

    ds = read_beir(data)
    retriever = create("bm25s")
    retriever.index(ds.corpus)
    qids = list(ds.queries)
    rankings = retriever.search_batch([ds.queries[q] for q in qids], 20)
    out.mkdir(parents=True, exist_ok=True)
    files = []
    orders = {"bm25": list(range(10)), "shifted": list(range(5, 15)), "swapped": [1, 0, *range(2, 10)]}
    for name, order in orders.items():
        lines = [
            f"{q} Q0 {list(ranking)[i][0]} {r + 1} {10 - r} {name}\n"
            for q, ranking in zip(qids, rankings, strict=True)
            for r, i in enumerate(order)
            if i < len(ranking)
        ]
        (out / f"{name}.trec").write_text("".join(lines), encoding="utf-8")
        files.append(out / f"{name}.trec")
    return files


def build_study(
    scifact: Any,
    tmp: Path,
    *,
    decision: tuple[str, str] | None = ("bm25", "shifted"),
    share: float = 0.5,
    flip: float = 0.15,
    failed: float = 0.0,
    seed: int = 7,
) -> Path:
    """A study over the slice: judge verdicts on every pair (a `failed` share as error statuses), and people's
    grades on the first `share` of the pairs in the labelling queue. Returns the study folder."""
    truth = beir_slice(scifact, tmp / "data")
    runs = bm25_runs(tmp / "data", tmp / "runs")
    study_dir = tmp / "study"
    study = init_study(study_dir, tmp / "data", runs, k=10, metric="nDCG@10", decision=decision, seed=seed)
    rng = np.random.default_rng(seed)
    for p in study.pairs:
        grade = truth.get((p["qid"], p["doc_id"]), 0)
        if rng.random() < failed:
            p["llm"] = {"grade": None, "status": "error", "probs": None}
            continue
        if rng.random() < flip:
            grade = 1 - min(grade, 1)
        p["llm"] = {"grade": grade, "status": "ok", "probs": None}
    study.save_pairs()
    pairs = read_study(study_dir).pairs
    todo = next_pairs(study_dir, "ann", int(share * len(pairs)))
    write_grades(study_dir, [(pairs[i], truth.get((pairs[i]["qid"], pairs[i]["doc_id"]), 0)) for i in todo])
    return study_dir


def write_grades(study_dir: Path, graded: list[tuple[dict[str, Any], int]], labeller: str = "ann") -> None:
    """Append grade events to labels.jsonl as the label log writes them (one event a line)."""
    with open(study_dir / "labels.jsonl", "a", encoding="utf-8") as fh:
        for p, grade in graded:
            event = {
                "event": "grade",
                "pair_id": p["pair_id"],
                "qid": p["qid"],
                "doc_id": p["doc_id"],
                "grade": grade,
                "labeller": labeller,
                "at": "2026-01-01T00:00:00Z",
                "shown": {"query": p["query"], "doc_sha256": "", "llm_hidden": True, "highlight": []},
                "undoes": None,
            }
            fh.write(json.dumps(event) + "\n")
