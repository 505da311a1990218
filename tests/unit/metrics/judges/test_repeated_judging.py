"""Repeated evaluation: a run judged by the same Qrels again reuses its judged gains, and nothing else does."""

from __future__ import annotations

import numpy as np
import pytest

from retbench.data import Qrels, Run
from retbench.evaluation import evaluate
from retbench.metrics.judges.qrels import judge_qrels

METRICS = ["ndcg@10", "map", "mrr", "recall@100", "P@5"]


def _inputs(seed: int = 0) -> tuple[dict[str, dict[str, float]], dict[str, dict[str, int]]]:
    rng = np.random.default_rng(seed)
    run = {f"q{q}": {f"d{int(d)}": float(rng.integers(0, 8)) for d in rng.integers(0, 300, 40)} for q in range(60)}
    qrels = {q: {d: int(rng.integers(0, 3)) for d in list(docs)[::5]} | {"unranked": 1} for q, docs in run.items()}
    return run, qrels


def test_the_same_run_and_qrels_are_judged_once_and_score_the_same_every_time():
    run_d, qrels_d = _inputs()
    run, qrels = Run.from_dict(run_d), Qrels(qrels_d)
    first = judge_qrels(run, qrels)
    assert judge_qrels(run, qrels) is first  # the second judging is no work at all
    means = [evaluate(run, qrels, METRICS).means() for _ in range(3)]
    assert means[0] == means[1] == means[2] == evaluate(Run.from_dict(run_d), Qrels(qrels_d), METRICS).means()


def test_other_qrels_a_plain_mapping_or_a_changed_run_are_judged_afresh():
    run_d, qrels_d = _inputs()
    run, qrels = Run.from_dict(run_d), Qrels(qrels_d)
    first = judge_qrels(run, qrels)
    assert judge_qrels(run, Qrels(qrels_d)) is not first  # equal judgements, another object: judged again
    # a plain mapping may change in place between evaluations: never reused
    plain = {q: dict(j) for q, j in qrels_d.items()}
    before = evaluate(run, plain, METRICS).means()
    plain["q0"] = {d: 2 for d in run_d["q0"]}  # every ranked doc of q0 relevant now
    after = evaluate(run, plain, METRICS).means()
    assert after != before and after == evaluate(Run.from_dict(run_d), Qrels(plain), METRICS).means()
    # a run whose mappings changed size since it was built is not served from before: judging it again
    # finds the change and says so, as it did before anything was reused
    judge_qrels(run, qrels)
    run_d["q1"]["new-doc"] = 100.0
    with pytest.raises(ValueError, match="changed after it was built"):
        judge_qrels(run, qrels)
