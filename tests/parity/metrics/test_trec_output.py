"""`retbench eval -m all_trec -q -c --format trec` prints trec_eval's lines: trec_eval's measure order and
names, `%6.4f` (integers for its counts), per query in byte order then `all`, and each value what pytrec_eval
(trec_eval's C code) computes, on SciFact with a real run and with -l2, -J and -M."""

from __future__ import annotations

import math

import pytest
from typer.testing import CliRunner

from retbench.cli import app
from retbench.data import Qrels, Run
from retbench.io.trec import write_qrels, write_run
from retbench.metrics.registry import trec_order
from trec_oracle import scifact_overlap_run

SUMMARY_ONLY = {"gm_map", "gm_bpref", "num_q"}
TREC_EVAL_10 = ("unj_", "rbp")  # not in pytrec_eval (trec_eval 9)


def _lines(args: list[str]) -> list[tuple[str, str, str]]:
    # pytrec_eval is trec_eval 9: its recall rounding for iprec_at_recall and 11pt_avg (10.0's: test_trec_eval10.py)
    rounding = ["--recall-rounding", "floor_plus_0.9"]
    res = CliRunner().invoke(app, ["eval", *args, "-m", "all_trec", "-q", "-c", "--format", "trec", *rounding])
    assert res.exit_code == 0, res.output
    out = [line.split("\t") for line in res.stdout.splitlines() if line and not line.startswith("#")]
    # trec_eval's text measures (runid, relstring): pytrec_eval gives no values for them (test_trec_eval10.py)
    return [(m.rstrip(), q, v) for m, q, v in out if m.rstrip() not in ("runid", "relstring")]


@pytest.mark.parametrize("opts", [[], ["-l", "2"], ["-J"], ["-M", "20"]])
def test_trec_lines_equal_trec_eval_on_scifact(scifact, tmp_path, opts):
    import pytrec_eval

    qrels = scifact.split("test")
    # grade 2 for some judgements, so -l2 has relevant documents to count
    graded = {q: {d: (2 if g > 0 and int(d) % 3 == 0 else g) for d, g in j.items()} for q, j in qrels.to_dict().items()}
    qids = sorted(graded)[:60]
    graded = {q: graded[q] for q in qids}
    run = scifact_overlap_run(scifact, graded, depth=50)
    del run[qids[0]]  # an unanswered judged query: trec_eval -c prints it with zeros
    write_qrels(Qrels(graded), tmp_path / "qrels.txt")
    write_run(Run.from_dict(run, name="overlap"), tmp_path / "run.txt")
    lines = _lines([str(tmp_path / "qrels.txt"), str(tmp_path / "run.txt"), *opts])

    level = int(opts[1]) if opts[:1] == ["-l"] else 1
    if opts[:1] == ["-M"]:
        run = {q: dict(sorted(r.items(), key=lambda x: (x[1], x[0]), reverse=True)[:20]) for q, r in run.items()}
    theirs = pytrec_eval.RelevanceEvaluator(graded, {"all_trec"}, level, "-J" in opts).evaluate(run)

    per_query = [x for x in lines if x[1] != "all"]
    assert [q for _, q, _ in per_query] == sorted(q for _, q, _ in per_query)  # queries in byte order
    first = [m for m, q, _ in per_query if q == per_query[0][1]]
    assert first == sorted(first, key=trec_order)  # trec_eval's measure order
    assert not set(first) & SUMMARY_ONLY
    assert {q for _, q, _ in per_query} == set(graded)  # the unanswered query too
    for m, q, v in per_query:
        if m.startswith(TREC_EVAL_10):
            continue
        want = theirs[q][m] if q in theirs else (sum(g >= level for g in graded[q].values()) if m == "num_rel" else 0)
        want = 0.0 if want != want else want  # -J may leave a ranking empty: trec_eval's 0/0, retbench's 0
        if m.startswith("num_"):
            assert v == str(int(want)), (m, q)
        else:
            assert v == f"{want:6.4f}", (m, q)
    summary = {m: v for m, q, v in lines if q == "all"}
    n = len(graded)
    gm = sum(theirs[q]["gm_map"] if q in theirs else math.log(1e-5) for q in graded) / n
    assert summary["gm_map"] == f"{math.exp(gm):6.4f}"
    assert summary["num_q"] == str(n)
    assert summary["num_ret"] == str(int(sum(theirs[q]["num_ret"] for q in theirs)))


