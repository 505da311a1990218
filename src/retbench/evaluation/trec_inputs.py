"""trec_eval's other inputs for `retbench eval`: judgements in another format (-R) and z-scores (-Z).

One call each, so the command line and Python callers share the flow: `other_format` reads a run and judgements
in one of trec_eval's other relevance formats and scores the measures made for them; `zscored` turns an
evaluation's values into z-scores from a file (evaluation/zscores.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from retbench.errors import ConfigError
from retbench.evaluation.judgement_groups import evaluate_groups, wants_runid
from retbench.evaluation.table import Evaluation
from retbench.evaluation.zscores import standardise
from retbench.io.qrels_jg import read_qrels_jg
from retbench.io.trec import read_run
from retbench.io.zscores import read_zscores

#: trec_eval's relevance formats (-R) beside plain qrels that retbench reads
FORMATS = ("qrels_jg",)


def other_format(
    kind: str, qrels: str | Path, run: str | Path, names: Sequence[str], **settings: object
) -> tuple[Evaluation, bool]:
    """The run at `run` scored against judgements of format `kind` at `qrels` (trec_eval -R kind), and whether
    trec_eval prints the `runid` line for `names` (no names: the format's nickname, as trec_eval's default)."""
    if kind not in FORMATS:
        raise ConfigError(
            f"relevance format must be qrels or one of {', '.join(FORMATS)}, got {kind!r}", field="relevance_format"
        )
    names = list(names) or [kind]
    ev = evaluate_groups(read_run(run), read_qrels_jg(qrels), names, **settings)
    return ev, wants_runid(names)


def zscored(
    ev: Evaluation, path: str | Path | None, printed: Sequence[str | None], complete: bool
) -> tuple[Evaluation, dict[str, float] | None]:
    """`ev` as z-scores from the file at `path` (trec_eval -Z; `printed`: each metric's trec_eval name), or `ev`
    itself without one; and the `all` values that are no aggregate of the z-scores: with -c, trec_eval's num_rel
    line counts the qrels' relevant documents."""
    if path is None:
        return ev, None
    totals = {m: ev.mean(m) for m in ev.metrics if m == "num_rel"} if complete else None
    return standardise(ev, read_zscores(path), printed), totals
