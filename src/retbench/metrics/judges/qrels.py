"""The id judge: look a run's doc ids up in TREC-style qrels and build the GainMatrix.

Work grows with the number of judgements, not with the depth of the run: judged (query, doc) pairs
are located in the run by `Run.locate` (64-bit keys, or the mappings a run was built from), never by walking it.

Repeated evaluation (bootstraps, metric sweeps, a tuner re-scoring the same candidate) judges the same run by the
same judgements again and again; the GainMatrix of a run and a `Qrels` (immutable: its columns are built once) is
kept beside the run while both live (`_REUSED`), so later evaluations skip judging altogether. The first pays
nothing for it. A run built from mappings that changed since is judged again (the mappings' sizes are checked, as
`Run.locate` checks them); a plain mapping of judgements, which may change in place, is never reused.
"""

from __future__ import annotations

import weakref
from collections.abc import Mapping, Sequence
from itertools import chain

import numpy as np

from retbench.data import Qrels, Run
from retbench.data.lazy_ids import IdColumn, MappingIds
from retbench.metrics.gain import GainMatrix, _ideal_csr


def _flatten(
    table: Mapping[str, Mapping[str, int]], query_ids: Sequence[str]
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(row, doc id, grade) of every judgement of the given queries, built by C-level iteration."""
    empty: Mapping[str, int] = {}
    judged = [table.get(q, empty) for q in query_ids]
    lengths = np.fromiter(map(len, judged), dtype=np.int64, count=len(judged))
    total = int(lengths.sum())
    docs = np.fromiter(chain.from_iterable(judged), dtype=object, count=total)
    grades = np.fromiter(chain.from_iterable(j.values() for j in judged), dtype=np.float64, count=total)
    return np.repeat(np.arange(len(judged), dtype=np.int64), lengths), docs, grades


def _flatten_qrels(
    qrels: Mapping[str, Mapping[str, int]], query_ids: Sequence[str]
) -> tuple[np.ndarray, np.ndarray | IdColumn, np.ndarray]:
    """(row, doc id, grade) of every judgement of the given queries (a plain mapping's grades stay as
    given, floats too; a Qrels' are integers)."""
    rows, docs, grades = qrels.columns(query_ids) if isinstance(qrels, Qrels) else _flatten(qrels, query_ids)
    return rows, docs, np.asarray(grades, dtype=np.float64)


def run_rows(run: Run, query_ids: Sequence[str]) -> np.ndarray:
    """The run's row of each query id (-1 where the run has no such query)."""
    return run.rows(query_ids)


def judge_qrels(
    run: Run,
    qrels: Qrels | Mapping[str, Mapping[str, int]],
    query_ids: Sequence[str] | None = None,
    rows: np.ndarray | None = None,
) -> GainMatrix:
    """Grade each ranked document by the qrels: one row per query in `query_ids` (default: qrels order).

    Work is proportional to the number of judgements wherever the run allows it: a run built from
    `{qid: {doc: score}}` mappings answers "is this judged doc ranked, and with what score?" by one
    dict lookup, and its rank follows from a vectorized binary search over the query's sorted
    scores; a run read from a TREC file finds them by a hash lookup over its doc keys; a run whose doc
    codes are already interned needs one gather over those codes; any other run is scanned once,
    looking each ranked doc up among the judged ids only. A query absent from the run gets an empty
    row (length 0). `rows`: the run's row of each query id, when the caller has them already.
    Documents judged 0 and judged negative are located too (bpref, infAP and `-J` need them).
    """
    qids = list(qrels) if query_ids is None else list(query_ids)
    reusable = isinstance(qrels, Qrels) and (not isinstance(run._lazy, MappingIds) or run._lazy.unchanged())
    kept = _REUSED.get(run) if reusable else None
    if kept is not None and kept[0]() is qrels and kept[1] == qids:
        return kept[2]
    gm = _judge(run, qrels, qids, rows)
    if reusable and isinstance(qrels, Qrels):
        _REUSED[run] = (weakref.ref(qrels), qids, gm)
    return gm


#: run -> (its last Qrels, their query ids, the GainMatrix judged): one entry per live run
_REUSED: weakref.WeakKeyDictionary[Run, tuple[weakref.ref[Qrels], list[str], GainMatrix]] = weakref.WeakKeyDictionary()


def _judge(
    run: Run, qrels: Qrels | Mapping[str, Mapping[str, int]], qids: list[str], rows: np.ndarray | None
) -> GainMatrix:
    n = len(qids)
    jrow, jdocs, jgrade = _flatten_qrels(qrels, qids)
    ideal_offsets, ideal_grades = _ideal_csr(jrow, jgrade, n)
    n_zero = np.bincount(jrow[jgrade == 0], minlength=n).astype(np.int64)

    run_row = run_rows(run, qids) if rows is None else rows
    run_len = np.diff(run.offsets)
    lengths = np.where(run_row >= 0, run_len[np.maximum(run_row, 0)] if len(run_len) else 0, 0).astype(np.int64)

    jrr = run_row[jrow] if len(jrow) else np.zeros(0, dtype=np.int64)
    jr, jd, jg = jrow, jdocs, jgrade
    if len(jrr) and int(jrr.min()) < 0:  # judged queries the run lacks: their judgements find nothing
        sel = np.flatnonzero(jrr >= 0)
        jrr, jr, jd, jg = jrr[sel], jrow[sel], jdocs[sel], jgrade[sel]

    which, ranks = run.locate(jrr, jd)
    rows, grades = np.asarray(jr[which], dtype=np.int64), np.asarray(jg[which], dtype=np.float64)
    ranks = np.asarray(ranks, dtype=np.int64)
    pos, zero, neg = grades > 0, grades == 0, grades < 0
    gm = GainMatrix.from_hits(qids, rows[pos], ranks[pos], grades[pos], lengths, ideal_offsets, ideal_grades)
    return gm.with_judged((rows[zero], ranks[zero]), (rows[neg], ranks[neg]), n_zero)
