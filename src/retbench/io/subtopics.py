"""Subtopic qrels, ndeval's format: `query subtopic doc grade` per line, whitespace-separated.

This is the TREC qrels layout with the second column holding the subtopic (intent) id instead of the
unused iteration, as the TREC Web track's diversity qrels ship. Blank lines are skipped; anything else that
is not four fields with an integer grade, or a (query, subtopic, doc) judged twice, is an error naming the
file and line. What it returns is relevance for `evaluate` (metrics/judges/subtopics.py).
"""

from __future__ import annotations

from pathlib import Path

from retbench.errors import InputError
from retbench.io.files import field_rows
from retbench.metrics.judges.subtopics import Judgement, SubtopicQrels


def read_subtopic_qrels(path: str | Path) -> SubtopicQrels:
    """Read a subtopic qrels file into `SubtopicQrels`."""
    p = Path(path)
    judgements: list[Judgement] = []
    seen: dict[tuple[str, str, str], int] = {}
    for lineno, fields in field_rows(p, "subtopic qrels", "query subtopic doc grade"):
        qid, subtopic, doc, grade = fields
        try:
            value = int(grade)
        except ValueError:
            raise InputError(f"grade {grade!r} is not an integer", path=p, line=lineno, field="grade") from None
        key = (qid, subtopic, doc)
        if key in seen:
            raise InputError(
                f"query {qid!r} subtopic {subtopic!r} doc {doc!r} is judged twice (first on line {seen[key]})",
                path=p,
                line=lineno,
            )
        seen[key] = lineno
        judgements.append((qid, subtopic, doc, value))
    if not judgements:
        raise InputError("no judgements in subtopic qrels", path=p)
    return SubtopicQrels(judgements)
