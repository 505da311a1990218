"""`retbench eval`: trec_eval-like scoring of TREC runs, BEIR qrels and golden sets from the command line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from typer.testing import CliRunner

from repo_paths import METRIC_PLUGIN as PLUGIN_DIR
from repo_paths import ROOT
from retbench.cli import app

runner = CliRunner()


@pytest.fixture(scope="module")
def scifact_run(tmp_path_factory, scifact) -> tuple[Path, dict]:
    """A real run over SciFact's test queries: each query ranks its relevant docs among unrelated ones."""
    qrels = scifact.split("test")
    ids = scifact.corpus.ids
    run: dict[str, dict[str, float]] = {}
    for i, (q, docs) in enumerate(qrels.items()):
        ranked = [ids[(i * 7 + j) % len(ids)] for j in range(8)]
        for j, d in enumerate(docs):
            ranked.insert((i + j) % 5, d)  # relevant docs land at ranks 1-5
        run[q] = {d: float(20 - r) for r, d in enumerate(dict.fromkeys(ranked))}
    path = tmp_path_factory.mktemp("scifact") / "run.trec"
    with open(path, "w") as fh:
        for q, docs in run.items():
            fh.writelines(f"{q} Q0 {d} {r} {s} sys\n" for r, (d, s) in enumerate(docs.items(), 1))
    return path, run


def test_trec_format_matches_trec_eval_line_for_line(scifact_path, scifact, scifact_run):
    import pytrec_eval

    path, run = scifact_run
    qrels_file = scifact_path / "qrels" / "test.tsv"
    res = runner.invoke(
        app,
        [
            "eval",
            str(qrels_file),
            str(path),
            "-m",
            "ndcg_cut.10",
            "-m",
            "P.5,10",
            "-m",
            "recip_rank",
            "--format",
            "trec",
            "-q",
        ],
    )
    assert res.exit_code == 0, res.output
    lines = [line for line in res.stdout.splitlines() if line]
    judged = scifact.split("test").to_dict()
    theirs = pytrec_eval.RelevanceEvaluator(judged, {"ndcg_cut", "P", "recip_rank"}).evaluate(run)
    expected = []
    names = ["recip_rank", "P_5", "P_10", "ndcg_cut_10"]  # trec_eval's own measure order
    for q in sorted(theirs):
        expected += [f"{m:<22}\t{q}\t{theirs[q][m]:6.4f}" for m in names]
    expected += [f"{m:<22}\tall\t{sum(v[m] for v in theirs.values()) / len(theirs):6.4f}" for m in names]
    assert lines == expected


def test_table_and_json_output_label_the_counting_mode(scifact_path, scifact_run, tmp_path):
    path, _ = scifact_run
    res = runner.invoke(
        app,
        [
            "eval",
            str(scifact_path),
            str(path),
            "--split",
            "test",
            "-m",
            "ndcg@10",
            "--format",
            "json",
            "--mode",
            "pytrec_eval",
            "--tsv",
            str(tmp_path / "pq.tsv"),
        ],
    )
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert out["mode"] == "pytrec_eval" and "answered queries only" in out["mode_label"]
    assert out["n_queries"] == 300 and out["status"]["ok"] == 300
    m = out["metrics"]["ndcg@10"]
    assert m["ci_low"] <= m["mean"] <= m["ci_high"] and m["n"] == 300
    assert (tmp_path / "pq.tsv").read_text().count(
        "\n"
    ) == 300 + 1 + 14  # rows, header, '#' lines (one per Evaluation._HEADER_KEYS, plus the title)
    table = runner.invoke(app, ["eval", str(scifact_path / "qrels" / "test.tsv"), str(path), "-m", "mrr"])
    assert "trec_eval" in table.stdout and "mrr" in table.stdout


def test_missing_queries_are_counted_and_reported(tmp_path):
    (tmp_path / "q.txt").write_text("q1 0 a 1\nq2 0 b 1\n")
    (tmp_path / "r.txt").write_text("q1 Q0 a 1 2.0 sys\n")
    res = runner.invoke(
        app, ["eval", str(tmp_path / "q.txt"), str(tmp_path / "r.txt"), "-m", "mrr", "--format", "trec"]
    )
    assert res.exit_code == 0
    assert res.stdout.splitlines() == [f"{'recip_rank':<22}\tall\t0.5000"]
    assert "1 missing" in res.stderr


