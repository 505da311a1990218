"""The incomplete-judgements warning measures the queries a system answered.

A failed or missing query scores 0 on judged@10 ("nothing judged") and on holes@10 ("no holes") alike, so a
mean over every counted query hides holes (1 - holes) or inflates them (judged); the share is taken over
the answered queries only. Reference: arithmetic over the files the test writes.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from retbench.evaluation import evaluate
from retbench.io.trec import read_qrels, read_run
from retbench.results.caveats import system_holes, table_means


def _files(tmp_path: Path) -> tuple[Path, Path]:
    """10 judged queries; the run answers q0 only: 4 of its top 10 judged (1 relevant), 6 unjudged."""
    qrels = tmp_path / "qrels.txt"
    lines = [f"q{i} 0 rel{i} 1" for i in range(10)]
    lines += [f"q0 0 n{j} 0" for j in range(3)]
    qrels.write_text("\n".join(lines) + "\n")
    run = tmp_path / "run.txt"
    docs = ["rel0", "n0", "u0", "n1", "u1", "u2", "n2", "u3", "u4", "u5"]
    run.write_text("".join(f"q0 Q0 {d} {r + 1} {10 - r} sys\n" for r, d in enumerate(docs)))
    return qrels, run


def test_nine_missing_queries_do_not_hide_a_mostly_unjudged_answered_one(tmp_path):
    qrels_path, run_path = _files(tmp_path)
    qrels, run = read_qrels(qrels_path), read_run(run_path)
    ev = evaluate(run, qrels, ["holes@10"])
    stored = table_means(ev, ["holes@10"])
    assert stored["holes@10"] == pytest.approx(6 / 10 / 10)  # the mean over all 10 reads as 94% judged
    for found in (system_holes("sys", stored, ev, run, qrels), system_holes("sys", stored, ev)):
        assert found is not None and found.judged == pytest.approx(4 / 10)  # the one answered query
        assert "of the answered queries" in found.sentence() and "40%" in found.sentence()


def test_judged_and_holes_give_the_same_share_and_the_residual_is_over_the_answered_queries(tmp_path):
    qrels_path, run_path = _files(tmp_path)
    qrels, run = read_qrels(qrels_path), read_run(run_path)
    both = evaluate(run, qrels, ["judged@10", "holes@10"])
    from_judged = system_holes("sys", {}, evaluate(run, qrels, ["judged@10"]))
    from_holes = system_holes("sys", {}, evaluate(run, qrels, ["holes@10"]))
    assert from_judged is not None and from_holes is not None
    assert from_judged.judged == pytest.approx(from_holes.judged) == pytest.approx(4 / 10)
    full = system_holes("sys", table_means(both, both.metrics), both, run, qrels)
    answered = qrels.subset(["q0"])
    resid_at = "rbp_resid(p=0.8)"  # the p the holes table names
    resid = table_means(evaluate(run, answered, [resid_at]), [resid_at])[resid_at]
    assert full is not None and full.values["RBP residual"] == pytest.approx(resid)
    assert resid > table_means(evaluate(run, qrels, [resid_at]), [resid_at])[resid_at]
