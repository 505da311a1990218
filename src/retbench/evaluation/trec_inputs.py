"""trec_eval's other inputs for `retbench eval`: judgements in another format (-R: judgement groups, preferences)
and z-scores (-Z).

One call each, so the command line and Python callers share the flow: `other_format` reads a run and judgements
in one of trec_eval's other relevance formats and scores the measures made for them; `zscored` turns an
evaluation's values into z-scores from a file (evaluation/zscores.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from retbench.data import Run
from retbench.errors import ConfigError
from retbench.evaluation.judgement_groups import evaluate_groups, wants_runid
from retbench.evaluation.table import Evaluation
from retbench.evaluation.zscores import standardise
from retbench.io.prefs import Prefs, read_prefs
from retbench.io.qrels_jg import read_qrels_jg
from retbench.io.trec import read_run
from retbench.io.zscores import read_zscores
from retbench.metrics.prefs import MEASURES, NICKNAMES, query_measures

#: trec_eval's relevance formats (-R) beside plain qrels that retbench reads
FORMATS = ("qrels_jg", "prefs", "qrels_prefs")


def other_format(
    kind: str, qrels: str | Path, run: str | Path, names: Sequence[str], **settings: object
) -> tuple[Evaluation, bool]:
    """The run at `run` scored against judgements of format `kind` at `qrels` (trec_eval -R kind), and whether
    trec_eval prints the `runid` line for `names` (no names: the format's nickname, as trec_eval's default)."""
    if kind not in FORMATS:
        raise ConfigError(
            f"relevance format must be qrels or one of {', '.join(FORMATS)}, got {kind!r}", field="relevance_format"
        )
    if kind == "qrels_jg":
        names = list(names) or [kind]
        return evaluate_groups(read_run(run), read_qrels_jg(qrels), names, **settings), wants_runid(names)
    names = list(names) or ["all_prefs"]
    if settings.get("judged_only") or settings.get("relevance_level", 1) != 1:
        raise ConfigError(
            f"-R {kind}: preferences have no relevance level and only judged documents count (-l, -J do not apply)",
            field="relevance_format",
        )
    prefs = read_prefs(qrels, qrels=kind == "qrels_prefs")
    depth = settings.get("max_docs")
    ev = evaluate_prefs(read_run(run), prefs, names, max_docs=None if depth is None else int(str(depth)))
    return ev, any(n.strip() == "runid" or "runid" in NICKNAMES.get(n.strip(), ()) for n in names)


def evaluate_prefs(run: Run, prefs: Prefs, names: Sequence[str], max_docs: int | None = None) -> Evaluation:
    """The preference measures `names` (metrics/prefs.py; trec_eval's `all_prefs` and `prefs` nicknames, `num_q`)
    of `run` for every query `prefs` judges; a query the run lacks is scored on an empty ranking (as trec_eval -c
    scores it on a ranking of one unjudged document)."""
    wanted: set[str] = set()
    for raw in names:
        name = raw.strip()
        members = NICKNAMES.get(name, (name,))
        unknown = [m for m in members if m not in MEASURES and m not in ("runid", "num_q")]
        if unknown:
            raise ConfigError(
                f"metric {name!r}: preferences score {', '.join(MEASURES)}, num_q and runid (or all_prefs, prefs)",
                field="metric",
            )
        wanted.update(members)
    metrics = [m for m in ("num_q", *MEASURES) if m in wanted]
    if max_docs is not None:
        run = run.truncate(int(max_docs))
    qids = sorted(prefs)
    values = np.zeros((len(qids), len(metrics)))
    for i, qid in enumerate(qids):
        got = {"num_q": 1.0, **query_measures(prefs[qid], _ranked(run, qid), qid)}
        values[i] = [got[m] for m in metrics]
    status = ["ok" if q in run else "missing" for q in qids]
    return Evaluation(run.name, metrics, qids, values, status, trec_names=list(metrics), max_docs=max_docs)


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


def _ranked(run: Run, qid: str) -> list[str]:
    """The query's documents in trec_eval's order for preferences: score descending, tied scores by doc id
    *ascending* (`form_prefs_counts.c`; its qrels measures break ties by doc id descending)."""
    pairs = run.ranking(qid) if qid in run else []
    return [d for d, _ in sorted(pairs, key=lambda p: (-p[1], p[0].encode("utf-8")))]
