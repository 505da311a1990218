"""A missing or failed answer is never a good one: it scores each metric's worst value.

Reference: arithmetic over the records the test writes (hallucination_rate is the share of unanswerable
questions answered anyway; a failed answer counts as the worst, 1.0), and trec_eval -c for retrieval
metrics (a failed query scores 0 on a higher-is-better metric, unchanged).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from retbench.alignment import align
from retbench.cli import app
from retbench.data import Run
from retbench.evaluation import evaluate
from retbench.io.golden import read_golden
from retbench.io.outputs import read_outputs

GOLDEN = [{"id": f"u{i}", "input": {"question": f"unknowable {i}?"}, "answerable": False} for i in range(1, 5)]
TIMED_OUT = [
    {"id": "u1", "retrieved": [], "error": "timeout"},
    {"id": "u2", "retrieved": [], "error": "timeout"},
    {"id": "u3", "retrieved": [], "error": "timeout"},
    {"id": "u4", "retrieved": [], "answer": "Zeus 555-1234"},
]
HALF = [
    {"id": "u1", "retrieved": [], "answer": "Bob Smith"},
    {"id": "u2", "retrieved": [], "answer": "30 days"},
    {"id": "u3", "retrieved": [], "abstained": True, "answer": ""},
    {"id": "u4", "retrieved": [], "abstained": True, "answer": ""},
]


def _jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _eval_json(tmp_path: Path, outputs: list[dict], name: str) -> dict:
    gold = _jsonl(tmp_path / "golden.jsonl", GOLDEN)
    out = _jsonl(tmp_path / f"{name}.jsonl", outputs)
    res = CliRunner().invoke(
        app, ["eval", str(gold), str(out), "-m", "hallucination_rate", "-m", "abstention_accuracy", "-f", "json"]
    )
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)


def test_a_system_that_timed_out_never_looks_less_hallucinating_than_one_that_answered(tmp_path):
    timed_out = _eval_json(tmp_path, TIMED_OUT, "b")
    half = _eval_json(tmp_path, HALF, "a")
    # arithmetic: 3 failed answers at the worst value (1) + 1 hallucination, over 4 questions
    assert timed_out["metrics"]["hallucination_rate"]["mean"] == pytest.approx(4 / 4)
    assert timed_out["metrics"]["abstention_accuracy"]["mean"] == pytest.approx(0 / 4)
    assert half["metrics"]["hallucination_rate"]["mean"] == pytest.approx(2 / 4)
    assert timed_out["metrics"]["hallucination_rate"]["mean"] > half["metrics"]["hallucination_rate"]["mean"]


def test_an_output_record_with_an_error_is_a_failed_query_in_the_status_counts(tmp_path):
    timed_out = _eval_json(tmp_path, TIMED_OUT, "b")
    assert timed_out["status"]["error"] == 3 and timed_out["status"]["empty"] == 1
    outputs = read_outputs(_jsonl(tmp_path / "b.jsonl", TIMED_OUT))
    assert outputs.run.status_values(["u1", "u4"], np.array([0, 3])) == ["error", "empty"]


def test_the_eval_note_says_failed_answers_score_the_worst_value_where_lower_is_better(tmp_path):
    gold = _jsonl(tmp_path / "golden.jsonl", GOLDEN)
    out = _jsonl(tmp_path / "b.jsonl", TIMED_OUT)
    res = CliRunner().invoke(app, ["eval", str(gold), str(out), "-m", "hallucination_rate", "-q"])
    assert res.exit_code == 0, res.output
    note = " ".join(res.stdout.split())
    assert "3 error" in note and "worst value" in note and "lower is better" in note


def test_a_failed_retrieval_query_still_scores_0_on_a_higher_is_better_metric():
    qrels = {"q1": {"d1": 1}, "q2": {"d2": 1}, "q3": {"d3": 1}}
    # q2 missing: trec_eval -c scores it 0; q3 timed out after its backend had sent back the relevant document,
    # and a failed query is not credited with what it returned before failing
    run = Run.from_dict({"q1": {"d1": 1.0}, "q3": {"d3": 1.0}}, status={"q3": "timeout"})
    ev = evaluate(run, qrels, ["ndcg@10", "P@5"])
    assert ev.values[ev.query_ids.index("q2")].tolist() == [0.0, 0.0]
    assert ev.values[ev.query_ids.index("q3")].tolist() == [0.0, 0.0]
    assert ev.values[ev.query_ids.index("q1")].tolist() == [1.0, pytest.approx(0.2)]


def test_comparing_systems_puts_a_missing_answer_at_the_worst_value_of_a_lower_is_better_metric(tmp_path):
    gold = _jsonl(tmp_path / "golden.jsonl", GOLDEN)
    samples = read_golden(gold)
    answered = read_outputs(_jsonl(tmp_path / "a.jsonl", HALF))
    partial = read_outputs(_jsonl(tmp_path / "p.jsonl", HALF[2:]))  # u1, u2 absent: missing
    qrels = {s.id: {} for s in samples}
    evs = [
        evaluate(o.run, qrels, ["hallucination_rate"], samples=samples, answers=o.answers, system=n)
        for o, n in ((answered, "a"), (partial, "p"))
    ]
    al = align(*evs)
    assert al.b[:, 0].tolist() == [1.0, 1.0, 0.0, 0.0]  # missing u1, u2: the worst, not "did not hallucinate"
    assert evs[1].values[:, 0].tolist() == [1.0, 1.0, 0.0, 0.0]


def test_an_answer_that_could_not_be_produced_scores_the_worst_negative_match_even_when_retrieval_succeeded(tmp_path):
    gold = _jsonl(
        tmp_path / "golden.jsonl",
        [
            {
                "id": "q1",
                "input": {"question": "refund window?"},
                "metadata": {"negative_answers": ["90 days"]},
                "expected_output": ["d1"],
            }
        ],
    )
    samples = read_golden(gold)
    outputs = read_outputs(_jsonl(tmp_path / "o.jsonl", [{"id": "q1", "retrieved": ["d1"], "error": "generator 500"}]))
    ev = evaluate(outputs.run, {"q1": {"d1": 1}}, ["negative_match"], samples=samples, answers=outputs.answers)
    assert ev.values[:, 0].tolist() == [1.0] and ev.status == ["error"]
