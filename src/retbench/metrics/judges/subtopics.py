"""Subtopic relevance (the diversity measures' qrels) and its judge.

`SubtopicQrels` holds (query, subtopic, doc, grade) judgements, as ndeval's qrels files do. It *is* a
`Qrels` too: query -> doc -> the doc's highest grade over the query's subtopics, so `evaluate(run,
subtopic_qrels, ...)` builds the usual GainMatrix from it and every other metric reads it as ordinary
qrels (a document relevant to any subtopic is relevant to the query, as ndeval's own MAP reads it).

`judge_subtopics` locates every relevant (query, subtopic, doc) judgement in a run (`Run.locate`, work in
proportion to the judgements) and gives the diversity measures (`metrics/diversity.py`) what they need:
the (row, rank, subtopic) of each relevant ranked pair and each query's number of subtopics with a
relevant document. Subtopics are numbered in the order they first appear in the judgements, as pyndeval
numbers them: that order is the order ndeval adds per-subtopic gains in.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from retbench.data import Qrels, Run
from retbench.metrics.gain import check_level

Judgement = tuple[str, str, str, int]  # (query id, subtopic id, doc id, grade)


class SubtopicQrels(Qrels):
    """Graded judgements per (query, subtopic, doc); as a `Qrels`, each doc's highest grade for the query."""

    def __init__(self, judgements: Iterable[Judgement]) -> None:
        rows = [(str(q), str(s), str(d), int(g)) for q, s, d, g in judgements]
        collapsed: dict[str, dict[str, int]] = {}
        number: dict[str, int] = {}
        for q, s, d, g in rows:
            docs = collapsed.setdefault(q, {})
            docs[d] = max(docs.get(d, g), g)
            number.setdefault(s, len(number))
        super().__init__(collapsed)
        self.subtopic_ids = list(number)
        self._sub_query = np.array([q for q, _, _, _ in rows], dtype=object)
        self._sub_doc = np.array([d for _, _, d, _ in rows], dtype=object)
        self._sub_index = np.fromiter((number[s] for _, s, _, _ in rows), dtype=np.int64, count=len(rows))
        self._sub_grade = np.fromiter((g for _, _, _, g in rows), dtype=np.int64, count=len(rows))

    @property
    def judgements(self) -> list[Judgement]:
        """Every (query, subtopic, doc, grade), in the order given."""
        subs = self.subtopic_ids
        return [
            (q, subs[s], d, g)
            for q, s, d, g in zip(
                self._sub_query.tolist(),
                self._sub_index.tolist(),
                self._sub_doc.tolist(),
                self._sub_grade.tolist(),
                strict=True,
            )
        ]

    def relevant_pairs(self, query_ids: Sequence[str], level: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(row in `query_ids`, doc id, subtopic number) of every judgement with grade >= `level`."""
        check_level(level)
        row_of = {q: i for i, q in enumerate(query_ids)}
        rows = np.fromiter(
            (row_of.get(q, -1) for q in self._sub_query.tolist()), dtype=np.int64, count=len(self._sub_query)
        )
        keep = (rows >= 0) & (self._sub_grade >= level)
        return rows[keep], self._sub_doc[keep], self._sub_index[keep]

    @property
    def n_subtopic_judgements(self) -> int:
        return len(self._sub_query)


@dataclass(frozen=True)
class SubtopicHits:
    """Relevant ranked (row, 0-based rank, subtopic number) triples sorted by row, rank, subtopic; per-row
    counts of subtopics with a relevant document (M) and ranking lengths; the judgements behind them."""

    rows: np.ndarray
    ranks: np.ndarray
    subtopics: np.ndarray
    n_subtopics: np.ndarray
    lengths: np.ndarray
    pairs: tuple[np.ndarray, np.ndarray, np.ndarray]  # (row, doc id, subtopic) of every relevant judgement

    def __len__(self) -> int:
        return len(self.n_subtopics)


def judge_subtopics(
    run: Run | None, qrels: SubtopicQrels, query_ids: Sequence[str], run_rows: np.ndarray | None, level: int = 1
) -> SubtopicHits:
    """Where each relevant (query, subtopic, doc) judgement sits in the run; one row per query id."""
    n = len(query_ids)
    jrow, jdoc, jsub = qrels.relevant_pairs(query_ids, level)
    key = np.unique(jrow * (len(qrels.subtopic_ids) + 1) + jsub)
    n_subtopics = np.bincount(key // (len(qrels.subtopic_ids) + 1), minlength=n).astype(np.int64)
    if run is None or run_rows is None:
        empty = np.zeros(0, dtype=np.int64)
        return SubtopicHits(empty, empty, empty, n_subtopics, np.zeros(n, dtype=np.int64), (jrow, jdoc, jsub))
    run_len = np.diff(run.offsets)
    lengths = np.where(run_rows >= 0, run_len[np.maximum(run_rows, 0)] if len(run_len) else 0, 0).astype(np.int64)
    in_run = run_rows[jrow] if len(jrow) else np.zeros(0, dtype=np.int64)
    sel = np.flatnonzero(in_run >= 0)
    which, ranks = run.locate(in_run[sel], jdoc[sel])
    rows, subs = jrow[sel][which], jsub[sel][which]
    ranks = np.asarray(ranks, dtype=np.int64)
    order = np.lexsort((subs, ranks, rows))
    return SubtopicHits(rows[order], ranks[order], subs[order], n_subtopics, lengths, (jrow, jdoc, jsub))
