"""System outputs as eval harnesses write them: `actualOutput` / `actual_output` / `output` beside `retrieved`,
as an object, a bare array, or JSON text holding either; text that is not JSON is one line naming the record.

The golden set is the format's worked example: q-1 judges doc-3 and doc-9 relevant at k = 5, and the
retriever returns [doc-7, doc-3, doc-1, doc-9, doc-2]: hit@5 1, recall@5 1, MRR 1/2, nDCG@5 ~ 0.6509.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from typer.testing import CliRunner

from retbench.cli import app

runner = CliRunner()
WORKED = ["doc-7", "doc-3", "doc-1", "doc-9", "doc-2"]
GOLDEN = """samples:
  - id: q-1
    input: {question: "What is our refund window?"}
    expected_output: ["doc-3", "doc-9"]
    metadata: {k: 5}
"""


def ndcg_binary(ranked: list[str], relevant: set[str], k: int) -> float:
    """nDCG@k with binary gains, from its definition: sum 1/log2(rank + 1) over hits, over the ideal ranking's."""
    dcg = sum(1 / math.log2(r + 1) for r, d in enumerate(ranked[:k], start=1) if d in relevant)
    return dcg / sum(1 / math.log2(r + 1) for r in range(1, min(len(relevant), k) + 1))


def scores(tmp_path: Path, *records: dict) -> dict[str, float]:
    (tmp_path / "golden.yaml").write_text(GOLDEN)
    (tmp_path / "outputs.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    res = runner.invoke(app, ["eval", str(tmp_path / "golden.yaml"), str(tmp_path / "outputs.jsonl"), "-f", "json"])
    assert res.exit_code == 0, res.output
    return {m: v["mean"] for m, v in json.loads(res.stdout)["metrics"].items()}


def test_the_worked_example_as_actual_output_json_text_scores_the_worked_numbers(tmp_path: Path) -> None:
    got = scores(tmp_path, {"id": "q-1", "actualOutput": json.dumps(WORKED)})
    assert got["hit@5"] == 1.0 and got["recall@5"] == 1.0 and got["mrr"] == 0.5
    assert got["ndcg@5"] == pytest.approx(ndcg_binary(WORKED, {"doc-3", "doc-9"}, 5), abs=1e-12)
    assert round(got["ndcg@5"], 4) == 0.6509
    assert got == scores(tmp_path, {"id": "q-1", "retrieved": WORKED})


def test_the_two_document_actual_output_record_scores_as_the_same_ids_under_retrieved(tmp_path: Path) -> None:
    record = {"id": "q-1", "actualOutput": '["doc-7", "doc-3"]'}
    got = scores(tmp_path, record)
    # doc-9 was not retrieved: recall 1/2, nDCG@5 (1/log2 3) / (1 + 1/log2 3)
    assert got["hit@5"] == 1.0 and got["recall@5"] == 0.5 and got["mrr"] == 0.5
    assert got["ndcg@5"] == pytest.approx(ndcg_binary(["doc-7", "doc-3"], {"doc-3", "doc-9"}, 5), abs=1e-12)
    assert got == scores(tmp_path, {"id": "q-1", "retrieved": ["doc-7", "doc-3"]})


@pytest.mark.parametrize(
    "record",
    [
        {"id": "q-1", "actualOutput": json.dumps({"retrieved": [{"id": d, "text": "..."} for d in WORKED]})},
        {"id": "q-1", "actual_output": json.dumps(WORKED)},
        {"id": "q-1", "actual_output": {"retrieved": WORKED}},
        {"id": "q-1", "output": WORKED},
        {"id": "q-1", "actualOutput": WORKED},
    ],
    ids=["object-text", "snake-array-text", "snake-object", "output-array", "camel-array"],
)
def test_every_harness_shape_of_the_worked_output_scores_as_retrieved_does(tmp_path: Path, record: dict) -> None:
    assert scores(tmp_path, record) == scores(tmp_path, {"id": "q-1", "retrieved": WORKED})


def test_an_answer_inside_the_actual_output_text_is_read_as_the_answer_side(tmp_path: Path) -> None:
    (tmp_path / "golden.yaml").write_text(GOLDEN.replace("{k: 5}", '{k: 5, answer: "30 days"}'))
    output = {"retrieved": WORKED, "answer": "30 Days."}
    (tmp_path / "outputs.jsonl").write_text(json.dumps({"id": "q-1", "actualOutput": json.dumps(output)}) + "\n")
    res = runner.invoke(
        app,
        ["eval", str(tmp_path / "golden.yaml"), str(tmp_path / "outputs.jsonl"), "-f", "json", "-m", "exact_match"],
    )
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["metrics"]["exact_match"]["mean"] == 1.0


def test_actual_output_text_that_is_not_json_is_one_line_naming_the_record(tmp_path: Path) -> None:
    (tmp_path / "golden.yaml").write_text(GOLDEN)
    out = tmp_path / "outputs.jsonl"
    out.write_text(
        json.dumps({"id": "q-0", "retrieved": []})
        + "\n"
        + json.dumps({"id": "q-1", "actualOutput": "doc-7, doc-3"})
        + "\n"
    )
    res = runner.invoke(app, ["eval", str(tmp_path / "golden.yaml"), str(out)])
    assert res.exit_code == 2 and "Traceback" not in res.output
    err = res.stderr.strip()
    assert len(err.splitlines()) == 1
    assert f"{out}:2" in err and "field 'actualOutput'" in err and "not JSON" in err


def test_a_record_with_retrieved_and_an_actual_output_answer_keeps_both(tmp_path: Path) -> None:
    (tmp_path / "golden.yaml").write_text(GOLDEN.replace("{k: 5}", '{k: 5, answer: "30 days"}'))
    record = {"id": "q-1", "retrieved": WORKED, "actualOutput": "30 Days."}  # deepeval: the generated answer
    (tmp_path / "outputs.jsonl").write_text(json.dumps(record) + "\n")
    args = ["eval", str(tmp_path / "golden.yaml"), str(tmp_path / "outputs.jsonl"), "-f", "json"]
    res = runner.invoke(app, [*args, "-m", "exact_match", "-m", "mrr"])
    assert res.exit_code == 0, res.output
    metrics = json.loads(res.stdout)["metrics"]
    assert metrics["exact_match"]["mean"] == 1.0 and metrics["mrr"]["mean"] == 0.5


@pytest.mark.parametrize(
    ("record", "words"),
    [
        ({"id": "q-1", "retrieved": WORKED, "actualOutput": json.dumps(["doc-9"])}, "two different rankings"),
        ({"id": "q-1", "retrieved": WORKED, "answer": "30 days", "actual_output": "60 days"}, "two different answers"),
    ],
)
def test_a_record_holding_two_different_outputs_is_refused_naming_the_field(
    tmp_path: Path, record: dict, words: str
) -> None:
    (tmp_path / "golden.yaml").write_text(GOLDEN)
    out = tmp_path / "outputs.jsonl"
    out.write_text(json.dumps(record) + "\n")
    res = runner.invoke(app, ["eval", str(tmp_path / "golden.yaml"), str(out)])
    assert res.exit_code == 2 and f"{out}:1" in res.stderr and words in res.stderr, res.output


def test_a_sample_given_two_outputs_is_refused_naming_both_records(tmp_path: Path) -> None:
    (tmp_path / "golden.yaml").write_text(GOLDEN)
    out = tmp_path / "outputs.jsonl"
    records = [{"id": "q-1", "retrieved": WORKED}, {"id": "q-2", "retrieved": []}, {"id": "q-1", "retrieved": []}]
    out.write_text("".join(json.dumps(r) + "\n" for r in records))
    res = runner.invoke(app, ["eval", str(tmp_path / "golden.yaml"), str(out)])
    assert res.exit_code == 2 and f"{out}:3" in res.stderr and "first is on line 1" in res.stderr, res.output
    mapping = tmp_path / "outputs.json"
    mapping.write_text('{"q-1": ["doc-3"], "q-1": ["doc-7"]}')
    res = runner.invoke(app, ["eval", str(tmp_path / "golden.yaml"), str(mapping)])
    assert res.exit_code == 2 and "'q-1' is given twice" in res.stderr, res.output
