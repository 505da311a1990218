"""Answer metrics: SQuAD EM/F1, BLEU, ROUGE, containment, attribution, abstention, on answer-side inputs.

Hand-computed values where the arithmetic is short; the libraries' own outputs (sacrebleu,
rouge_score called directly) on real text from the shipped chunking set where it is not.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from retbench.comparison import compare_pair
from retbench.criteria import load_criteria
from retbench.data import QueryStatus, RunBuilder
from retbench.data.answers import SystemAnswer
from retbench.data.samples import groups_from_samples, qrels_from_samples
from retbench.errors import InputError
from retbench.evaluation import evaluate
from retbench.gates import run_gates
from retbench.io.golden import read_golden
from retbench.io.outputs import read_outputs
from retbench.metrics import answers as am

sacrebleu = pytest.importorskip("sacrebleu", reason="the answers extra (sacrebleu) is not installed")
rouge_scorer = pytest.importorskip(
    "rouge_score.rouge_scorer", reason="the answers extra (rouge-score) is not installed"
)

# real sentences: a gold excerpt of the chunking set (state_of_the_union.md) and two paraphrases
EXCERPT = "Over 100 million of you can no longer be denied health insurance because of a preexisting condition."
ANSWER = "More than 100 million people can no longer be denied health insurance for a preexisting condition."
OTHER = "100 million Americans are protected from denial of coverage because of preexisting conditions."

GOLDEN = """\
samples:
  - id: q1
    input: {question: "How many people can no longer be denied insurance for a preexisting condition?"}
    expected_output: [sotu-12]
    tags: [health]
    metadata: {answer: ["Over 100 million", "more than 100 million people"], negative_answers: ["10 million"]}
  - id: q2
    input: "What was cut from $32 to $8?"
    expected_output: ["guide.md > Fees"]
    metadata: {answer: "credit card late fees"}
  - id: q3
    input: "What is the capital of Mars?"
    answerable: false
  - id: q4
    input: "Who won the 1950 World Cup?"
    metadata: {answerable: false}
