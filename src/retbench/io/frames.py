"""Runs and qrels from the shapes other libraries hand around: dicts, pandas DataFrames, paths.

Column names are matched case-insensitively against the spellings in common use:

| library | query | document | run score | relevance grade |
|---|---|---|---|---|
| retbench, BEIR-like tables | `query_id` | `doc_id` | `score` | `relevance` |
| PyTerrier | `qid` | `docno` | `score` | `label` |
| ranx (`Run.from_df` / `Qrels.from_df`) | `q_id` | `doc_id` | `score` | `score` |
| BEIR qrels .tsv read as a table | `query-id` | `corpus-id` | | `score` |

ranx's `Qrels` and `Run` objects are read through their `to_dict()`. Every form is held to the rules
of the files: ids are non-empty text (or integers), scores finite numbers, grades integers.

pandas is never imported here: a DataFrame is recognised by its `columns` and read column by column.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any, Protocol, TypeGuard, TypeVar

import numpy as np
from numpy.typing import ArrayLike

from retbench.data import Qrels, Run
from retbench.data.ids import first_bad_id, python_mapping_problem, python_value_problem, score_problem
from retbench.data.qrels import checked_grade
from retbench.errors import InputError

QUERY_COLUMNS = ("query_id", "qid", "q_id", "query-id", "queryid", "query")
DOC_COLUMNS = ("doc_id", "docno", "docid", "corpus-id", "corpus_id", "document_id", "doc")
SCORE_COLUMNS = ("score", "similarity", "rank_score")
GRADE_COLUMNS = ("relevance", "label", "grade", "rel", "judgement", "judgment", "score")

V = TypeVar("V")


class DataFrameLike(Protocol):
    """What is read of a pandas (or pandas-like) DataFrame: its column labels, its row labels, one column."""

    @property
    def columns(self) -> Iterable[Hashable]: ...

    def __getitem__(self, column: Hashable, /) -> ArrayLike: ...


def is_frame(obj: object) -> TypeGuard[DataFrameLike]:
    """A pandas (or pandas-like) DataFrame: has named columns and per-column access."""
    return hasattr(obj, "columns") and hasattr(obj, "__getitem__") and not isinstance(obj, Mapping)


def _column(frame: DataFrameLike, candidates: tuple[str, ...], role: str, what: str) -> Hashable:
    names = {str(c).lower(): c for c in frame.columns}
    for c in candidates:
        if c in names:
            return names[c]
    raise InputError(
        f"no {role} column in the {what} DataFrame (looked for {', '.join(candidates)}; have: "
        f"{', '.join(map(str, frame.columns))})",
        field=role,
    )


def _row_label(frame: DataFrameLike, row: int) -> str:
    labels = getattr(frame, "index", None)  # pandas' row labels; a frame without them is named by position
    try:
        return str(labels[row]) if labels is not None else str(row)
    except (AttributeError, IndexError, TypeError):
        return str(row)


def _frame_ids(frame: DataFrameLike, column: Hashable, what: str) -> list[str | int]:
    """A DataFrame's id column as Python values, refused (naming the row) where one is no usable id."""
    values = np.asarray(frame[column]).tolist()
    bad = first_bad_id(values)
    if bad is not None:
        row, reason = bad
        raise InputError(f"{what} {reason}", field=f"{column}[{_row_label(frame, row)}]")
    return values


def _grouped(qids: Sequence[object], docs: Sequence[object], values: Sequence[V]) -> dict[str, dict[str, V]]:
    out: dict[str, dict[str, V]] = {}
    for q, d, v in zip(qids, docs, values, strict=True):
        out.setdefault(str(q), {})[str(d)] = v
    return out


def run_from_frame(frame: DataFrameLike, name: str = "") -> Run:
    """A Run from a DataFrame with query, document and score columns (rank order is re-established).

    Ids and scores are checked as a run file's are: a null, NaN or infinite score, or a null or
    non-text id, is refused naming its column and row.
    """
    q = _column(frame, QUERY_COLUMNS, "query id", "run")
    d = _column(frame, DOC_COLUMNS, "document id", "run")
    s = _column(frame, SCORE_COLUMNS, "score", "run")
    column = np.asarray(frame[s])
    try:  # a numeric column is checked in one pass; objects (None, text, booleans) one by one
        scores = column.astype(np.float64) if column.dtype.kind in "fiu" else np.zeros(0)
        fine = column.dtype.kind in "fiu" and bool(np.isfinite(scores).all())
    except (TypeError, ValueError, OverflowError):
        fine = False
    if not fine:
        for row, value in enumerate(column.astype(object).tolist()):
            problem = python_value_problem(value, "score") or score_problem(value)
            if problem:
                raise InputError(problem, field=f"{s}[{_row_label(frame, row)}]")
        scores = column.astype(np.float64)
    qids = _frame_ids(frame, q, "query")
    docs = _frame_ids(frame, d, "document")
    return Run.from_dict(_grouped(qids, docs, scores.tolist()), name=name)


