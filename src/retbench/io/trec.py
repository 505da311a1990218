"""TREC qrels (`qid iter docid grade`) and run files (`qid Q0 docid rank score tag`).

Written files round-trip byte-stably: scores are written with Python's shortest exact float repr,
queries and judgements keep their order, and the rank column is the 1-based position in
trec_eval order (trec_eval itself ignores that column and re-sorts by score).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import numpy as np

from retbench.data import Qrels, Run
from retbench.errors import InputError
from retbench.io.files import iter_lines, open_text


def _grade(token: str, path: Path, lineno: int) -> int:
    try:
        return int(token)
    except ValueError:
        try:
            value = float(token)
        except ValueError:
            value = float("nan")
        if value.is_integer():
            return int(value)
        raise InputError(f"grade must be an integer, got {token!r}", path=path, line=lineno, field="grade") from None


def read_qrels(path: str | Path) -> Qrels:
    """Read a TREC qrels file; a repeated (query, doc) judgement keeps the last grade, as trec_eval does."""
    p = Path(path)
    judgements: dict[str, dict[str, int]] = {}
    for lineno, line in iter_lines(p):
        parts = line.split()
        if not parts:
            continue
        if len(parts) != 4:
            raise InputError(
                f"expected 4 columns (query-id iteration doc-id grade), got {len(parts)}", path=p, line=lineno
            )
        qid, _, doc, grade = parts
        judgements.setdefault(qid, {})[doc] = _grade(grade, p, lineno)
    return Qrels(judgements)


def write_qrels(qrels: Qrels, path: str | Path) -> None:
    with open_text(path, "wt") as fh:
        for qid, docs in qrels.items():
            for doc, grade in docs.items():
                fh.write(f"{qid} 0 {doc} {grade}\n")


def read_run(path: str | Path, name: str | None = None) -> Run:
    """Read a TREC run file. The rank column is ignored (trec_eval re-sorts by score)."""
    p = Path(path)
    qids: list[str] = []
    seen: dict[str, int] = {}
    per_query_docs: list[list[str]] = []
    per_query_scores: list[list[float]] = []
    tag = ""
    for lineno, line in iter_lines(p):
        parts = line.split()
        if not parts:
            continue
        if len(parts) != 6:
            raise InputError(
                f"expected 6 columns (query-id Q0 doc-id rank score tag), got {len(parts)}", path=p, line=lineno
            )
        qid, _, doc, _, score, tag = parts
        try:
            value = float(score)
        except ValueError:
            raise InputError(f"score must be a number, got {score!r}", path=p, line=lineno, field="score") from None
        if not np.isfinite(value):
            raise InputError(f"score must be finite, got {score!r}", path=p, line=lineno, field="score")
        i = seen.get(qid)
        if i is None:
            i = seen[qid] = len(qids)
            qids.append(qid)
            per_query_docs.append([])
            per_query_scores.append([])
        per_query_docs[i].append(doc)
        per_query_scores[i].append(value)
    lengths = [len(d) for d in per_query_docs]
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    docs = np.array([d for ds in per_query_docs for d in ds], dtype=object)
    scores = np.array([s for ss in per_query_scores for s in ss], dtype=np.float64)
    return Run(qids, offsets, docs, scores, name=name if name is not None else tag or p.stem)


def write_run(run: Run, path: str | Path, tag: str | None = None, query_ids: Iterable[str] | None = None) -> None:
    """Write a run in trec_eval order; queries with no ranking write no lines (status lives elsewhere)."""
    tag = (tag or run.name or "retbench").replace(" ", "_")
    with open_text(path, "wt") as fh:
        for qid in query_ids if query_ids is not None else run.query_ids:
            s = run._slice(qid)
            docs = run.doc_ids[s]
            scores = run.scores[s].tolist()
            fh.writelines(
                f"{qid} Q0 {doc} {rank} {score!r} {tag}\n" for rank, (doc, score) in enumerate(zip(docs, scores, strict=True), 1)
            )
