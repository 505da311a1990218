"""trec_eval's judgement-group qrels (`trec_eval -R qrels_jg`): `query group doc grade` per line.

The TREC qrels layout with the second column naming the judgement group (the assessor, or user, whose
judgement the line is) instead of the unused iteration: several people's judgements of one query side by side.
Blank lines and comment lines (first non-blank character `#`, as trec_eval 10.0 skips them) are skipped; a `#`
inside a field is data. A line that is not four fields with an integer grade, or a (query, group, doc) judged
twice, is an error naming the file and line. Returns {group: {query: {doc: grade}}}.
"""

from __future__ import annotations

from pathlib import Path

from retbench.errors import InputError
from retbench.io.files import field_rows

#: {judgement group: {query id: {doc id: grade}}}
GroupQrels = dict[str, dict[str, dict[str, int]]]


def read_qrels_jg(path: str | Path) -> GroupQrels:
    """Read a judgement-group qrels file (see the module docstring)."""
    p = Path(path)
    out: GroupQrels = {}
    for lineno, fields in field_rows(p, "judgement-group qrels", "query group doc grade", comments=True):
        qid, group, doc, grade = fields
        try:
            value = int(grade)
        except ValueError:
            raise InputError(f"grade must be an integer, got {grade!r}", path=p, line=lineno) from None
        judged = out.setdefault(group, {}).setdefault(qid, {})
        if doc in judged:
            raise InputError(f"query {qid!r} group {group!r} judges {doc!r} twice", path=p, line=lineno)
        judged[doc] = value
    return out
