"""trec_eval's preference judgements (`-R prefs`, `-R qrels_prefs`).

`prefs` lines are `query group subgroup doc level`: within one judgement subgroup a document with a higher level
is preferred to one with a lower level (levels only rank; 0 means "not relevant", by convention); the subgroups
of one judgement group (one person's judgements) together give that person's partial order; different groups
(people) may disagree. `qrels_prefs` reads a TREC qrels file as preferences: `query group doc grade`, the qrels'
second column naming the group and one subgroup per group (trec_eval's `get_qrels_prefs.c`).

Blank lines and comment lines (first non-blank character `#`, as trec_eval 10.0 skips them) are skipped; a `#`
inside a field is data. A line with the wrong number of fields, a level that is not a number, or a document
given twice in one subgroup is an error naming the file and line.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from retbench.errors import InputError


@dataclass(frozen=True)
class Preference:
    """One judgement line: `doc` has `level` in subgroup `subgroup` of group `group`."""

    group: str
    subgroup: str
    doc: str
    level: float


#: {query id: its judgement lines, in file order}
Prefs = dict[str, list[Preference]]


def read_prefs(path: str | Path, *, qrels: bool = False) -> Prefs:
    """Read a preferences file (`qrels=True`: a TREC qrels file read as preferences); see the module docstring."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"cannot read preferences: {exc}", path=p) from None
    width, layout = (4, "query group doc level") if qrels else (5, "query group subgroup doc level")
    out: Prefs = {}
    seen: set[tuple[str, str, str, str]] = set()
    for lineno, line in enumerate(text.splitlines(), 1):
        fields = line.split()
        if not fields or fields[0].startswith("#"):
            continue
        if len(fields) != width:
            raise InputError(f"expected {width} fields ({layout}), got {len(fields)}", path=p, line=lineno)
        qid, group, *sub, doc, level = fields
        subgroup = sub[0] if sub else "0"
        try:
            value = float(level)
        except ValueError:
            raise InputError(f"level must be a number, got {level!r}", path=p, line=lineno) from None
        key = (qid, group, subgroup, doc)
        if key in seen:
            raise InputError(f"query {qid!r} group {group!r} gives {doc!r} twice", path=p, line=lineno)
        seen.add(key)
        out.setdefault(qid, []).append(Preference(group, subgroup, doc, value))
    return out
