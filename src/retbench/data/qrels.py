"""Graded relevance judgements held as columns."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from itertools import chain, repeat
from types import MappingProxyType
from typing import Any

import numpy as np

from retbench.data.ids import id_problem, shown
from retbench.data.lazy_ids import IdColumn
from retbench.errors import InputError

GRADE_BOUND = 2**63  # grades are stored as int64: -GRADE_BOUND <= grade < GRADE_BOUND


def checked_grade(value: object) -> int:
    """The integer grade `value` stands for, or ValueError saying why it is none.

    The one grade rule of every judgement source (TREC and BEIR qrels lines, golden sets, Python
    mappings and DataFrames): an integer, its decimal text, or a float with no fractional part
    (`1.0`, `2e0`); never a boolean, null, NaN, infinity or a fraction (a grade of 0.5 would be cut
    to 0 without a word), and it must fit the 64 bits grades are stored in.
    """
    if isinstance(value, (bool, np.bool_)) or value is None:
        raise ValueError(f"grade must be an integer, got {value!r}")
    try:
        grade = int(value) if isinstance(value, (int, np.integer)) else _integer(value)
    except (TypeError, ValueError, OverflowError):
        raise ValueError(f"grade must be an integer, got {shown(value)}") from None
    if not -GRADE_BOUND <= grade < GRADE_BOUND:
        raise ValueError(f"grade out of range (grades must fit in 64 bits), got {shown(value)}")
    return grade


def _integer(value: Any) -> int:
    """A string's integer (decimal text, else a float's text) or a number with no fractional part."""
    if isinstance(value, str):
        try:
            return int(value)
        except ValueError:
            pass
    number = float(value)
    if not number.is_integer():  # NaN and infinity are not integers either
        raise ValueError(value)
    return int(number)


def _id(value: object, role: str) -> str:
    problem = id_problem(value)
    if problem:
        raise InputError(f"{role} {problem}", field="qrels")
    return str(value)


def _judged(qid: object, docs: object) -> dict[str, Any]:  # grades are checked after
    if not isinstance(docs, Mapping):
        raise InputError(
            f"the judgements of query {qid!r:.40} must map doc id -> grade, got {type(docs).__name__}", field="qrels"
        )
    return {_id(d, "document") if type(d) is not str else d: g for d, g in docs.items()}


def _grade(qid: str, doc: str, value: Any) -> int:
    try:
        return checked_grade(value)
    except ValueError as exc:
        raise InputError(str(exc), field=f"qrels[{shown(qid)}][{shown(doc)}]") from None


def _all_str(values: np.ndarray) -> bool:
    """Whether every element of an object array is a str (str.join checks each one's type in C)."""
    try:
        "".join(values.tolist())
    except TypeError:
        return False
    return True


class Qrels(Mapping[str, Mapping[str, int]]):
    """Graded relevance judgements: query id -> doc id -> integer grade.

    Grades <= 0 are kept (trec_eval reads them as judged non-relevant) but never count as relevant.
    Held as columns (query ids, CSR offsets, doc ids, grades), which judging reads directly; the
    dict of dicts behind the Mapping interface is built on first use.
    """

    def __init__(self, judgements: Mapping[str, Mapping[str, int]]) -> None:
        """A snapshot of `judgements`, kept as columns (later changes to the mapping do not show)."""
        if isinstance(judgements, Qrels):
            self._set_columns(judgements._qids, judgements._offsets, judgements._docs, judgements._grades)
            return
        qids, docs_of = list(judgements), list(judgements.values())
        lengths = np.fromiter(map(len, docs_of), dtype=np.int64, count=len(docs_of))
        total = int(lengths.sum())
        docs = np.fromiter(chain.from_iterable(docs_of), dtype=object, count=total)
        if not (set(map(type, qids)) <= {str} and set(map(type, docs_of)) <= {dict} and _all_str(docs)):
            # ids become strings (as in a dict, the last of two ids that read alike wins)
            canon = {_id(q, "query"): _judged(q, docs) for q, docs in judgements.items()}
            qids, docs_of = list(canon), list(canon.values())
            lengths = np.fromiter(map(len, docs_of), dtype=np.int64, count=len(docs_of))
            total = int(lengths.sum())
            docs = np.fromiter(chain.from_iterable(docs_of), dtype=object, count=total)
        if set(map(type, chain.from_iterable(map(dict.values, docs_of)))) <= {int}:  # type: ignore[arg-type]
            try:
                grades = np.fromiter(chain.from_iterable(map(dict.values, docs_of)), dtype=np.int64, count=total)  # type: ignore[arg-type]
            except OverflowError:
                grades = None
        else:
            grades = None
        if grades is None:  # grades given as text, floats or NumPy numbers, or one beyond 64 bits: each checked
            grades = np.fromiter(
                (_grade(q, d, g) for q, judged in zip(qids, docs_of, strict=True) for d, g in judged.items()),
                dtype=np.int64,
                count=total,
            )
        offsets = np.zeros(len(lengths) + 1, dtype=np.int64)
        np.cumsum(lengths, out=offsets[1:])
        self._set_columns(qids, offsets, docs, grades)

    @classmethod
    def from_columns(
        cls, query_ids: Sequence[str], offsets: np.ndarray, doc_ids: np.ndarray | IdColumn, grades: np.ndarray
    ) -> Qrels:
        """From CSR columns: query i judges `doc_ids[offsets[i]:offsets[i + 1]]` with `grades` there.

        The caller guarantees distinct query ids and distinct doc ids within a query. `doc_ids` may be an
        `IdColumn` (a file reader's: strings made on first use, keys kept for judging).
        """
        self = cls.__new__(cls)
        self._set_columns(query_ids, offsets, doc_ids, grades)
        return self

    def _set_columns(
        self, query_ids: Sequence[str], offsets: np.ndarray, doc_ids: np.ndarray | IdColumn, grades: np.ndarray
    ) -> None:
        self._dict: dict[str, dict[str, int]] | None = None
        self._qids = list(query_ids)
        self._offsets = np.asarray(offsets, dtype=np.int64)
        self._docs = doc_ids if isinstance(doc_ids, IdColumn) else IdColumn(np.asarray(doc_ids, dtype=object))
        self._grades = np.asarray(grades, dtype=np.int64)
        self._rows: dict[str, int] | None = None

    @property
    def _row(self) -> dict[str, int]:
        if self._rows is None:
            self._rows = dict(zip(self._qids, range(len(self._qids)), strict=True))
        return self._rows

    @property
    def _q(self) -> dict[str, dict[str, int]]:
        if self._dict is None:
            qids, offsets, grades = self._qids, self._offsets, self._grades
            d, g = self._docs.strings().tolist(), grades.tolist()
            bounds = offsets.tolist()
            self._dict = {
                q: dict(zip(d[a:b], g[a:b], strict=True)) for q, a, b in zip(qids, bounds[:-1], bounds[1:], strict=True)
            }
        return self._dict

    def columns(self, query_ids: Sequence[str]) -> tuple[np.ndarray, IdColumn, np.ndarray]:
        """(row in `query_ids`, doc id, grade) of every judgement of those queries, row-major. The doc ids
        are an `IdColumn`: `Run.locate` reads their keys when a file reader kept them, else their strings."""
        own, offsets, docs, grades = self._qids, self._offsets, self._docs, self._grades
        if len(query_ids) == len(own) and list(query_ids) == own:  # all of them, in order (as evaluate asks)
            return np.repeat(np.arange(len(own), dtype=np.int64), np.diff(offsets)), docs, grades
        at = np.fromiter(map(self._row.get, query_ids, repeat(-1)), dtype=np.int64, count=len(query_ids))
        lens = np.where(at >= 0, offsets[at + 1] - offsets[at], 0)
        rows = np.repeat(np.arange(len(at), dtype=np.int64), lens)
        take = np.repeat(offsets[at] - np.cumsum(lens) + lens, lens) + np.arange(len(rows), dtype=np.int64)
        return rows, docs[take], grades[take]

    def __getitem__(self, qid: str) -> Mapping[str, int]:
        """A read-only view: judging reads the columns, so an edit here could never reach it."""
        return MappingProxyType(self._q[qid])

    def __iter__(self) -> Iterator[str]:
        return iter(self._qids)

    def __len__(self) -> int:
        return len(self._qids)

    def __contains__(self, qid: object) -> bool:
        return qid in self._row

    @property
    def n_judgements(self) -> int:
        return len(self._grades)

    def relevant(self, qid: str, level: int = 1) -> set[str]:
        """Doc ids judged at or above `level` for a query."""
        return {d for d, g in self._q.get(qid, {}).items() if g >= level}

    def grade_histogram(self) -> dict[int, int]:
        hist: dict[int, int] = {}
        for docs in self._q.values():
            for g in docs.values():
                hist[g] = hist.get(g, 0) + 1
        return dict(sorted(hist.items()))

    def subset(self, qids: Iterable[str]) -> Qrels:
        return Qrels({q: self._q[q] for q in qids if q in self._q})

    def to_dict(self) -> dict[str, dict[str, int]]:
        return {q: dict(d) for q, d in self._q.items()}

    def fingerprint(self) -> str:
        """16 hex digits of sha256 over the judgements (sorted JSON): equal judgements, equal fingerprint.

        Manifests record it so that results scored on other qrels are never compared without a word.
        """
        return hashlib.sha256(json.dumps(self.to_dict(), sort_keys=True).encode()).hexdigest()[:16]
