"""Every parameterised measure carries the name trec_eval prints for it: the cut families' names equal pytrec_eval's
keys (trec_eval's C code names them), and a one-value family with parameters is `FAMILY_` plus the parameters as
typed (trec_eval 10 meas_init.c: `append_string(name, printable_params)`), which `--format trec` prints."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from retbench.cli import app
from retbench.metrics.registry import parse_metric, parse_metrics

QRELS = {"q1": {"d1": 1, "d2": 0, "d3": 2, "d4": 1}, "q2": {"d4": 1, "d5": 0}}
RUN = {"q1": {"d1": 3.0, "d2": 2.0, "d5": 1.0, "d3": 0.5}, "q2": {"d9": 1.0, "d5": 0.5, "d4": 0.2}}


@pytest.mark.parametrize(
    "measure",
    ["P.7", "recall.7", "ndcg_cut.7", "map_cut.7", "success.3", "relative_P.7", "iprec_at_recall.0.15",
     "Rprec_mult.0.5", "P.5,12", "ndcg_cut.3,25"],
)  # fmt: skip
def test_a_cut_or_point_measure_is_named_as_pytrec_eval_keys_it(measure):
    import pytrec_eval

    keys = set(next(iter(pytrec_eval.RelevanceEvaluator(QRELS, {measure}).evaluate(RUN).values())))
    ours = {s.trec_name for s in parse_metrics([measure])}
    assert ours == keys


@pytest.mark.parametrize(
    ("measure", "printed"),
    [
        ("set_F.0.5", "set_F_0.5"),
        ("set_F(beta=0.25)", "set_F_0.25"),
        ("utility.2,-1,0,0", "utility_2,-1,0,0"),
        ("rbp.p=0.5", "rbp_p=0.5"),
        ("RBP(p=0.8)", "rbp_p=0.8"),
        ("rbp_resid.p=0.7", "rbp_resid_p=0.7"),
    ],
)
def test_a_one_value_measure_with_parameters_is_named_with_them(measure, printed, tmp_path):
    assert parse_metric(measure).trec_name == printed
    (tmp_path / "qrels").write_text("".join(f"{q} 0 {d} {g}\n" for q, j in QRELS.items() for d, g in j.items()))
    lines = [f"{q} Q0 {d} {r} {s} x\n" for q, docs in RUN.items() for r, (d, s) in enumerate(docs.items(), 1)]
    (tmp_path / "run").write_text("".join(lines))
    res = CliRunner().invoke(app, ["eval", str(tmp_path / "qrels"), str(tmp_path / "run"), "-m", measure, "-f", "trec"])
    assert res.exit_code == 0, res.output
    assert [line.split("\t")[0].rstrip() for line in res.stdout.splitlines()] == [printed]


def test_a_measure_at_its_own_relevance_level_has_no_trec_eval_name():
    """trec_eval has one relevance level (-l) for every measure: P@5(rel=2) is not a measure it prints."""
    assert parse_metric("P@5(rel=2)").trec_name is None
    assert parse_metric("P@5").trec_name == "P_5"
