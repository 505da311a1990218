"""trec_eval's z-scores file (`trec_eval -Z FILE`): `query measure mean stddev` per line, whitespace-separated.

Each line gives, for one query and one measure as trec_eval prints it (`map`, `P_10`, `iprec_at_recall_0.10`),
the mean and standard deviation of that measure over a reference set of runs; `retbench eval -Z FILE` then
prints each value as (value - mean) / stddev (evaluation/zscores.py). Blank lines are skipped; a line that is
not four fields with two numbers, or a (query, measure) given twice, is an error naming the file and line.
"""

from __future__ import annotations

from pathlib import Path

from retbench.errors import InputError
from retbench.io.files import field_rows

#: {query id: {measure name as trec_eval prints it: (mean, standard deviation)}}
ZScores = dict[str, dict[str, tuple[float, float]]]


def read_zscores(path: str | Path) -> ZScores:
    """Read a z-scores file (see the module docstring)."""
    p = Path(path)
    out: ZScores = {}
    for lineno, fields in field_rows(p, "the z-scores file", "query measure mean stddev"):
        qid, measure, mean, stddev = fields
        try:
            pair = (float(mean), float(stddev))
        except ValueError:
            raise InputError(f"mean and stddev must be numbers, got {mean!r} {stddev!r}", path=p, line=lineno) from None
        if measure in out.setdefault(qid, {}):
            raise InputError(f"query {qid!r} measure {measure!r} is given twice", path=p, line=lineno)
        out[qid][measure] = pair
    return out
