"""A real BM25 run on the shipped SciFact (test split, 300 queries, 100 documents each), built once per
process: the parity tests of the ir_measures families check every measure on it."""

from __future__ import annotations

from typing import Any

_CACHE: dict[int, tuple[dict[str, dict[str, int]], dict[str, dict[str, float]]]] = {}


def scifact_bm25(scifact: Any, depth: int = 100) -> tuple[dict[str, dict[str, int]], dict[str, dict[str, float]]]:
    """(test qrels, bm25s run) as plain dicts: SciFact's query ids are numbers, as gdeval.pl requires."""
    key = id(scifact) * 10_000 + depth
    if key not in _CACHE:
        from retbench.retrievers import create

        qrels = scifact.split("test")
        retriever = create("bm25s")
        retriever.index(scifact.corpus)
        qids = list(qrels)
        rankings = retriever.search_batch([scifact.queries[q] for q in qids], depth)
        run = {q: {d: float(s) for d, s in ranking} for q, ranking in zip(qids, rankings, strict=True)}
        _CACHE[key] = (qrels.to_dict(), run)
    return _CACHE[key]