def _trec(args: list[str]) -> tuple[list[tuple[str, str, str]], str]:
    res = CliRunner().invoke(app, ["eval", *args, "-q", "--format", "trec"])
    assert res.exit_code == 0, res.output
    return [tuple(x.rstrip() for x in line.split("\t")) for line in res.stdout.splitlines()], res.stderr  # type: ignore[misc]


@pytest.mark.parametrize(
    ("measures", "printed", "abcd", "collection"),
    [
        (["utility"], "utility", (1, -1, 0, 0), None),
        (["utility", "utility.2,-1,0,0"], "utility_2,-1,0,0", (2, -1, 0, 0), None),
        (["all_trec", "utility.1,-1,0,0"], "utility_1,-1,0,0", (1, -1, 0, 0), None),
        (["utility.3,-2,-1,0", "utility", "utility.2,-1,0,0"], "utility_3,-2,-1,0", (3, -2, -1, 0), None),
        (["utility.2,-1,1,1"], "utility_2,-1,1,1", (2, -1, 1, 1), None),
        (["utility.2,-1,1,1"], "utility_2,-1,1,1", (2, -1, 1, 1), 5183),
    ],
)
def test_utility_is_one_measure_per_run_named_and_valued_as_trec_eval_prints_it(
    scifact, tmp_path, measures, printed, abcd, collection
):
    """trec_eval computes utility once: with the first `utility.a,b,c,d` given, else its defaults, and prints the
    parameters as typed whenever they were given (trec_eval.c mark_measure, meas_init.c). Each value is trec_eval's
    formula over pytrec_eval's own set counts: a nrr + b (n - nrr) + c (R - nrr) + d (N + nrr - n - R), with N the
    -N collection size and 0 without it (trec_eval's default)."""
    import pytrec_eval

    qrels = {q: j for q, j in scifact.split("test").to_dict().items()}
    qids = sorted(qrels)[:40]
    qrels = {q: qrels[q] for q in qids}
    run = scifact_overlap_run(scifact, qrels, depth=30)
    write_qrels(Qrels(qrels), tmp_path / "qrels.txt")
    write_run(Run.from_dict(run, name="overlap"), tmp_path / "run.txt")
    args = [str(tmp_path / "qrels.txt"), str(tmp_path / "run.txt"), *(x for m in measures for x in ("-m", m))]
    if collection is not None:
        args += ["-N", str(collection)]
    lines, _ = _trec(args)
    utility = [(q, v) for m, q, v in lines if m.startswith("utility")]
    assert {m for m, _, _ in lines if m.startswith("utility")} == {printed}
    assert [q for q, _ in utility] == [*sorted(qids), "all"]  # one line per query, one `all`
    counts = pytrec_eval.RelevanceEvaluator(qrels, {"num_ret", "num_rel", "num_rel_ret"}).evaluate(run)
    a, b, c, d = abcd
    n_docs = collection or 0
    want = {
        q: a * x["num_rel_ret"]
        + b * (x["num_ret"] - x["num_rel_ret"])
        + c * (x["num_rel"] - x["num_rel_ret"])
        + d * (n_docs + x["num_rel_ret"] - x["num_ret"] - x["num_rel"])
        for q, x in counts.items()
    }
    for q, v in utility[:-1]:
        assert v == f"{want[q]:6.4f}", q
    assert utility[-1][1] == f"{sum(want.values()) / len(want):6.4f}"


def test_a_second_set_of_utility_parameters_is_named_as_not_computed(scifact, tmp_path):
    qrels = {q: j for q, j in list(scifact.split("test").to_dict().items())[:5]}
    write_qrels(Qrels(qrels), tmp_path / "qrels.txt")
    write_run(Run.from_dict(scifact_overlap_run(scifact, qrels, depth=10)), tmp_path / "run.txt")
    args = [str(tmp_path / "qrels.txt"), str(tmp_path / "run.txt"), "-m", "utility.2,-1,0,0", "-m", "utility.3,-1,0,0"]
    lines, err = _trec(args)
    assert {m for m, _, _ in lines} == {"utility_2,-1,0,0"}
    assert "utility(a=3) not computed (utility.3,-1,0,0)" in err