def qrels_from_frame(frame: DataFrameLike) -> Qrels:
    """Qrels from a DataFrame with query, document and grade columns (grades as in a qrels file: integers)."""
    q = _column(frame, QUERY_COLUMNS, "query id", "qrels")
    d = _column(frame, DOC_COLUMNS, "document id", "qrels")
    g = _column(frame, GRADE_COLUMNS, "relevance", "qrels")
    column = np.asarray(frame[g])
    if column.dtype.kind in "iu" and (column.dtype.kind == "i" or column.max(initial=0) < 2**63):
        grades = column.tolist()  # an integer column: every grade is already one (the common case, no loop)
    else:
        grades = []
        for row, value in enumerate(column.astype(object).tolist()):
            try:
                problem = python_value_problem(value, "grade")
                if problem:
                    raise ValueError(problem)
                grades.append(checked_grade(value))
            except ValueError as exc:
                raise InputError(str(exc), field=f"{g}[{_row_label(frame, row)}]") from None
    qids = _frame_ids(frame, q, "query")
    docs = _frame_ids(frame, d, "document")
    return Qrels(_grouped(qids, docs, grades))


def _refuse(problem: tuple[str, str] | None) -> None:
    """Raise the (field, reason) a check found as an InputError naming the field."""
    if problem is not None:
        raise InputError(problem[1], field=problem[0])


def _ranx(obj: object) -> dict[str, Any] | None:
    """The `{qid: {doc: value}}` of a ranx `Qrels` or `Run` (None for anything else; ranx is never imported)."""
    to_dict = getattr(obj, "to_dict", None)
    if type(obj).__module__.startswith("ranx.") and callable(to_dict):
        return dict(to_dict())
    return None


def as_qrels(obj: object, split: str = "test") -> Qrels:
    """Qrels from a Qrels, `{qid: {doc: grade}}`, a ranx Qrels, a DataFrame, or a TREC / BEIR qrels path (or BEIR folder).

    Grades and ids are held to a qrels file's rules (see `data.qrels.checked_grade`): a fractional,
    null or NaN grade, or a null, float or tuple id, is refused naming where it is.
    """
    if isinstance(obj, Qrels):
        return obj
    if isinstance(obj, (str, Path)):
        from retbench.io.judgements import read_judgements

        return read_judgements(obj, split)[0]
    if is_frame(obj):
        return qrels_from_frame(obj)
    judged = _ranx(obj)
    if judged is not None:
        obj = judged
    if isinstance(obj, Mapping):
        _refuse(python_mapping_problem(obj, "grade"))
        return Qrels(obj)
    raise InputError(f"cannot read qrels from a {type(obj).__name__}", field="qrels")


def as_run(obj: object, name: str = "") -> Run:
    """A Run from a Run, `{qid: {doc: score}}`, a ranx Run, a DataFrame, or a TREC run file path.

    Scores and ids are held to a run file's rules: NaN, infinite or null scores and null, float or
    tuple ids are refused naming where they are.
    """
    if isinstance(obj, Run):
        return obj
    if isinstance(obj, (str, Path)):
        from retbench.io.judgements import read_system

        run = read_system(obj)[0]
        if name:
            run.name = name
        return run
    if is_frame(obj):
        return run_from_frame(obj, name)
    ranked = _ranx(obj)
    if ranked is not None:
        name = name or str(getattr(obj, "name", None) or "")
        obj = ranked
    if isinstance(obj, Mapping):
        _refuse(python_mapping_problem(obj, "score"))
        try:
            return Run.from_dict(obj, name=name)  # ids and scores checked there, as a run file's are
        except InputError:
            raise
        except (TypeError, ValueError, AttributeError) as exc:
            raise InputError(f"a run must map query id -> {{doc id: score}}: {exc}", field="run") from None
    raise InputError(f"cannot read a run from a {type(obj).__name__}", field="run")


def pandas() -> ModuleType:
    """The pandas module, imported on first use (it is the optional `pandas` extra)."""
    try:
        import pandas as pd
    except ImportError:
        raise InputError("this needs pandas: pip install 'retbench[pandas]'", field="pandas") from None
    return pd
