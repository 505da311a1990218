"""trec_eval 10.0's own `make quicktest` commands, run through `retbench eval --format trec`, print its expected
files byte for byte (tests/fixtures/trec_eval10: its test collection and outputs, provenance in the README there).

They cover trec_eval 10.0's recall rounding (iprec_at_recall, 11pt_avg), qrels and runs with comment lines, its
default measures, runid and relstring lines, -c, -M, -l, its measure parameters (recall levels, gain maps), z-scores
(-Z), judgement groups (-R qrels_jg) and preferences (-R prefs, -R qrels_prefs). Where a trec_eval binary is found
(`RETBENCH_TREC_EVAL`, else `trec_eval` on PATH) more commands are checked against it; without one those skip.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from typer.testing import CliRunner

from retbench.cli import app

DATA = Path(__file__).resolve().parents[2] / "fixtures" / "trec_eval10"

# (trec_eval's arguments, its expected output): every quicktest line of trec_eval 10.0's Makefile (the
# measure-parameters line is its own test below), and two -l 0 commands
QUICKTEST = [
    (["qrels.test", "results.test"], "out.test"),
    (["qrels.test.with-comments", "results.test"], "out.test"),
    (["qrels.comment.test", "results.comment.test"], "out.comment.test"),
    (["-m", "all_trec", "qrels.test", "results.test"], "out.test.a"),
    (["-m", "all_trec", "-q", "qrels.test", "results.test"], "out.test.aq"),
    (["-m", "all_trec", "-q", "-c", "qrels.test", "results.trunc"], "out.test.aqc"),
    (["-m", "all_trec", "-q", "-c", "-M100", "qrels.test", "results.trunc"], "out.test.aqcM"),
    (["-m", "all_trec", "-mrelstring.20", "-q", "-l2", "qrels.rel_level", "results.test"], "out.test.aql"),
    (["-q", "-m", "all_trec", "-Z", "zscores_file", "qrels.test", "results.test"], "out.test.aqZ"),
    # beyond its Makefile: -l 0 (every judged document relevant), outputs of trec_eval 10.0 (fixtures README)
    (["-q", "-m", "all_trec", "-l0", "qrels.rel_level", "results.test"], "out.test.aql0"),
    (["-q", "-J", "-m", "official", "-l0", "qrels.test", "results.test"], "out.test.Jl0"),
    (["-m", "all_prefs", "-q", "-R", "prefs", "prefs.test", "prefs.results.test"], "out.test.prefs"),
    (["-m", "all_prefs", "-q", "-R", "prefs", "prefs.comment.test", "prefs.results.test"], "out.test.prefs"),
    (["-m", "all_prefs", "-q", "-R", "qrels_prefs", "qrels.test", "results.test"], "out.test.qrels_prefs"),
    (["-m", "qrels_jg", "-q", "-R", "qrels_jg", "qrels.123", "results.test"], "out.test.qrels_jg"),
    (["-m", "qrels_jg", "-q", "-R", "qrels_jg", "qrels.comments.123", "results.test"], "out.test.qrels_jg"),
]


def _files(args: list[str]) -> list[str]:
    return [str(DATA / a) if (DATA / a).is_file() else a for a in args]


def _retbench(args: list[str]) -> str:
    res = CliRunner().invoke(app, ["eval", *_files(args), "--format", "trec"])
    assert res.exit_code == 0, res.output
    return res.stdout


@pytest.mark.parametrize(("args", "expected"), QUICKTEST, ids=[" ".join(a) for a, _ in QUICKTEST])
def test_trec_eval_10_quicktest_commands_print_its_expected_files(args, expected):
    assert _retbench(args) == (DATA / expected).read_text()


def _binary() -> str | None:
    return os.environ.get("RETBENCH_TREC_EVAL") or shutil.which("trec_eval")


BEYOND = [
    ["-q", "-m", "iprec_at_recall..05,.15,.33,.35,.45,.66", "-m", "11pt_avg", "qrels.test", "results.test"],
    ["-q", "-m", "official", "-J", "-l2", "qrels.rel_level", "results.test"],
    # (trec_eval -c gives an unanswered query `relstring_N` of its placeholder document, '-'; retbench gives '')
    ["-q", "-c", "-m", "relstring", "-m", "runid", "-m", "P.5", "qrels.rel_level", "results.trunc"],
    ["-q", "-J", "-m", "relstring.3", "-m", "P.5", "qrels.rel_level", "results.test"],
    # z-scores with an unanswered query (-c: num_rel's `all` line is the qrels' count, not a sum of z-scores)
    ["-q", "-c", "-m", "all_trec", "-Z", "zscores_file", "qrels.test", "results.trunc"],
    # preferences cut by -M (ties: doc id ascending there), and with an unanswered query (-c)
    ["-q", "-m", "all_prefs", "-M", "3", "-R", "prefs", "prefs.test", "prefs.results.test"],
    ["-q", "-m", "prefs", "-M", "30", "-R", "qrels_prefs", "qrels.rel_level", "results.test"],
    ["-c", "-q", "-m", "all_prefs", "-R", "qrels_prefs", "qrels.test", "results.trunc"],
    # -l 0 with rbp and graded measures beside the binary ones
    [
        "-q",
        "-m",
        "official",
        "-m",
        "ndcg",
        "-m",
        "Rndcg",
        "-m",
        "rbp",
        "-m",
        "G",
        "-l0",
        "qrels.rel_level",
        "results.test",
    ],
    # judgement groups with -J, -l, -M and parameters
    [
        "-q",
        "-J",
        "-l2",
        "-M",
        "50",
        "-R",
        "qrels_jg",
        "-m",
        "P_avgjg.3,7",
        "-m",
        "Rprec_mult_avgjg.0.5",
        "qrels.123",
        "results.test",
    ],
    # gain maps with fractional gains, level 0 given a gain, gains less than 1 apart (trec_eval's order of levels)
    [
        "-q",
        "-l2",
        "-m",
        "G.0=2,1=0.5",
        "-m",
        "ndcg.1=1.5,2=1",
        "-m",
        "Rndcg.0=1,1=2,2=3",
        "qrels.rel_level",
        "results.test",
    ],
    [
        "-q",
        "-J",
        "-m",
        "ndcg_rel.1=3,2=9",
        "-m",
        "ndcg.0=1",
        "-m",
        "11pt_avg.0,.33,.5",
        "qrels.rel_level",
        "results.test",
    ],
]


@pytest.mark.skipif(_binary() is None, reason="no trec_eval binary (RETBENCH_TREC_EVAL or trec_eval on PATH)")
@pytest.mark.parametrize("args", BEYOND, ids=[" ".join(a) for a in BEYOND])
def test_more_commands_print_what_the_trec_eval_binary_prints(args):
    want = subprocess.run([str(_binary()), *_files(args)], capture_output=True, text=True, check=True).stdout
    assert _retbench(args) == want


@pytest.mark.parametrize("fmt", ["trec", "json"])
def test_a_measure_that_cannot_be_read_is_named_and_the_others_still_print(fmt):
    args = ["eval", *_files(["qrels.test", "results.test"]), "--format", fmt]
    res = CliRunner().invoke(app, [*args, "-m", "P.5", "-m", "no_such_measure", "-m", "map", "-m", "ndcg_cut.x"])
    assert res.exit_code == 2
    assert "-m no_such_measure" in res.stderr and "-m ndcg_cut.x" in res.stderr
    expected = [
        line for line in (DATA / "out.test").read_text().splitlines() if line.split("\t")[0].strip() in {"map", "P_5"}
    ]
    if fmt == "trec":
        assert res.stdout.splitlines() == expected  # trec_eval's own map and P_5 lines, in its order
    else:
        import json

        means = {m: a["mean"] for m, a in json.loads(res.stdout)["metrics"].items()}
        assert [f"{means[m]:.4f}" for m in ("map", "P@5")] == [line.split("\t")[2] for line in expected]


def test_the_measure_parameters_command_prints_its_expected_file():
    # trec_eval's quicktest line: custom recall levels of 11pt_avg, a gain map, non-integer cutoff `23.4` read as 23
    measures = ["iprec_at_recall..10,.20,.25,.75,.50", "P.5,7,3", "recall.20,2000", "Rprec_mult.5.0,0.2,0.35"]
    measures += ["utility.2,-1,0,0", "11pt_avg..25,.5,.75", "ndcg.1=3,2=9,4=4.5", "ndcg_cut.10,20,23.4"]
    measures += ["success.2,5,20"]
    got = _retbench(["-q", *(x for m in measures for x in ("-m", m)), "qrels.test", "results.test"])
    assert got == (DATA / "out.test.meas_params").read_text()
