"""ir_measures' parameterised spellings (the ones its own unit tests use: `cutoff=N`, `IPrec(rel=2,recall=0.4)`,
`NumRet(rel=2)`, the set measures with `rel=` and `beta=`, `nDCG(gains={...})`) name the measure ir_measures
computes: each equals ir_measures' own value (its pytrec_eval, gdeval or judged provider) per query, to 1e-9
(gdeval prints 5 decimals: 5e-6), on random graded qrels with ties broken the same way on both sides.
The diversity and NERR names are checked in test_diversity_ndeval.py and test_ir_measures_families.py."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings

from retbench.data import Qrels, Run
from retbench.errors import ConfigError
from retbench.evaluation import evaluate
from retbench.metrics.registry import parse_metric
from trec_oracle import qrels_and_run

ir_measures = pytest.importorskip("ir_measures")

SPELLINGS = [
    'nDCG(dcg="exp-log2", cutoff=20)@10',
    'nDCG(dcg="exp-log2", cutoff=20)',
    "IPrec(rel=2)@0.2",
    "IPrec(rel=2, recall=0.4)@0.2",
    "IPrec(rel=2, recall=0.4)",
    "Judged(cutoff=10)",
    "NumRet(rel=2)",
    "NumRet(rel=3)",
    "SetF(rel=1, beta=0.5)",
    "SetF(beta=2.4)",
    "SetP(rel=2)",
    "SetR(rel=2)",
    "SetAP(rel=2)",
    "SetRelP(rel=2)",
    "nDCG(gains={0:1,1:4})",
    "nDCG(gains={1: 2, 0: 1})",
]


def _safe(qrels):
    """pytrec_eval 0.5.x can hang on a query whose grades are all <= 0 with a negative one (see trec_oracle)."""
    return {
        q: (j if any(g > 0 for g in j.values()) else {d: max(g, 0) for d, g in j.items()}) for q, j in qrels.items()
    }


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=qrels_and_run())
def test_each_spelling_equals_ir_measures_value(data):
    qrels, run = data
    ids = {q: str(i + 1) for i, q in enumerate(sorted({*qrels, *run}))}  # gdeval.pl takes numeric query ids
    qrels, run = _safe({ids[q]: j for q, j in qrels.items()}), {ids[q]: r for q, r in run.items()}
    ranked = Run.from_dict(run)
    distinct = {q: {d: float(100 - i) for i, d in enumerate(ranked.docs(q))} for q in ranked.query_ids}
    distinct = {q: r for q, r in distinct.items() if r}  # an empty ranking: pytrec_eval reads unset memory
    names = [s.replace(" ", "") for s in SPELLINGS]
    ev = evaluate(Run.from_dict(distinct), Qrels(qrels), names, no_relevant="zero", recall_rounding="floor_plus_0.9")
    for spelling, name in zip(SPELLINGS, names, strict=True):
        ours = dict(zip(ev.query_ids, ev.column(parse_metric(name).name).tolist(), strict=True))
        theirs = {
            m.query_id: m.value for m in ir_measures.iter_calc([ir_measures.parse_measure(spelling)], qrels, distinct)
        }
        tolerance = 5e-6 if "exp-log2" in spelling else 1e-9
        for qid, value in theirs.items():
            if qid in ours:
                assert ours[qid] == pytest.approx(value, abs=tolerance), (spelling, qid)


@pytest.mark.parametrize(
    ("spelling", "words"),
    [("P(judged_only=True)@4", "-J"), ("nDCG(gains={0:1,1:2})@5", "uncut nDCG"), ("IPrec(rel=2)", "recall level")],
)
def test_spellings_retbench_cannot_follow_say_why(spelling, words):
    with pytest.raises(ConfigError, match=words):
        parse_metric(spelling)
