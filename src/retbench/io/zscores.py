"""trec_eval's z-scores file (`trec_eval -Z FILE`): `query measure mean stddev` per line, whitespace-separated.

Each line gives, for one query and one measure as trec_eval prints it (`map`, `P_10`, `iprec_at_recall_0.10`),
the mean and standard deviation of that measure over a reference set of runs; `retbench eval -Z FILE` then
prints each value as (value - mean) / stddev (evaluation/zscores.py). Blank lines are skipped; a line that is
not four fields with two numbers, or a (query, measure) given twice, is an error naming the file and line.
"""

from __future__ import annotations

from pathlib import Path

from retbench.errors import InputError

#: {query id: {measure name as trec_eval prints it: (mean, standard deviation)}}
ZScores = dict[str, dict[str, tuple[float, float]]]


def read_zscores(path: str | Path) -> ZScores:
    """Read a z-scores file (see the module docstring)."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"cannot read the z-scores file: {exc}", path=p) from None
    out: ZScores = {}
    for lineno, line in enumerate(text.splitlines(), 1):
        fields = line.split()
        if not fields:
            continue
        if len(fields) != 4:
            raise InputError(f"expected 4 fields (query measure mean stddev), got {len(fields)}", path=p, line=lineno)
        qid, measure, mean, stddev = fields
        try:
            pair = (float(mean), float(stddev))
        except ValueError:
            raise InputError(f"mean and stddev must be numbers, got {mean!r} {stddev!r}", path=p, line=lineno) from None
        if measure in out.setdefault(qid, {}):
            raise InputError(f"query {qid!r} measure {measure!r} is given twice", path=p, line=lineno)
        out[qid][measure] = pair
    return out