def test_golden_set_with_system_outputs(tmp_path):
    (tmp_path / "golden.yaml").write_text(
        """samples:
  - id: q-1
    input: {question: "What is our refund window?"}
    expected_output: ["doc-3", "doc-9"]
    metadata: {k: 5, tags: [billing], category: factual, answer: "30 days"}
  - id: q-2
    input: {question: "Who approves refunds?"}
    expected_output: {"doc-4": 2, "doc-5": 1}
    metadata: {tags: [billing], category: multi_hop, answer: "the finance team",
               required_support_groups: [["doc-4"], ["doc-5"]]}
"""
    )
    outputs = [
        {
            "id": "q-1",
            "retrieved": [
                {"id": "doc-7", "text": "x"},
                {"id": "doc-3", "text": "Refunds within 30\n days."},
                {"id": "doc-1", "text": "y"},
                {"id": "doc-9", "text": "z"},
                {"id": "doc-2", "text": "w"},
            ],
        },
        {
            "id": "q-2",
            "retrieved": [{"id": "doc-4", "text": "The Finance Team approves."}, {"id": "doc-8", "text": "v"}],
        },
    ]
    (tmp_path / "out.jsonl").write_text("\n".join(json.dumps(o) for o in outputs) + "\n")
    res = runner.invoke(
        app,
        [
            "eval",
            str(tmp_path / "golden.yaml"),
            str(tmp_path / "out.jsonl"),
            "--format",
            "json",
            "--default-k",
            "2",
            "-m",
            "retrieval-hit-at-k",
            "-m",
            "retrieval-recall-at-k",
            "-m",
            "retrieval-mrr",
            "-m",
            "answer-containment-at-k",
            "-m",
            "recall_all@2",
        ],
    )
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    per_q = {m: v["mean"] for m, v in out["metrics"].items()}
    # q-1 uses its own k = 5 (seed 001's worked example); q-2 the default k = 2
    assert per_q["hit@2"] == 1.0 and per_q["recall@2"] == pytest.approx((1.0 + 0.5) / 2)
    assert per_q["mrr"] == pytest.approx((0.5 + 1.0) / 2)
    assert per_q["containment@2"] == 1.0
    assert per_q["recall_all@2"] == pytest.approx((1.0 + 0.0) / 2)
    assert out["breakdown"]["category:multi_hop"]["recall_all@2"] == 0.0
    assert out["group_sizes"]["billing"] == 2


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["-m", "ndgc@10"], "unknown metric 'ndgc@10'; valid names:"),
        (["--format", "xml"], "--format must be"),
        (["--mode", "ranx"], "unknown mode"),
        (["--relevance-level", "-1"], "relevance level"),
    ],
)
def test_usage_errors_exit_2_with_one_message(tmp_path, args, message):
    (tmp_path / "q.txt").write_text("q1 0 a 1\n")
    (tmp_path / "r.txt").write_text("q1 Q0 a 1 2.0 sys\n")
    res = runner.invoke(app, ["eval", str(tmp_path / "q.txt"), str(tmp_path / "r.txt"), *args])
    assert res.exit_code == 2
    assert message in res.stderr and "Traceback" not in res.output


def test_bad_run_file_names_file_and_line(tmp_path):
    (tmp_path / "q.txt").write_text("q1 0 a 1\n")
    (tmp_path / "r.txt").write_text("q1 Q0 a 1 2.0 sys\nq1 Q0 b 2 high sys\n")
    res = runner.invoke(app, ["eval", str(tmp_path / "q.txt"), str(tmp_path / "r.txt")])
    assert res.exit_code == 2
    assert f"{tmp_path / 'r.txt'}:2" in res.stderr and "score must be a number" in res.stderr


def test_plugin_metric_appears_in_eval_like_a_builtin(tmp_path):
    (tmp_path / "q.txt").write_text("q1 0 a 1\nq1 0 c 0\n")
    (tmp_path / "r.txt").write_text("q1 Q0 a 1 4.0 sys\nq1 Q0 b 2 3.0 sys\nq1 Q0 c 3 2.0 sys\nq1 Q0 d 4 1.0 sys\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(PLUGIN_DIR), os.environ.get("PYTHONPATH", "")])}
    cmd = [
        str(Path(sys.executable).parent / "retbench"),
        "eval",
        str(tmp_path / "q.txt"),
        str(tmp_path / "r.txt"),
        "--format",
        "trec",
    ]
    ok = subprocess.run([*cmd, "-m", "labelled@4", "-m", "P@4"], capture_output=True, text=True, env=env, cwd=ROOT)
    assert ok.returncode == 0, ok.stderr
    assert ok.stdout.splitlines() == [f"{'P_4':<22}\tall\t0.2500", f"{'labelled@4':<22}\tall\t0.5000"]
    bad = subprocess.run([*cmd, "-m", "nope"], capture_output=True, text=True, env=env, cwd=ROOT)
    assert bad.returncode == 2 and "labelled@k" in bad.stderr  # listed among the valid names


def test_a_run_file_with_an_infinite_score_exits_2_with_one_line_every_time(tmp_path):
    """The error path right after Arrow read the file: a read left running on Arrow's IO threads when the
    process exited once aborted it (exit 134, "terminate called without an active exception") in about 1 of 16
    runs. 40 fresh processes: a 1-in-16 abort survives them with probability (15/16)^40, under 8%. Two run at a
    time (each is one process with its own exit, as before; a busier machine only makes the race likelier)."""
    (tmp_path / "q.txt").write_text("".join(f"q{i} 0 d{i} 1\n" for i in range(2000)))
    lines = ["q0 Q0 d0 1 inf sys\n"] + [
        f"q{i} Q0 d{j} {j + 1} {100 - j}.5 sys\n" for i in range(2000) for j in range(50)
    ]
    (tmp_path / "r.txt").write_text("".join(lines))  # several MB: more than one of Arrow's read blocks
    cmd = [sys.executable, "-m", "retbench.cli", "eval", str(tmp_path / "q.txt"), str(tmp_path / "r.txt")]

    def once(_: int) -> tuple[int, str]:
        done = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, timeout=120)
        return done.returncode, done.stderr.strip()

    with ThreadPoolExecutor(max_workers=2) as pool:
        outcomes = list(pool.map(once, range(40)))
    assert {rc for rc, _ in outcomes} == {2}, [o for o in outcomes if o[0] != 2][:3]
    assert all(
        err == f"error: {tmp_path / 'r.txt'}:1: field 'score': score must be finite, got 'inf'" for _, err in outcomes
    )