"""

OUTPUTS = [
    {"id": "q1", "retrieved": ["sotu-12", "d2"], "answer": "Over 100 million.", "references": ["sotu-12"]},
    {
        "id": "q2",
        "retrieved": ["d9"],
        "answer": "The late fees on credit cards",
        "references": [{"rel_path": "guide.md", "heading_path": "Fees > Cards"}],
        "latency": {"retrieval": 0.01, "generation": 0.5},
    },
    {"id": "q3", "retrieved": ["d4"], "answer": "I cannot tell from the documents.", "abstained": True},
    {"id": "q4", "retrieved": ["d5"], "answer": "Uruguay won it."},
]


@pytest.fixture
def rag(tmp_path):
    gold = tmp_path / "golden.yaml"
    gold.write_text(GOLDEN)
    out = tmp_path / "outputs.jsonl"
    out.write_text("".join(json.dumps(r) + "\n" for r in OUTPUTS))
    return read_golden(gold), read_outputs(out)


def test_squad_normalization_drops_case_punctuation_articles_and_extra_space():
    assert am.squad_normalize("  The Cat, sat on  an old mat! ") == "cat sat on old mat"
    assert am.exact_match("The cat sat.", "cat sat") == 1.0
    assert am.exact_match("cats sat", "cat sat") == 0.0


def test_token_f1_counts_common_tokens_with_multiplicity():
    # answer tokens: cat sat on mat (4); reference: cat on mat (3); common 3 -> P 3/4, R 1, F1 6/7
    assert am.token_f1("the cat sat on the mat", "a cat on a mat") == pytest.approx(6 / 7)
    # "the the cat" -> [cat]; common with [cat, cat] is one token: P 1, R 1/2
    assert am.token_f1("cat", "cat cat") == pytest.approx(2 / 3)
    assert am.token_f1("the", "an") == 1.0  # both empty after normalization
    assert am.token_f1("dog", "the") == 0.0


def test_bleu_is_sacrebleu_sentence_bleu_over_100_best_of_references():
    own = [sacrebleu.sentence_bleu(ANSWER, [r]).score / 100 for r in (EXCERPT, OTHER)]
    assert am.best(am.bleu, ANSWER, [EXCERPT, OTHER]) == pytest.approx(max(own))
    assert 0.0 < max(own) < 1.0
    assert am.bleu(EXCERPT, EXCERPT) == pytest.approx(1.0)


def test_rouge_is_rouge_score_f_measure_best_of_references():
    scorer = rouge_scorer.RougeScorer(["rouge1", "rouge2", "rougeL"])
    for kind in ("rouge1", "rouge2", "rougeL"):
        own = scorer.score_multi([EXCERPT, OTHER], ANSWER)[kind].fmeasure
        assert am.best(am.rouge_metric(kind), ANSWER, [EXCERPT, OTHER]) == pytest.approx(own)
    # ROUGE-1 by hand: "a b c d" vs "a b e": 2 common unigrams, P 2/4, R 2/3 -> F 4/7
    assert am.rouge("a b c d", "a b e", "rouge1") == pytest.approx(4 / 7)


def test_golden_set_reads_answerable_reference_and_negative_answers(rag):
    samples, _ = rag
    s = {x.id: x for x in samples}
    assert s["q1"].answers == ["Over 100 million", "more than 100 million people"]
    assert s["q1"].answer == "Over 100 million"
    assert s["q1"].negative_answers == ["10 million"]
    assert s["q3"].answerable is False and s["q3"].expected == {}
    assert s["q4"].answerable is False


def test_outputs_carry_answer_references_abstention_and_stage_latency(rag):
    _, out = rag
    assert out.answers["q1"] == SystemAnswer("Over 100 million.", ("sotu-12",), None, {})
    assert out.answers["q2"].references == ("guide.md > Fees > Cards",)
    assert out.answers["q2"].latency == {"retrieval": 0.01, "generation": 0.5}
    assert out.answers["q3"].abstained is True
    assert out.run.docs("q1") == ["sotu-12", "d2"]


@pytest.mark.parametrize(
    ("record", "field"),
    [
        ({"id": "q1", "retrieved": [], "abstained": "yes"}, "abstained"),
        ({"id": "q1", "retrieved": [], "answer": 3}, "answer"),
        ({"id": "q1", "retrieved": [], "references": "d1"}, "references"),
        ({"id": "q1", "retrieved": [], "references": [{"title": "x"}]}, "references"),
        ({"id": "q1", "retrieved": [], "latency": {"generation": -1}}, "latency.generation"),
    ],
)
def test_a_bad_answer_field_names_file_line_and_field(tmp_path, record, field):
    out = tmp_path / "out.jsonl"
    out.write_text(json.dumps({"id": "q0", "retrieved": ["d1"]}) + "\n" + json.dumps(record) + "\n")
    with pytest.raises(InputError) as err:
        read_outputs(out)
    assert err.value.line == 2 and err.value.field == field
    assert f"{out}:2" in str(err.value)


def test_an_unanswerable_sample_with_a_reference_answer_is_refused(tmp_path):
    gold = tmp_path / "g.yaml"
    gold.write_text("- {id: q1, input: x, answerable: false, metadata: {answer: y}}\n")
    with pytest.raises(InputError, match="unanswerable") as err:
        read_golden(gold)
    assert err.value.line == 1


METRICS = [
    "recall@5",
    "exact_match",
    "token_f1",
    "rougeL",
    "bleu",
    "reference_containment",
    "attribution",
    "abstention_accuracy",
    "hallucination_rate",
    "negative_match",
]


def _evaluate(samples, out):
    return evaluate(out.run, qrels_from_samples(samples), METRICS, samples=samples, answers=out.answers)


def test_answer_metrics_apply_only_where_they_should_and_show_n_of_m(rag):
    ev = _evaluate(*rag)
    assert ev.query_ids == ["q1", "q2", "q3", "q4"]  # unanswerable questions are counted, not skipped
    col = {m: ev.column(m).tolist() for m in ev.metrics}
    # retrieval metrics do not apply to unanswerable questions
    assert col["recall@5"][:2] == [1.0, 0.0] and np.isnan(col["recall@5"][2:]).all()
    assert col["exact_match"][:2] == [1.0, 0.0] and np.isnan(col["exact_match"][2:]).all()
    # "The late fees on credit cards" vs "credit card late fees": tokens late fees on credit cards (5)
    # vs credit card late fees (4); common: late, fees, credit -> P 3/5, R 3/4
    assert col["token_f1"][1] == pytest.approx(2 * 0.6 * 0.75 / 1.35)
    assert col["reference_containment"][:2] == [1.0, 0.0]
    # q2 cites guide.md > Fees > Cards, under the gold anchor guide.md > Fees
    assert col["attribution"][:2] == [1.0, 1.0]
    assert np.isnan(col["abstention_accuracy"][:2]).all() and col["abstention_accuracy"][2:] == [1.0, 0.0]
    assert col["hallucination_rate"][2:] == [0.0, 1.0]
    assert col["negative_match"][0] == 0.0 and np.isnan(col["negative_match"][1:]).all()
    agg = ev.aggregate(ci=True, n_boot=200)
    assert agg["abstention_accuracy"] == pytest.approx({"mean": 0.5, "n": 2, "of": 4, "ci_low": 0.0, "ci_high": 1.0})
    assert agg["recall@5"]["n"] == 2 and agg["recall@5"]["mean"] == 0.5
    assert ev.applicable()["negative_match"] == 1


def test_breakdowns_average_over_the_queries_a_metric_applies_to(rag):
    samples, out = rag
    ev = _evaluate(samples, out)
    groups = {"answerable": ["q1", "q2"], "unanswerable": ["q3", "q4"], **groups_from_samples(samples)}
    bd = ev.breakdown(groups)
    assert bd["answerable"]["exact_match"] == 0.5 and math.isnan(bd["answerable"]["abstention_accuracy"])
    assert bd["unanswerable"]["hallucination_rate"] == 0.5 and math.isnan(bd["unanswerable"]["recall@5"])
    assert bd["health"]["token_f1"] == 1.0


def test_a_system_without_an_answer_scores_zero_and_counts_as_abstaining(rag):
    samples, out = rag
    ev = evaluate(out.run, qrels_from_samples(samples), METRICS, samples=samples, answers={})
    assert ev.column("exact_match").tolist()[:2] == [0.0, 0.0]
    assert ev.column("abstention_accuracy").tolist()[2:] == [1.0, 1.0]


def test_paired_comparison_and_gates_use_only_applicable_queries(rag, tmp_path):
    samples, out = rag
    a = _evaluate(samples, out)
    better = dict(out.answers)
    better["q4"] = SystemAnswer("The documents do not say.", (), True)
    better["q2"] = SystemAnswer("credit card late fees", ("guide.md > Fees",))
    b = evaluate(out.run, qrels_from_samples(samples), METRICS, samples=samples, answers=better, system="b")
    pair = compare_pair(a, b, ["abstention_accuracy", "exact_match"], n_resamples=200)
    by = {m.metric: m for m in pair.metrics}
    assert by["abstention_accuracy"].n == 2 and by["abstention_accuracy"].delta == 0.5
    assert by["exact_match"].n == 2 and by["exact_match"].mean_b == 1.0
    crit = tmp_path / "criteria.yaml"
    crit.write_text(
        "gates:\n  - {name: abstain, metric: abstention_accuracy, threshold: 0.9}\n  - {name: em, metric: exact_match, threshold: 0.9}\n"
    )
    report = run_gates(load_criteria(crit), b, n_resamples=200)
    assert [r.candidate for r in report.results] == [1.0, 1.0]
    report = run_gates(load_criteria(crit), a, n_resamples=200)
    assert [r.candidate for r in report.results] == [0.5, 0.5]


def test_failed_queries_score_zero_only_where_a_metric_applies(rag):
    samples, out = rag
    builder = RunBuilder("failing")
    builder.add("q1", [("sotu-12", 1.0)])
    builder.add("q3", status=QueryStatus.ERROR, error="HTTP 500")
    run = builder.build()
    ev = evaluate(run, qrels_from_samples(samples), METRICS, samples=samples, answers=out.answers)
    row = dict(zip(ev.query_ids, ev.values.tolist(), strict=True))["q3"]
    values = dict(zip(ev.metrics, row, strict=True))
    assert values["abstention_accuracy"] == 0.0 and math.isnan(values["exact_match"])


def test_retbench_eval_scores_answers_of_a_rag_outputs_file(tmp_path):
    from typer.testing import CliRunner

    from retbench.cli import app

    gold = tmp_path / "golden.yaml"
    gold.write_text(GOLDEN)
    out = tmp_path / "outputs.jsonl"
    out.write_text("".join(json.dumps(r) + "\n" for r in OUTPUTS))
    res = CliRunner().invoke(app, ["eval", str(gold), str(out), "--format", "json"])
    assert res.exit_code == 0, res.output
    data = json.loads(res.output)
    assert data["metrics"]["abstention_accuracy"]["n"] == 2 and data["metrics"]["abstention_accuracy"]["of"] == 4
    assert data["metrics"]["exact_match"]["mean"] == 0.5
    assert data["group_sizes"] == {"health": 1, "answerable": 2, "unanswerable": 2}
    assert data["breakdown"]["unanswerable"]["hallucination_rate"] == 0.5
    table = CliRunner().invoke(app, ["eval", str(gold), str(out)])
    assert table.exit_code == 0 and "2 of 4" in table.output


def test_gates_cap_a_lower_is_better_metric_and_call_its_rise_the_regression(rag, tmp_path):
    samples, out = rag
    a = _evaluate(samples, out)  # hallucination_rate 0.5 on the two unanswerable questions
    worse = dict(out.answers)
    worse["q3"] = SystemAnswer("It was 1999.", (), False)  # now answers the other unanswerable one too
    b = evaluate(out.run, qrels_from_samples(samples), METRICS, samples=samples, answers=worse, system="b")
    crit = tmp_path / "criteria.yaml"
    crit.write_text("gates:\n  - {name: halluc, metric: hallucination_rate, threshold: 0.6, regression_max: 0.1}\n")
    ok = run_gates(load_criteria(crit), a, a, n_resamples=200)
    assert ok.results[0].passed and ok.results[0].checks[0].kind == "ceiling"  # 0.5 <= 0.6 passes a ceiling
    bad = run_gates(load_criteria(crit), b, a, n_resamples=200)
    r = bad.results[0]
    assert r.candidate == 1.0 and not r.passed
    kinds = {c.kind: c for c in r.checks}
    assert not kinds["ceiling"].passed and kinds["regression"].value == pytest.approx(0.5)
    from retbench.report.gate_comment import reasons, render_comment

    why = " ".join(reasons(r))
    assert "above the 60.0% ceiling" in why and "the rise of" in why
    assert "at most 60.0%" in render_comment(bad)
