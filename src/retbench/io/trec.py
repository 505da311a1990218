"""TREC qrels (`qid iter docid grade`) and run files (`qid Q0 docid rank score tag`).

A line whose first non-blank character is `#` is a comment and is skipped, in qrels and runs, as trec_eval
10.0 skips it (its `get_qrels.c` and `get_trec_results.c`); a `#` inside a field (`doc#4_1633802806`) is data.

Written files round-trip byte-stably: scores are written with Python's shortest exact float repr,
queries and judgements keep their order, and the rank column is the 1-based position in
trec_eval order (trec_eval itself ignores that column and re-sorts by score).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from retbench.data import Qrels, Run
from retbench.data.ids import score_problem
from retbench.data.keys import may_repeat
from retbench.data.lazy_ids import IdColumn
from retbench.data.qrels import checked_grade
from retbench.errors import InputError
from retbench.io.files import iter_lines, open_text, small_file
from retbench.io.trec_columns import (
    ArrowIds,
    column_keys,
    columnar_kind,
    numbers,
    offsets_of,
    query_segments,
    read_columns,
    run_tag,
    take_rows,
)

if TYPE_CHECKING:
    pass


def _grade(token: str, path: Path, lineno: int) -> int:
    try:
        return checked_grade(token)
    except ValueError as exc:
        raise InputError(str(exc), path=path, line=lineno, field="grade") from None


def read_qrels(path: str | Path) -> Qrels:
    """Read a TREC qrels file. A (query, doc) judged twice is refused naming both lines, as trec_eval 9.0's
    `form_res_rels` refuses it ("duplicate docs"), even with equal grades: one of them is a mistake."""
    p = Path(path)
    table = None if small_file(p, SMALL_FILE_BYTES) else read_columns(p, _QRELS_FIELDS, "grade")
    if table is not None:
        grades = numbers(table.column("grade"))
        if np.all(grades == np.trunc(grades)) and np.all(np.abs(grades) < 2**53):
            qids, lens, order = query_segments(table.column("query"))
            docs = table.column("doc")
            if order is not None:
                docs, grades = take_rows(docs, order), grades[order]
                if docs is None:
                    return _read_qrels_lines(p)
            keys, exact = column_keys(docs)
            offsets = offsets_of(lens)
            if not may_repeat(offsets, keys):  # the ids stay bytes until asked for; judging reads the keys
                ids = IdColumn(ArrowIds(docs), keys if exact else None, size=len(keys))
                return Qrels.from_columns(qids, offsets, ids, grades.astype(np.int64))
    return _read_qrels_lines(p)  # (also where a doc may be judged twice: the line reader names both lines)


def _read_qrels_lines(p: Path) -> Qrels:
    judgements: dict[str, dict[str, int]] = {}
    first: dict[tuple[str, str], int] = {}  # (query, doc) -> the line that judged it
    for lineno, line in iter_lines(p):
        parts = line.split()
        if not parts or parts[0].startswith("#"):  # blank, or a comment line (trec_eval 10.0)
            continue
        if len(parts) != 4:
            raise InputError(
                f"expected 4 columns (query-id iteration doc-id grade), got {len(parts)}", path=p, line=lineno
            )
        qid, _, doc, grade = parts
        if first.setdefault((qid, doc), lineno) != lineno:  # trec_eval refuses it too ("duplicate docs")
            where = f"query {qid!r} (lines {first[qid, doc]} and {lineno})"
            raise InputError(
                f"document {doc!r} judged twice for {where}: keep one", path=p, line=lineno, field="doc-id"
            )
        judgements.setdefault(qid, {})[doc] = _grade(grade, p, lineno)
    return Qrels(judgements)


def write_qrels(qrels: Qrels, path: str | Path) -> None:
    with open_text(path, "wt") as fh:
        for qid, docs in qrels.items():
            for doc, grade in docs.items():
                fh.write(f"{qid} 0 {doc} {grade}\n")


def read_run(path: str | Path, name: str | None = None) -> Run:
    """Read a TREC run file. The rank column is ignored (trec_eval re-sorts by score).

    Files are parsed column-wise by Arrow's CSV reader (see `read_columns`), and their doc ids stay
    bytes with a 64-bit key each until something asks for them as strings (see `keys`): reading and
    judging 10M lines then never builds 10M Python objects. A file Arrow cannot read exactly as
    `str.split()` would (control bytes, a line that does not parse, ...) is read line by line, which
    also names the offending line; so is a file under `SMALL_FILE_BYTES` (it spares the pyarrow import).
    A columnar run file (Arrow IPC or Parquet, told by its first bytes) is read by `io.run_columns`.
    """
    p = Path(path)
    if columnar_kind(p):
        from retbench.io.run_columns import read_run_columns  # deferred: text runs never import it (start-up)

        return read_run_columns(p, name)
    table = None if small_file(p, SMALL_FILE_BYTES) else read_columns(p, _RUN_FIELDS, "score")
    if table is None:
        return _read_run_lines(p, name)
    scores = numbers(table.column("score"))
    tags = table.column("tag")
    tag = tags[len(tags) - 1].as_py().decode("utf-8") if len(tags) else ""
    qids, lens, order = query_segments(table.column("query"))
    docs = table.column("doc")
    del table, tags
    if order is not None:  # a query's lines are not contiguous: gather them, keeping file order within the query
        docs = take_rows(docs, order)
        if docs is None:
            return _read_run_lines(p, name)
        scores = scores[order]
    keys, exact = column_keys(docs)
    return Run.from_keyed_ids(
        qids, offsets_of(lens), ArrowIds(docs), keys, exact, scores, name=name if name is not None else tag or p.stem
    )


def _read_run_lines(p: Path, name: str | None) -> Run:
    qids: list[str] = []
    seen: dict[str, int] = {}
    per_query_docs: list[list[str]] = []
    per_query_scores: list[list[float]] = []
    tag = ""
    for lineno, line in iter_lines(p):
        parts = line.split()
        if not parts or parts[0].startswith("#"):  # blank, or a comment line (trec_eval 10.0)
            continue
        if len(parts) < 6:  # trec_eval reads six fields and ignores the rest of the line
            raise InputError(
                f"expected 6 columns (query-id Q0 doc-id rank score tag), got {len(parts)}", path=p, line=lineno
            )
        qid, _, doc, _, score, tag = parts[:6]
        problem = score_problem(score)
        if problem:
            raise InputError(problem, path=p, line=lineno, field="score")
        value = float(score)
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


_RUN_FIELDS = ("query", "q0", "doc", "rank", "score", "tag")
_QRELS_FIELDS = ("query", "iteration", "doc", "grade")
# Below this size a file is read line by line: up to about 1,000 lines that is as fast as Arrow's reader (1.4-1.6 ms
# for 1,000 run lines either way), and it spares importing pyarrow, about 0.07 CPU s (benchmarks/startup.py).
SMALL_FILE_BYTES = 32 * 1024


def write_run(run: Run, path: str | Path, tag: str | None = None, query_ids: Iterable[str] | None = None) -> None:
    """Write a run in trec_eval order; queries with no ranking write no lines (status lives elsewhere)."""
    tag = run_tag(tag or run.name)
    with open_text(path, "wt") as fh:
        for qid in query_ids if query_ids is not None else run.query_ids:
            s = run.span(qid)
            docs = run.doc_ids[s]
            scores = run.scores[s].tolist()
            fh.writelines(
                f"{qid} Q0 {doc} {rank} {score!r} {tag}\n"
                for rank, (doc, score) in enumerate(zip(docs, scores, strict=True), 1)
            )
