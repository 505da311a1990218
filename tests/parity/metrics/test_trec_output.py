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
    res = CliRunner().invoke(app, ["eval", *args, "-m", "all_trec", "-q", "-c", "--format", "trec"])
    assert res.exit_code == 0, res.output
    out = [line.split("\t") for line in res.stdout.splitlines() if line and not line.startswith("#")]
    return [(m.rstrip(), q, v) for m, q, v in out]


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
