"""Runs and qrels from the shapes other libraries hand around: dicts, pandas DataFrames, paths.

Column names are matched case-insensitively against the spellings in common use:

| library | query | document | run score | relevance grade |
|---|---|---|---|---|
| retbench, BEIR-like tables | `query_id` | `doc_id` | `score` | `relevance` |
| PyTerrier | `qid` | `docno` | `score` | `label` |
| ranx (`Run.from_df` / `Qrels.from_df`) | `q_id` | `doc_id` | `score` | `score` |
| BEIR qrels .tsv read as a table | `query-id` | `corpus-id` | | `score` |

pandas is never imported here: a DataFrame is recognised by its `columns` and read column by column.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from retbench.data import Qrels, Run
from retbench.errors import InputError

QUERY_COLUMNS = ("query_id", "qid", "q_id", "query-id", "queryid", "query")
DOC_COLUMNS = ("doc_id", "docno", "docid", "corpus-id", "corpus_id", "document_id", "doc")
SCORE_COLUMNS = ("score", "similarity", "rank_score")
GRADE_COLUMNS = ("relevance", "label", "grade", "rel", "judgement", "judgment", "score")


def is_frame(obj: Any) -> bool:
    """A pandas (or pandas-like) DataFrame: has named columns and per-column access."""
    return hasattr(obj, "columns") and hasattr(obj, "__getitem__") and not isinstance(obj, Mapping)


def _column(frame: Any, candidates: tuple[str, ...], role: str, what: str) -> str:
    names = {str(c).lower(): c for c in frame.columns}
    for c in candidates:
        if c in names:
            return names[c]
    raise InputError(
        f"no {role} column in the {what} DataFrame (looked for {', '.join(candidates)}; have: "
        f"{', '.join(map(str, frame.columns))})",
        field=role,
    )


def _grouped(qids: np.ndarray, docs: np.ndarray, values: list[Any]) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for q, d, v in zip(qids.tolist(), docs.tolist(), values, strict=True):
        out.setdefault(str(q), {})[str(d)] = v
    return out


def run_from_frame(frame: Any, name: str = "") -> Run:
    """A Run from a DataFrame with query, document and score columns (rank order is re-established)."""
    q = _column(frame, QUERY_COLUMNS, "query id", "run")
    d = _column(frame, DOC_COLUMNS, "document id", "run")
    s = _column(frame, SCORE_COLUMNS, "score", "run")
    try:
        scores = np.asarray(frame[s], dtype=np.float64).tolist()
    except (TypeError, ValueError):
        raise InputError(f"run column {s!r} must hold numbers", field=str(s)) from None
    return Run.from_dict(_grouped(np.asarray(frame[q]), np.asarray(frame[d]), scores), name=name)


def qrels_from_frame(frame: Any) -> Qrels:
    """Qrels from a DataFrame with query, document and grade columns (grades must be whole numbers)."""
    q = _column(frame, QUERY_COLUMNS, "query id", "qrels")
    d = _column(frame, DOC_COLUMNS, "document id", "qrels")
    g = _column(frame, GRADE_COLUMNS, "relevance", "qrels")
    try:
        raw = np.asarray(frame[g], dtype=np.float64)
    except (TypeError, ValueError):
        raise InputError(f"qrels column {g!r} must hold integer grades", field=str(g)) from None
    if not np.all(np.isfinite(raw)) or not np.all(raw == np.round(raw)):
        raise InputError(f"qrels column {g!r} must hold integer grades", field=str(g))
    return Qrels(_grouped(np.asarray(frame[q]), np.asarray(frame[d]), raw.astype(np.int64).tolist()))


def as_qrels(obj: Any, split: str = "test") -> Qrels:
    """Qrels from a Qrels, `{qid: {doc: grade}}`, a DataFrame, or a TREC / BEIR qrels path (or BEIR folder)."""
    if isinstance(obj, Qrels):
        return obj
    if isinstance(obj, (str, Path)):
        from retbench.io.judgements import read_judgements

        return read_judgements(obj, split)[0]
    if is_frame(obj):
        return qrels_from_frame(obj)
    if isinstance(obj, Mapping):
        try:
            return Qrels(obj)
        except (TypeError, ValueError, AttributeError) as exc:
            raise InputError(f"qrels must map query id -> {{doc id: integer grade}}: {exc}", field="qrels") from None
    raise InputError(f"cannot read qrels from a {type(obj).__name__}", field="qrels")


def as_run(obj: Any, name: str = "") -> Run:
    """A Run from a Run, `{qid: {doc: score}}`, a DataFrame, or a TREC run file path."""
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
    if isinstance(obj, Mapping):
        try:
            return Run.from_dict(obj, name=name)
        except (TypeError, ValueError, AttributeError) as exc:
            raise InputError(f"a run must map query id -> {{doc id: score}}: {exc}", field="run") from None
    raise InputError(f"cannot read a run from a {type(obj).__name__}", field="run")


def pandas() -> Any:
    """The pandas module, imported on first use (it is the optional `pandas` extra)."""
    try:
        import pandas as pd
    except ImportError:
        raise InputError("this needs pandas: pip install 'retbench[pandas]'", field="pandas") from None
    return pd
