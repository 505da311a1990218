"""`--mode pytrec_eval` gives pytrec_eval's numbers averaged as BEIR averages them, by default: a judged query
with no relevant document is returned by pytrec_eval (zeros) and counted in BEIR's mean, so the mode counts it
too unless told otherwise. One default per mode, the same for `evaluate`, `retbench eval` and a config.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from typer.testing import CliRunner

from retbench.cli import app
from retbench.config.common import EvalBlock
from retbench.data import Qrels, Run
from retbench.evaluation import evaluate
from trec_oracle import ORACLE, PAIRS, qrels_and_run

QRELS = {"q1": {"a": 1, "b": 0}, "q2": {"c": 2, "d": 1}, "q3": {"e": 0, "f": 0}}  # q3: nothing relevant
RUN = {"q1": {"b": 3.0, "a": 2.0}, "q2": {"x": 4.0, "d": 3.0, "c": 1.0}, "q3": {"e": 2.0, "y": 1.0}}


def _beir_mean(qrels: dict, run: dict, trec_name: str) -> float:
    """BEIR's EvaluateRetrieval.evaluate: pytrec_eval per query, summed and divided by the queries it returned."""
    theirs = ORACLE(qrels, run)
    return float(np.mean([v[trec_name] for v in theirs.values()]))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=qrels_and_run())
def test_pytrec_eval_mode_by_default_averages_like_beir_over_queries_with_no_relevant_document(data):
    qrels, run = data
    theirs = ORACLE(qrels, run)
    ev = evaluate(Run.from_dict(run), Qrels(qrels), [name for _, name in PAIRS], mode="pytrec_eval")
    assert sorted(ev.query_ids) == sorted(theirs) and not ev.skipped
    for trec_name, name in PAIRS:
        if theirs:
            assert ev.mean(name) == pytest.approx(_beir_mean(qrels, run, trec_name), abs=1e-9), name


def test_the_trec_eval_mode_still_skips_them_by_default_and_says_so():
    ev = evaluate(Run.from_dict(RUN), Qrels(QRELS), ["ndcg@10"])
    assert ev.skipped == ["q3"] and ev.no_relevant == "skip"
    assert evaluate(Run.from_dict(RUN), Qrels(QRELS), ["ndcg@10"], mode="pytrec_eval").no_relevant == "zero"


def test_eval_and_a_config_take_the_same_default_per_mode(tmp_path: Path):
    (tmp_path / "qrels.txt").write_text(
        "".join(f"{q} 0 {d} {g}\n" for q, docs in QRELS.items() for d, g in docs.items())
    )
    lines = [f"{q} Q0 {d} {r + 1} {s} sys\n" for q, docs in RUN.items() for r, (d, s) in enumerate(docs.items())]
    (tmp_path / "run.txt").write_text("".join(lines))
    args = ["eval", str(tmp_path / "qrels.txt"), str(tmp_path / "run.txt"), "-m", "ndcg@10", "-f", "json"]
    for mode, policy in (("pytrec_eval", "zero"), ("trec_eval", "skip")):
        res = CliRunner().invoke(app, [*args, "--mode", mode])
        assert res.exit_code == 0, res.output
        out = json.loads(res.stdout)
        assert out["no_relevant"] == policy == EvalBlock.from_config({"mode": mode}).no_relevant_policy
        if mode == "pytrec_eval":
            assert out["metrics"]["ndcg@10"]["mean"] == pytest.approx(_beir_mean(QRELS, RUN, "ndcg_cut_10"), abs=1e-9)
            assert out["n_queries"] == 3
    explicit = EvalBlock.from_config({"mode": "pytrec_eval", "no_relevant": "skip"})
    assert explicit.no_relevant_policy == "skip" and explicit.to_dict()["no_relevant"] == "skip"


def test_trec_eval_counts_a_query_with_no_relevant_document_and_the_caveat_line_says_so():
    from retbench.report.weakening import caveat_lines
    from retbench.results.caveats import Caveat

    theirs = ORACLE(QRELS, RUN)
    assert "q3" in theirs and theirs["q3"]["ndcg_cut_10"] == 0.0  # trec_eval evaluates it: counted, as 0
    ev = evaluate(Run.from_dict(RUN), Qrels(QRELS), ["ndcg@10"])
    line = " ".join(caveat_lines([Caveat("sys", {"skipped_no_relevant": len(ev.skipped), "scored": 2})], ["ndcg@10"]))
    assert "left out of every mean (retbench's default in trec_eval mode; trec_eval itself counts it" in line
    assert "trec_eval's rule" not in line
