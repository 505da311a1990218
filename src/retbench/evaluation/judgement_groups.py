"""Measures over judgement groups (trec_eval -R qrels_jg): each group's judgements score the run on their own,
and a query's value is the mean over the groups that judged it.

As trec_eval's `m_map_avgjg.c`, `m_P_avgjg.c` and `m_Rprec_mult_avgjg.c` define them, with G_q the groups that
judged query q: map_avgjg = (1/|G_q|) sum over g of AP under g's judgements; P_avgjg_k likewise of P@k;
Rprec_mult_avgjg_x likewise of Rprec_mult(x) (precision at floor(x R_g + 0.9) documents, R_g the relevant
documents of group g). Every setting of `evaluate` (relevance level, -J, -M) applies within each group. trec_eval
computes nothing else from such qrels, so only these three families, `num_q` and `runid` (and the nickname
`qrels_jg`, all of them) are taken.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from retbench.data import Run
from retbench.errors import ConfigError
from retbench.evaluation.scoring import evaluate
from retbench.evaluation.table import Evaluation
from retbench.io.qrels_jg import GroupQrels
from retbench.metrics.trec_rows import RPREC_MULTS, TREC_CUTOFFS

#: trec_eval's judgement-group families: (the retbench metric each averages, its printed name, its defaults)
FAMILIES = {
    "map_avgjg": ("map", "map_avgjg", ()),
    "P_avgjg": ("P@{v:d}", "P_avgjg_{v:d}", TREC_CUTOFFS),
    "Rprec_mult_avgjg": ("rprec_mult(mult={v:g})", "Rprec_mult_avgjg_{v:.2f}", RPREC_MULTS),
}
NICKNAME = "qrels_jg"
#: what the nickname stands for in trec_eval's measures.c (runid: the run's tag, printed by the caller)
NICKNAME_MEMBERS = ("runid", "num_q", *FAMILIES)


def wants_runid(names: Sequence[str]) -> bool:
    """Whether trec_eval would print the `runid` line for these names."""
    return any(n.strip() in ("runid", NICKNAME) for n in names)


def measures(names: Sequence[str]) -> list[tuple[str, str]]:
    """(retbench metric, trec_eval's printed name) for each judgement-group measure named, in trec_eval's order."""
    wanted: dict[str, tuple[float, ...] | None] = {}
    for raw in names:
        name = raw.strip()
        fam, _, values = name.partition(".")
        if name in (NICKNAME, "num_q", "runid"):
            for f in NICKNAME_MEMBERS if name == NICKNAME else (name,):
                wanted.setdefault(f, None)
            continue
        if fam not in FAMILIES:
            raise ConfigError(
                f"metric {name!r}: judgement-group qrels score {', '.join(NICKNAME_MEMBERS)} (or {NICKNAME}) only",
                field="metric",
            )
        try:
            wanted[fam] = tuple(float(v) for v in values.split(",")) if values else None
        except ValueError:
            raise ConfigError(f"metric {name!r}: parameters must be numbers", field="metric") from None
    out: list[tuple[str, str]] = [("num_q", "num_q")] if "num_q" in wanted else []
    for fam, (metric, printed, defaults) in FAMILIES.items():
        if fam not in wanted:
            continue
        if not defaults:
            out.append((metric, printed))
            continue
        for v in sorted(wanted[fam] or defaults):
            v = int(v) if "{v:d}" in metric else v
            out.append((metric.format(v=v), printed.format(v=v)))
    return out


def evaluate_groups(run: Run, groups: GroupQrels, names: Sequence[str], **settings: Any) -> Evaluation:
    """The judgement-group measures `names` of `run`: one evaluation per group, averaged per query over the
    groups that judged it. The result's metrics are trec_eval's printed names (`P_avgjg_10`)."""
    if not groups:
        raise ConfigError("the judgement-group qrels hold no judgements", field="qrels")
    pairs = measures(names)
    specs = [m for m, _ in pairs]
    qids = sorted({q for judged in groups.values() for q in judged})
    total = np.zeros((len(qids), len(pairs)))
    count = np.zeros(len(qids))
    where = {q: i for i, q in enumerate(qids)}
    first: Evaluation | None = None
    statuses: dict[str, str] = {}
    for group in sorted(groups):
        ev = evaluate(run, groups[group], specs, **{**settings, "no_relevant": "zero"})
        rows = np.array([where[q] for q in ev.query_ids], dtype=np.int64)
        total[rows] += ev.values
        count[rows] += 1
        statuses.update(zip(ev.query_ids, ev.status, strict=True))
        first = first or ev
    assert first is not None
    kept = count > 0
    return Evaluation(
        system=first.system,
        metrics=[p for _, p in pairs],
        query_ids=[q for q, k in zip(qids, kept, strict=True) if k],
        values=total[kept] / count[kept, None],
        status=[statuses.get(q, "ok") for q, k in zip(qids, kept, strict=True) if k],
        mode=first.mode,
        relevance_level=first.relevance_level,
        trec_names=[p for _, p in pairs],
        judged_only=first.judged_only,
        max_docs=first.max_docs,
    )
